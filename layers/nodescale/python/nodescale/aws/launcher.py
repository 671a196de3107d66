"""From a NodePool, its node class and the instance types the scheduler picked, to instances.

``Launcher`` ties the adapters together for one invocation: the cluster is described once, each
node class's AMIs, subnets, security groups and instance profile are looked up once, templates are
ensured once, and the unavailable-offerings table is read once. The provisioner launches with it;
the disruption function asks it which configuration hashes and launch templates are current
(drift and clean-up) without creating anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..disruption.drift import Drifted, LaunchedWith, NodeClassNow, cloud_drift
from ..model import blockdevices
from ..model import labels as wk
from ..model.instance import ManagedInstance
from ..model.instancetype import InstanceType, windows_build
from ..model.nodepool import NodeClass, NodePool
from ..model.requirements import Requirements
from ..settings import Settings
from . import ami as amis
from . import cluster as clusters
from . import fleet, instanceprofiles, launchtemplates, securitygroups, subnets, userdata
from . import tags as tagging
from .clients import AwsClients
from .offerings import UnavailableOfferings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeClassResources:
    """What a node class resolves to in this account, right now."""

    node_class: NodeClass
    family: str
    amis: amis.ResolvedAmis
    subnets: tuple[subnets.Subnet, ...]
    zones: dict[str, subnets.Subnet]  # the subnet each zone launches into
    security_groups: tuple[securitygroups.SecurityGroup, ...]
    instance_profile: str


@dataclass(frozen=True)
class PlannedTemplate:
    spec: launchtemplates.LaunchTemplateSpec
    ami: amis.Ami
    instance_types: tuple[InstanceType, ...] = field(default=())


class Launcher:
    def __init__(
        self,
        clients: AwsClients,
        cluster_name: str,
        table_name: str | None = None,
        default_instance_profile: str | None = None,
        offering_ttl_seconds: float = 180.0,
        cluster: clusters.ClusterInfo | None = None,
        windows_instance_profile: str | None = None,
    ) -> None:
        self.clients = clients
        self.cluster_name = cluster_name
        self.default_instance_profile = default_instance_profile
        self.windows_instance_profile = windows_instance_profile
        self.offerings = UnavailableOfferings(clients.dynamodb, table_name, offering_ttl_seconds)
        self._cluster = cluster
        self._resources: dict[str, NodeClassResources] = {}
        self._subnets: dict[str, tuple[NodeClass, list[subnets.Subnet]]] = {}
        self._templates: dict[str, launchtemplates.LaunchTemplateRef] = {}
        self._hashes: dict[tuple[str, str], tuple[NodePool, NodeClass, set[str]]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, clients: AwsClients | None = None) -> Launcher:
        return cls(
            clients or AwsClients.for_region(settings.region),
            settings.cluster_name,
            settings.table_name,
            settings.instance_profile,
            settings.unavailable_offering_ttl_seconds,
            windows_instance_profile=settings.windows_instance_profile,
        )

    @property
    def cluster(self) -> clusters.ClusterInfo:
        if self._cluster is None:
            self._cluster = clusters.describe(self.clients.eks, self.cluster_name)
        return self._cluster

    def subnets(self, node_class: NodeClass) -> list[subnets.Subnet]:
        """The node class's subnets (looked up once): all that offerings by zone need, without the images,
        security groups and instance profile a launch resolves too."""
        found = self._subnets.get(node_class.name)
        if found is not None and found[0] == node_class:
            return found[1]
        where = node_class.source or f"node class {node_class.name}"
        nets = subnets.discover(self.clients.ec2, node_class.subnet_selector_terms, f"{where}: subnetSelectorTerms")
        self._subnets[node_class.name] = (node_class, nets)
        return nets

    def subnet_zones(self, node_class: NodeClass) -> frozenset[str]:
        """The zones a node of this class can launch into: those with a subnet that has free addresses."""
        return frozenset(subnets.best_per_zone(self.subnets(node_class)))

    def resources(self, node_class: NodeClass) -> NodeClassResources:
        """The node class's images, subnets, security groups and profile (looked up once)."""
        found = self._resources.get(node_class.name)
        if found is not None and found.node_class == node_class:
            return found
        where = node_class.source or f"node class {node_class.name}"
        resolved = amis.resolve(node_class, self.clients.ssm, self.clients.ec2, self.cluster.version)
        nets = self.subnets(node_class)
        groups = securitygroups.discover(
            self.clients.ec2, node_class.security_group_selector_terms, f"{where}: securityGroupSelectorTerms"
        )
        profile = instanceprofiles.resolve(
            self.clients.iam, node_class, self.default_instance_profile, self.windows_instance_profile,
            windows=windows_build(resolved.family) is not None,
        )
        found = NodeClassResources(
            node_class,
            resolved.family,
            resolved,
            tuple(nets),
            subnets.best_per_zone(nets),
            tuple(groups),
            profile,
        )
        self._resources[node_class.name] = found
        return found

    def templates(
        self, nodepool: NodePool, node_class: NodeClass, instance_types: Sequence[InstanceType] | None = None
    ) -> list[PlannedTemplate]:
        """The launch templates this pool launches with: one per image, with the types it serves
        (every image when ``instance_types`` is None). Nothing is created."""
        res = self.resources(node_class)
        where = f"{node_class.source or 'node class ' + node_class.name}: userData"
        node = userdata.bootstrap_for(nodepool, node_class)

        def render(bootstrap: userdata.NodeBootstrap, max_pods: int | None = None) -> str:
            return userdata.render(
                res.family, self.cluster, userdata.with_max_pods(bootstrap, max_pods), node_class.user_data, where
            )

        # The hashed user data leaves out what the image's name adds: the image is compared on its own.
        data = render(node)
        common = dict(
            cluster=self.cluster_name,
            hashed_user_data=data,
            security_group_ids=tuple(sorted(g.id for g in res.security_groups)),
            instance_profile=res.instance_profile,
            metadata_options=launchtemplates.metadata_options(node_class),
            block_device_mappings=tuple(blockdevices.block_device_mappings(node_class, res.family)),
            tags=tagging.resource_tags(self.cluster_name, nodepool.real_name, node_class.real_name, node_class.tags,
                                      nodepool.label_key),
            detailed_monitoring=node_class.detailed_monitoring,
            associate_public_ip=node_class.associate_public_ip_address,
            reservations_targeted=bool(node_class.capacity_reservation_selector_terms),
        )
        if instance_types is None:
            groups = {a: () for a in res.amis.amis}
        else:
            groups = {a: tuple(ts) for a, ts in res.amis.group(instance_types).items()}
            unmatched = sorted({t.name for t in instance_types} - {t.name for ts in groups.values() for t in ts})
            if unmatched:
                log.info(
                    "instance types without a matching image left out",
                    extra={"nodepool": nodepool.name, "instance_types": unmatched[:20]},
                )
        # One template per image and max-pods, as Karpenter makes one per distinct max-pods: a node's kubelet
        # then admits the pods the planner counted on (bounded by the distinct pod counts of the types).
        planned: list[PlannedTemplate] = []
        for a, ts in groups.items():
            image_node = userdata.for_image(node, a.name)
            for pods, members in userdata.max_pods_groups(image_node, res.family, ts):
                text = data if pods is None and image_node == node else render(image_node, pods)
                spec = launchtemplates.LaunchTemplateSpec(image_id=a.image_id, user_data=text, **common)  # type: ignore[arg-type]
                planned.append(PlannedTemplate(spec, a, members))
        return planned

    def current_config_hashes(self, nodepool: NodePool, node_class: NodeClass) -> set[str]:
        """The settings hashes (everything but the image) instances of this pool should carry."""
        key = (nodepool.name, node_class.name)
        memo = self._hashes.get(key)
        if memo is not None and memo[0] == nodepool and memo[1] == node_class:
            return memo[2]  # drift checks ask once per instance: render once per pool
        hashes = {t.spec.settings_hash for t in self.templates(nodepool, node_class)}
        self._hashes[key] = (nodepool, node_class, hashes)
        return hashes

    def current_template_names(
        self, nodepool: NodePool, node_class: NodeClass, instance_types: Sequence[InstanceType] = ()
    ) -> set[str]:
        """Every image's template, and those ``instance_types`` (the pool's catalog) launch with: one per
        max-pods value."""
        names = {t.spec.name for t in self.templates(nodepool, node_class)}
        if instance_types:
            names |= {t.spec.name for t in self.templates(nodepool, node_class, instance_types)}
        return names

    def drift(self, instance: ManagedInstance, nodepool: NodePool, node_class: NodeClass) -> Drifted | None:
        """Why an instance no longer matches its node class, or None (``disruption.drift.cloud_drift``
        decides; this reads what the node class resolves to, and renders its templates only if asked)."""
        res = self.resources(node_class)
        launched = LaunchedWith(instance.image_id, instance.subnet_id, instance.config_hash, instance.security_group_ids)
        now = NodeClassNow(
            image_ids=res.amis.image_ids,
            subnet_ids=frozenset(s.id for s in res.subnets),
            security_group_ids=frozenset(g.id for g in res.security_groups),
        )
        return cloud_drift(launched, now, lambda: self.current_config_hashes(nodepool, node_class))

    def _ensure(self, spec: launchtemplates.LaunchTemplateSpec) -> launchtemplates.LaunchTemplateRef:
        ref = self._templates.get(spec.name)
        if ref is None:
            ref = self._templates[spec.name] = launchtemplates.ensure(self.clients.ec2, spec)
        return ref

    def launch(
        self,
        nodepool: NodePool,
        node_class: NodeClass,
        instance_types: Sequence[InstanceType],
        key: str,
        count: int = 1,
        requirements: Requirements | None = None,
        fence: Callable[[], None] | None = None,
    ) -> fleet.LaunchResult:
        """Launch ``count`` nodes of ``nodepool`` on the cheapest available of ``instance_types``.

        ``requirements`` (e.g. the pods') narrow the pool's zones and capacity types further;
        ``key`` identifies the planned node(s) so a retry of the same launch is idempotent;
        ``fence`` is called right before each CreateFleet (see ``fleet.launch``).
        """
        reqs = nodepool.requirements if requirements is None else nodepool.requirements.intersect(requirements)
        res = self.resources(node_class)
        zone_req = reqs.get(wk.ZONE)
        zones = {z: s for z, s in res.zones.items() if zone_req is None or zone_req.has(z)}
        ct_req = reqs.get(wk.CAPACITY_TYPE)
        capacity_types = tuple(
            c
            for c in (wk.CAPACITY_RESERVED, wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND)
            if (ct_req.has(c) if ct_req is not None else c == wk.CAPACITY_ON_DEMAND)
        )
        result = fleet.LaunchResult(requested=count)
        if not zones:
            result.request_errors.append(
                ("NoSubnetInAllowedZones", f"no selected subnet with free addresses in {sorted(res.zones) or 'any zone'}")
            )
            return result
        if not capacity_types:
            result.request_errors.append(
                ("NoAllowedCapacityType", "the requirements allow none of reserved, spot and on-demand")
            )
            return result
        fitting = [t for t in instance_types if _fits(t, reqs)]
        planned = [t for t in self.templates(nodepool, node_class, fitting) if t.instance_types]
        if not planned:
            result.request_errors.append(("NoMatchingImage", "no resolved image fits any of the instance types"))
            return result
        choices = tuple(
            fleet.TemplateChoice(self._ensure(t.spec).name, t.instance_types) for t in planned
        )
        if wk.CAPACITY_RESERVED in capacity_types:
            choices += self._reserved_choices(planned, zones)
        request = fleet.LaunchRequest(
            cluster=self.cluster_name,
            nodepool=nodepool.real_name,
            nodeclass=node_class.real_name,
            pool_tag=nodepool.label_key,
            templates=choices,
            subnets=zones,
            capacity_types=capacity_types,
            key=key,
            count=count,
            tags=node_class.tags,
            config_hash=planned[0].spec.settings_hash,
            context=node_class.context,
        )
        return fleet.launch(self.clients.ec2, request, self.offerings, fence=fence)

    def _reserved_choices(
        self, planned: Sequence[PlannedTemplate], zones: Mapping[str, object]
    ) -> tuple[fleet.TemplateChoice, ...]:
        """One template per image and capacity reservation (its target), with the types it reserves:
        a template targets one reservation, as Karpenter makes one per reservation id."""
        out = []
        for t in planned:
            by_reservation: dict[tuple[str, str], list[InstanceType]] = {}
            for it in t.instance_types:
                for o in it.offerings:
                    if o.capacity_type == wk.CAPACITY_RESERVED and o.available and o.zone in zones:
                        by_reservation.setdefault((o.reservation_id, o.reservation_type), []).append(it)
            for (rid, rtype), types in sorted(by_reservation.items()):
                spec = replace(t.spec, capacity_reservation_id=rid, capacity_reservation_type=rtype)
                out.append(fleet.TemplateChoice(self._ensure(spec).name, tuple(types), reservation_id=rid))
        return tuple(out)


def _fits(instance_type: InstanceType, reqs: Requirements) -> bool:
    """The type's own labels meet every requirement on a key it defines (others are the pool's)."""
    mine = instance_type.requirements
    return all(mine[key].intersects(req) for key, req in reqs.items() if key in mine)
