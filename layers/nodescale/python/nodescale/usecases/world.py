"""One snapshot of the world per invocation: NodePools, nodes, pods, this cluster's instances, catalog.

Every use-case (provisioning, interruption, disruption) reads the world once with :func:`read_world`
and decides from that snapshot, so the three functions agree on what "in flight", "existing" and
"pending" mean. Nothing here writes anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from .. import clock, telemetry
from ..aws import catalog as catalogs
from ..aws import instances as ec2_instances
from ..aws import launchfailures, pricing
from ..aws.launchfailures import LaunchFailure
from ..config.errors import ConfigError
from ..config.loader import ConfigResult
from ..k8s import listing, podcache
from ..k8s.buffer_templates import read_buffer_sources
from ..k8s.events import WARNING, EventRecorder, ObjectRef
from ..k8s.nodepool_objects import CLUSTER_KINDS
from ..model import capacityreservation as reservations_model
from ..model import nodelabels, zonalshift
from ..model.buffers import CapacityBuffer, ResolvedBuffer, resolve
from ..model.capacityreservation import CapacityReservation
from ..model.daemonset import DaemonSet
from ..model.featuregates import FeatureGates
from ..model.instance import ManagedInstance
from ..model.instancetype import InstanceType
from ..model.node import ClusterNode, trust_nodes
from ..model.nodecost import instance_price
from ..model.nodepool import NodeClass, NodePool
from ..model.overlays import NodeOverlay
from ..model.pdb import PodDisruptionBudget, read_pdbs
from ..model.pod import Pod, PodScheduling, waiting_pods
from ..model.quantity import QuantityError
from ..model.requirements import RequirementError
from ..model.taints import TaintError
from ..model.zonalshift import ActiveShift
from ..scheduling import existing, inflight
from ..scheduling.inflight import in_flight_instance
from ..scheduling.plan import ExistingNode
from ..scheduling.pooltypes import PoolTypesError, catalog_region, pool_types
from ..scheduling.volumetopology import VolumeObjects
from ..scheduling.workloads import read_daemonsets
from .nodepool_sources import load_all
from .world_sources import (
    catalog,
    gated,
    read_nodeclaims,
    read_reservations,
    read_shifts,
    read_volumes,
    with_volume_topology,
)

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class World:
    """What the cluster and the account look like right now, read once per invocation.

    Read-only: what changes during a pass (instances re-read under the launch lease, launches into a
    capacity reservation, Nodes relabelled or deleted) gives a new snapshot (``with_*``, ``without_*``),
    which the caller rebinds. The lookups are built once, when the snapshot is made.
    """

    now: datetime
    cluster: str
    nodepools: dict[str, NodePool] = field(default_factory=dict)
    nodeclasses: dict[str, NodeClass] = field(default_factory=dict)
    overlays: dict[str, NodeOverlay] = field(default_factory=dict)
    buffers: dict[str, CapacityBuffer] = field(default_factory=dict)
    # The active buffers with their virtual pods (or why they have none), in name order.
    resolved_buffers: list[ResolvedBuffer] = field(default_factory=list)
    config_errors: list[ConfigError | str] = field(default_factory=list)
    nodes: list[ClusterNode] = field(default_factory=list)
    # Every unbound, unfinished pod as read, planned with or not: why each waits (explain, status).
    waiting: list[PodScheduling] = field(default_factory=list)
    pods_by_node: dict[str, list[Pod]] = field(default_factory=dict)
    pending: list[Pod] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    instances: list[ManagedInstance] = field(default_factory=list)
    # Every karpenter.sh/v1 NodeClaim as listed once a pass (#30.1); None when the cluster does not serve them (or
    # the list failed): capacity in flight is then what EC2 shows alone.
    nodeclaims: list[dict[str, Any]] | None = None
    catalog: list[InstanceType] = field(default_factory=list, repr=False)
    unavailable: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # Availability Zones under an ARC zonal shift, by zone id: nothing launches there (aws/zonalshifts).
    shifts: dict[str, ActiveShift] = field(default_factory=dict)
    # NodePools whose last launch failed for a reason other than capacity, and why (aws/launchfailures).
    launch_failures: dict[str, LaunchFailure] = field(default_factory=dict)
    # Each node class's active capacity reservations (DescribeCapacityReservations, read every run).
    reservations: dict[str, list[CapacityReservation]] = field(default_factory=dict)
    # Pods whose spec cannot be read ("namespace/name", why); they are left out of planning.
    pod_errors: list[tuple[str, str]] = field(default_factory=list)
    # The claims, PersistentVolumes and StorageClasses (read only when a pod names a claim), and the pending
    # pods left out because their volumes cannot be honoured, with why (also in pod_errors) (#31.1).
    volumes: VolumeObjects = field(default_factory=VolumeObjects)
    volume_refusals: dict[str, str] = field(default_factory=dict)
    # Each usable pool's instance types as it launches them (pooltypes: the node class's kubelet, volumes,
    # AMI family; offerings out of capacity, under a zonal shift or without a subnet marked), and the labels
    # its node class gives its nodes (OS and Windows build).
    types: dict[str, list[InstanceType]] = field(default_factory=dict, repr=False)
    pool_labels: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    # The deployment's feature gates (FEATURE_GATES): what is off here is off in every use-case.
    gates: FeatureGates = field(default_factory=FeatureGates)
    # Derived in __post_init__ from the fields above, never given.
    # Nodes naming one of this cluster's instances without being trusted for it: name -> why (trust_nodes).
    untrusted: dict[str, str] = field(init=False, repr=False, compare=False)
    _node_by_instance: dict[str, ClusterNode] = field(init=False, repr=False, compare=False)
    _claimed: frozenset[str] = field(init=False, repr=False, compare=False)  # instance ids any Node names
    _views: dict[str, ClusterNode] = field(init=False, repr=False, compare=False)
    _instance_by_id: dict[str, ManagedInstance] = field(init=False, repr=False, compare=False)
    _zone_ids: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The lookups of this snapshot, built once (a frozen dataclass sets them through object.__setattr__).
        def derive(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        # An instance's pool by its key here: a Provisioner's named like a NodePool is provisioner/<name>.
        derive("instances", [i if (key := nodelabels.pool_key(i.tags, self.nodepools) or i.nodepool) == i.nodepool
                             else replace(i, nodepool=key) for i in self.instances])
        derive("_instance_by_id", {i.instance_id: i for i in self.instances})
        derive("_views", {view.name: view for view in self.nodes})
        derive("_claimed", frozenset(view.instance_id for view in self.nodes if view.instance_id))
        # The one mapping every use-case goes through (#27.5): a Node speaks for an instance only when its
        # name is the instance's and no other such Node claims it.
        trust = trust_nodes(self.nodes, {i.instance_id: i.private_dns_name for i in self.instances})
        derive("_node_by_instance", trust.trusted)
        derive("untrusted", trust.untrusted)
        derive("_zone_ids", {o.zone: o.zone_id for it in self.catalog for o in it.offerings if o.zone_id})

    # -- new snapshots -------------------------------------------------------------------------------------

    def with_instances(self, instances: list[ManagedInstance]) -> World:
        """This snapshot with this cluster's instances as re-read (another invocation may have launched since)."""
        return replace(self, instances=instances)

    def after_launches(self, reserved: Mapping[str, int], cleared_failures: Iterable[str] = ()) -> World:
        """This snapshot after a pass launched: ``reserved`` (reservation id -> instances launched into it)
        leaves every pool that many fewer free there (Karpenter's MarkLaunched, until the next run reads the
        count from EC2 again); the pools in ``cleared_failures`` launched, so their recorded failure is over."""
        cleared = set(cleared_failures)
        if not reserved and not cleared & set(self.launch_failures):
            return self
        types = dict(self.types)
        for reservation_id, count in reserved.items():
            types = {name: reservations_model.consume(ts, reservation_id, count) for name, ts in types.items()}
        failures = {pool: f for pool, f in self.launch_failures.items() if pool not in cleared}
        return replace(self, types=types, launch_failures=failures)

    # -- lookups -------------------------------------------------------------------------------------------

    def node_for_instance(self, instance_id: str) -> ClusterNode | None:
        """The Node trusted for the instance (#27.5), if it has registered."""
        return self._node_by_instance.get(instance_id)

    def node(self, name: str) -> ClusterNode | None:
        """The typed view of the registered Node ``name``, as listed in this snapshot."""
        return self._views.get(name)

    def node_views(self) -> list[ClusterNode]:
        """Every registered Node of this snapshot, typed, in listing order."""
        return list(self._views.values())

    def trusted_instance_id(self, node: ClusterNode) -> str | None:
        """The instance the Node speaks for: its providerID's, when it is that instance's trusted Node."""
        iid = node.instance_id
        if not iid:
            return None
        trusted = self._node_by_instance.get(iid)
        return iid if trusted is not None and trusted.name == node.name else None

    def with_node_labels(self, labels: Mapping[str, Mapping[str, str]]) -> World:
        """This snapshot with ``labels`` (node name -> labels) set on those Nodes (written since it was read)."""
        def relabelled(node: ClusterNode) -> ClusterNode:
            merged = {**node.labels, **labels[node.name]}
            # The API object too (copied, never changed in place), so no reader of it sees the labels as listed.
            meta = {**(node.raw.get("metadata") or {}), "labels": merged}
            return replace(node, labels=merged, raw={**node.raw, "metadata": meta})

        return replace(self, nodes=[relabelled(n) if n.name in labels else n for n in self.nodes])

    def without_nodes(self, names: Iterable[str]) -> World:
        """This snapshot less the Nodes ``names`` (deleted since it was read)."""
        gone = set(names)
        return replace(self, nodes=[n for n in self.nodes if n.name not in gone])

    def instance_for_node(self, name: str) -> ManagedInstance | None:
        view = self._views.get(name)
        if view is not None:
            iid = self.trusted_instance_id(view)
            return self._instance_by_id.get(iid) if iid else None
        iid = in_flight_instance(name)
        return self._instance_by_id.get(iid) if iid is not None else None

    def instance(self, instance_id: str) -> ManagedInstance | None:
        return self._instance_by_id.get(instance_id)

    def unregistered_instances(self) -> list[ManagedInstance]:
        """This cluster's pending/running instances that no Node names yet (launched, not joined)."""
        return inflight.unregistered(self.instances, self._claimed)

    def instance_types(self, pool_name: str) -> list[InstanceType]:
        """The catalog for the pool's node class (kubelet, root volume, AMI family), with the offerings
        known to be out of capacity marked unavailable."""
        return self.types.get(pool_name, [])

    def node_labels(self, pool_name: str) -> dict[str, str]:
        """Labels the pool's node class gives its nodes (OS and Windows build)."""
        return self.pool_labels.get(pool_name, {})

    def zone_id(self, zone: str) -> str:
        """The zone's id in this account (from the catalog's offerings); "" when unknown."""
        return self._zone_ids.get(zone, "")

    def expected_labels(self, inst: ManagedInstance, pool: NodePool, it: InstanceType) -> dict[str, str]:
        """The labels the instance's node carries once registered, as the solver planned it (nodelabels)."""
        return inflight.expected_labels(inst, pool, it, zone_id=self.zone_id(inst.zone),
                                        class_labels=self.node_labels(pool.name))

    def shifted_zones(self) -> frozenset[str]:
        """The names of the zones under an ARC zonal shift (their ids mapped through the catalog's offerings)."""
        if not self.shifts:
            return frozenset()
        return zonalshift.shifted_zone_names(self.shifts, zonalshift.zone_names(self.catalog, self.shifts))

    @property
    def buffer_pods(self) -> list[Pod]:
        """Every CapacityBuffer's virtual pods: planned like pending pods, after all of them."""
        return [p for r in self.resolved_buffers for p in r.pods]

    def types_by_pool(self) -> dict[str, list[InstanceType]]:
        return {name: self.instance_types(name) for name in self.nodepools}

    def labels_by_pool(self) -> dict[str, dict[str, str]]:
        return {name: self.node_labels(name) for name in self.nodepools}

    def daemonset_pods(self) -> list[Pod]:
        """One template pod per DaemonSet: the overhead each node it runs on carries."""
        return [d.pod for d in self.daemonsets]

    # -- what the bin-packer sees ----------------------------------------------------------------------------

    def existing_nodes(self, exclude: Iterable[str] = ()) -> list[ExistingNode]:
        """Registered nodes (Ready or not) with their pods, plus in-flight instances without a Node
        (``scheduling.existing.existing_nodes``); ``exclude`` holds node names or instance ids to leave out."""
        trusted: dict[str, ManagedInstance] = {}
        for view in self._views.values():
            iid = self.trusted_instance_id(view)
            inst = self._instance_by_id.get(iid) if iid else None
            if inst is not None:
                trusted[view.name] = inst
        prices = {i.instance_id: self.price_of(i) for i in trusted.values()}
        nodes, unreadable = existing.existing_nodes(
            self.node_views(), self.pods_by_node, self.nodepools, trusted, prices, self._stand_ins(), exclude,
            self.volumes.limits)
        for name, why in unreadable.items():
            log.warning("node left out of planning", extra={"node": name, "reason": why})
        return nodes

    def _stand_ins(self) -> list[ExistingNode]:
        """Capacity in flight: each unregistered instance, then each NodeClaim in flight whose instance EC2 does
        not show (yet): not launched, or launched and not listed yet (#30.1)."""
        out = []
        for inst in self.unregistered_instances():
            it = self.instance_type(inst.instance_type, inst.nodepool)
            if it is None:
                log.warning("in-flight instance of an unknown type", extra={"instance_id": inst.instance_id,
                                                                           "instance_type": inst.instance_type})
                continue
            pool = self.nodepools.get(inst.nodepool or "")
            out.append(inflight.stand_in(
                inst, pool, it, price=self.price_of(inst), daemon_pods=self.daemonset_pods(),
                zone_id=self.zone_id(inst.zone) if pool is not None else "",
                class_labels=self.node_labels(pool.name) if pool is not None else None))
        return out + self._claim_stand_ins()

    def _claim_stand_ins(self) -> list[ExistingNode]:
        out = []
        for claim in inflight.claims_in_flight(self.nodeclaims or (), self._instance_by_id, self.now):
            name = inflight.claim_node_name(claim)
            key = nodelabels.pool_key((claim.get("metadata") or {}).get("labels") or {}, self.nodepools)
            try:
                it = inflight.claim_type(claim, self.instance_types(key) or self.catalog)
                if it is None:
                    log.warning("in-flight nodeclaim %s left out of planning: no known instance type", name)
                    continue
                out.append(inflight.claim_stand_in(claim, it, pool_key=key, daemon_pods=self.daemonset_pods(),
                                                   class_labels=self.node_labels(key)))
            except (RequirementError, TaintError) as exc:
                log.warning("in-flight nodeclaim %s left out of planning: %s", name, exc)
        return out

    def instance_type(self, name: str, pool_name: str | None = None) -> InstanceType | None:
        """The type as the pool would launch it, else as the plain catalog knows it."""
        for it in self.instance_types(pool_name or ""):
            if it.name == name:
                return it
        return next((it for it in self.catalog if it.name == name), None)

    def price_of(self, inst: ManagedInstance) -> float:
        """The instance's offering price per hour (0 when the catalog does not know it)."""
        return instance_price(inst, self.instance_type(inst.instance_type, inst.nodepool))


# ---------------------------------------------------------------------------------------------- reading


def read_world(rt: Runtime, *, include_pods: bool = True, pod_cache: bool = False) -> World:
    """Read NodePools, nodes, pods, DaemonSets, PDBs and this cluster's instances once.

    With ``pod_cache`` the pods come from this process's pod cache (:func:`read_pods_cached`: a watch
    from the last version in a warm container, one list in a cold one) instead of a list of every pod.
    A bad NodePool or node class is reported in ``config_errors`` and left out; the valid ones are
    planned with. Errors reaching EC2 or the API server are raised: a world half read is not a world.
    """
    started = time.perf_counter()
    settings = rt.settings
    now = clock.now()
    config = _read_config(rt)
    report_config_errors(rt, config.errors)
    gates = settings.feature_gates
    # Karpenter runs no NodeOverlay or CapacityBuffer controller with their gates off: the objects are not read.
    overlays, buffers = gated(gates, config.overlays, config.buffers)
    resolved: list[ResolvedBuffer] = []
    buffer_errors: list[str] = []
    if buffers:
        templates, scalables = read_buffer_sources(rt.api, buffers.values())
        resolved, buffer_errors = resolve_buffers(buffers, templates, scalables)
    nodes = [ClusterNode.from_dict(raw) for raw in listing.list_nodes(rt.api).items]
    pods: list[dict[str, Any]] = []
    if include_pods:
        pods = read_pods_cached(rt) if pod_cache else listing.list_pods(rt.api).items
    pods_by_node, pending, pod_errors = _sort_pods(pods)
    volumes = read_volumes(rt, pods)
    pending, refused = with_volume_topology(pods_by_node, pending, volumes)
    daemonsets, pdbs = read_daemonsets_listed(rt), read_pdbs_listed(rt)
    instances = ec2_instances.list_instances(rt.aws.ec2, settings.cluster_name)
    unavailable = rt.launcher.offerings.snapshot()
    types = catalog(rt)
    claims = read_nodeclaims(rt)
    world = World(
        now=now, cluster=settings.cluster_name, nodepools=dict(config.nodepools),
        nodeclasses=dict(config.nodeclasses), overlays=overlays, buffers=buffers, gates=gates,
        resolved_buffers=resolved, config_errors=[*config.errors, *buffer_errors], nodes=nodes, waiting=waiting_pods(pods),
        pods_by_node=pods_by_node, pending=pending, pod_errors=[*pod_errors, *refused], daemonsets=daemonsets,
        pdbs=pdbs, volumes=volumes, volume_refusals=dict(refused), instances=instances, nodeclaims=claims, unavailable=unavailable, catalog=types, shifts=read_shifts(rt, types),
        # Karpenter offers no reserved capacity with the ReservedCapacity gate off (on by default).
        reservations=read_reservations(rt.aws.ec2, config.nodeclasses.values(), now) if gates.reserved_capacity else {},
    )
    world = _restrict_to_subnet_zones(rt, _prepare_types(world))
    world = replace(world, launch_failures=launchfailures.failing(rt.aws.dynamodb, settings.table_name,
                                                                  world.nodepools, clock.epoch()))
    world = note_launches_that_died(world, ec2_instances.died_at_launch(rt.aws.ec2, settings.cluster_name))
    warn_untrusted(rt, world.untrusted)
    log.debug("world read", extra={"seconds": round(time.perf_counter() - started, 3), "nodes": len(world.nodes),
                                   "pods": len(pods), "instances": len(world.instances)})
    return world


def _read_config(rt: Runtime) -> ConfigResult:
    settings = rt.settings
    return load_all(
        ssm_client=rt.aws.ssm if "ssm" in settings.nodepool_sources else None,
        ssm_path=settings.nodepool_parameter_path if "ssm" in settings.nodepool_sources else None,
        custom_objects_api=rt.custom if "cluster" in settings.nodepool_sources else None,
    )


def read_nodepools(rt: Runtime) -> dict[str, NodePool]:
    """The valid NodePools alone (the bad ones are reported by the next full read of the world)."""
    return dict(_read_config(rt).nodepools)


def refresh_instances(world: World, ec2: Any) -> World:
    """The snapshot with this cluster's instances read again: another invocation may have launched since."""
    return world.with_instances(ec2_instances.list_instances(ec2, world.cluster))


def note_launches_that_died(world: World, died: list[tuple[ManagedInstance, str, str]]) -> World:
    """A pool whose newest instance terminated as it started is failing to launch, though EC2 accepted the
    launch: e.g. its volumes' KMS key refused the launching role, which AWS reports only as the instance's
    StateReason Client.InternalError. An instance of the pool launched since that is still alive ends it.
    Returns the snapshot with those pools' failures."""
    failures = dict(world.launch_failures)
    for inst, code, message in died:
        pool, launched = inst.nodepool, _epoch(inst.launch_time)
        if pool is None or pool not in world.nodepools or launched is None:
            continue
        later = [i for i in world.instances if i.nodepool == pool and (_epoch(i.launch_time) or 0) >= launched]
        known = failures.get(pool)
        if later or (known is not None and known.at > launched):
            continue
        failures[pool] = LaunchFailure(
            pool, code, f"instance {inst.instance_id} terminated as it started ({message}): if its volumes are "
            "encrypted with a customer-managed KMS key, grant the functions its use (deploy with "
            "-c ebsKmsKey=<key ARN>, or name it in the node class's blockDeviceMappings)", launched)
    return replace(world, launch_failures=failures) if failures != world.launch_failures else world


def _epoch(when: datetime | None) -> float | None:
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def resolve_buffers(
    buffers: Mapping[str, CapacityBuffer], templates: Mapping, scalables: Mapping
) -> tuple[list[ResolvedBuffer], list[str]]:
    """The active buffers' virtual pods, in name order; a buffer that cannot be resolved is a configuration
    error (the second list)."""
    resolved: list[ResolvedBuffer] = []
    errors: list[str] = []
    for key in sorted(buffers):
        buffer = buffers[key]
        if not buffer.active:
            continue  # another autoscaler's strategy: not nodescale's to provision
        one = resolve(buffer, templates, scalables)
        if one.error:
            errors.append(f"{buffer.source}: CapacityBuffer {key}: {one.error}")
        resolved.append(one)
    return resolved, errors


def read_pods_cached(rt: Runtime) -> list[dict[str, Any]]:
    """The bound pods from the pod cache, brought up to date first, and the unbound pending ones from a
    field-selected list at least as new as the cache (both answered from kube-apiserver's watch cache).

    The pending list is the fresh word on which pods still need a place; the cache gives what runs
    where (node usage). A pod bound after the cache's version and before the list's is in neither
    for this pass: its node looks emptier than it is, which at worst leaves a pod pending for the
    next pass; it never launches a node for a pod already placed.
    """
    cache = podcache.shared(rt.api)
    cache.sync(rt.api)
    try:
        pending = _pending_not_older(rt, cache.resource_version)
    except ApiException as exc:
        if exc.status != 504 or "resource version" not in str(exc).lower():
            raise
        # The server is behind the warm cache ("Too large resource version": etcd restored from a backup, or
        # another cluster at the same address): forget the cache and list the server's current state.
        log.warning("pod cache ahead of the API server; listing again", extra={"version": cache.resource_version})
        cache.resource_version = ""
        cache.sync(rt.api)
        pending = _pending_not_older(rt, cache.resource_version)
    bound = [p for p in cache.snapshot() if (p.get("spec") or {}).get("nodeName")]
    return bound + pending.items


def _pending_not_older(rt: Runtime, version: str) -> listing.ListResult:
    return listing.list_pods(
        rt.api, field_selector=listing.PENDING_FIELD_SELECTOR,
        resource_version=version or "0", resource_version_match="NotOlderThan" if version else None,
    )


def read_pdbs_listed(rt: Runtime) -> list[PodDisruptionBudget]:
    """The cluster's PodDisruptionBudgets, typed; a malformed one is logged by name and left out."""
    pdbs, errors = read_pdbs(listing.list_pdbs(rt.api).items)
    for why in errors:
        log.warning("PodDisruptionBudget left out: %s", why)
    return pdbs


def read_daemonsets_listed(rt: Runtime) -> list[DaemonSet]:
    """The cluster's DaemonSets, typed; a malformed one is logged by name and left out of the node overhead."""
    daemonsets, errors = read_daemonsets(listing.list_daemonsets(rt.api).items)
    for why in errors:
        log.warning("daemonset left out of the node overhead", extra={"reason": why})
    return daemonsets


# The apiVersion an event names a configuration object by (the newest its CRD serves).
_CLUSTER_KIND_VERSIONS = {kind: f"{group}/{version}" for group, version, _, kind in reversed(CLUSTER_KINDS)}
CONFIG_ERROR_REASON = "InvalidConfiguration"


def report_config_errors(rt: Runtime, errors: list[ConfigError]) -> None:
    """Where an operator looks: a metric with an alarm on it, a log line each, and a Warning event on the
    custom resource when the document came from the cluster (`kubectl describe nodepool NAME` shows it)."""
    telemetry.gauge(telemetry.CONFIG_ERRORS, len(errors))
    if not errors:
        return
    recorder = EventRecorder(rt.api)
    for error in errors:
        log.warning("configuration refused: %s", error)
        kind, _, name = error.source.removeprefix("cluster:").partition("/")
        if not error.source.startswith("cluster:") or kind not in _CLUSTER_KIND_VERSIONS:
            continue
        namespace, _, object_name = name.split("#", 1)[0].rpartition("/")  # "ns/name" for a namespaced kind
        ref = ObjectRef(kind, object_name, namespace, api_version=_CLUSTER_KIND_VERSIONS[kind])
        try:
            recorder.record(ref, CONFIG_ERROR_REASON, str(error), WARNING)
        except ApiException as exc:  # the event is a courtesy: the read itself must go on
            log.warning("could not record the configuration error on %s/%s: %s", kind, name, exc.reason)


UNTRUSTED_NODE_REASON = "UntrustedProviderID"


def warn_untrusted(rt: Runtime, untrusted: Mapping[str, str]) -> None:
    """A Warning event on each Node ignored for the instance its providerID names (once a pass: the world is
    read once), and a log line: an operator sees who claims an instance it is not."""
    if not untrusted:
        return
    recorder = EventRecorder(rt.api)
    for name, why in sorted(untrusted.items()):
        log.warning("node ignored: %s", why, extra={"node": name})
        try:
            recorder.node(name, UNTRUSTED_NODE_REASON, why, WARNING)
        except ApiException as exc:  # the event is a courtesy: the pass goes on
            log.warning("could not record the warning on node %s: %s", name, exc.reason)


def _sort_pods(raw_pods: list[dict[str, Any]]) -> tuple[dict[str, list[Pod]], list[Pod], list[tuple[str, str]]]:
    by_node: dict[str, list[Pod]] = {}
    pending: list[Pod] = []
    errors: list[tuple[str, str]] = []
    for raw in raw_pods:
        node_name = (raw.get("spec") or {}).get("nodeName")
        provisionable = listing.is_provisionable(raw)
        if not node_name and not provisionable:
            continue
        try:
            pod = Pod.from_dict(raw)
        except (QuantityError, RequirementError, TaintError, TypeError, ValueError, AttributeError) as exc:
            meta = raw.get("metadata") or {}
            errors.append((f"{meta.get('namespace') or 'default'}/{meta.get('name')}", str(exc)))
            continue
        if node_name:
            if not pod.finished:
                by_node.setdefault(node_name, []).append(pod)
        else:
            pending.append(pod)
    return by_node, pending, errors


def _prepare_types(world: World) -> World:
    """The snapshot with each pool's instance types and node class labels; a pool whose types cannot be
    made is a configuration error and left out."""
    usable: dict[str, NodePool] = {}
    prepared: dict[str, list[InstanceType]] = {}
    class_labels: dict[str, dict[str, str]] = {}
    errors: list[ConfigError | str] = list(world.config_errors)
    ebs = pricing.ebs_prices(catalog_region(world.catalog))
    for name, pool in world.nodepools.items():
        try:
            types, labels = pool_types([pool], world.nodeclasses, world.catalog, ebs, overlays=world.overlays.values(),
                                       reservations=world.reservations, now=world.now)
        except PoolTypesError as exc:
            errors.append(str(exc))
            continue
        prepared[name] = zonalshift.avoid(catalogs.mark_unavailable(types[name], world.unavailable), world.shifts)
        class_labels[name] = labels.get(name, {})
        usable[name] = pool
    return replace(world, nodepools=usable, types=prepared, pool_labels=class_labels, config_errors=errors)


def _restrict_to_subnet_zones(rt: Runtime, world: World) -> World:
    """Each pool's offerings only in the zones where its node class has a subnet with free addresses (the
    launcher's subnet lookup, once per invocation, shared with the launch). A node class whose subnets
    cannot be resolved is left as it is: its launch reports why, which says more than a pool with no
    offerings would."""
    types = dict(world.types)
    for name, pool in world.nodepools.items():
        nc = world.nodeclasses.get(pool.node_class)
        if nc is None or name not in types:
            continue
        try:
            zones = rt.launcher.subnet_zones(nc)
        except (BotoCoreError, ClientError, ValueError) as exc:  # the selector's and lookup's errors: the launch names them
            log.debug("subnet zones of %s not resolved: %s", nc.name, exc)
            continue
        if zones:
            types[name] = catalogs.only_zones(types[name], zones)
    return replace(world, types=types)


