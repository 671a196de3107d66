"""What the cluster looks like to an operator: the use-case behind `nodescale status`.

One snapshot (:func:`nodescale.usecases.world.read_world`) and one dry plan of the pending pods, turned into:
nodes by NodePool, capacity type and zone with their utilization (requests over allocatable) and
price per hour; pending pods and why each waits; drains under way; NodePool usage against limits
and the cluster-wide limits. Nothing here writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import clock
from ..k8s import nodes as k8s_nodes
from ..model import labels as wk
from ..model import resources as res
from ..model import zonalshift
from ..model.currency import USD, Message, Money, Priced, currency_of
from ..model.node import ClusterNode
from ..model.nodelabels import pool_key
from ..model.pod import Pod
from ..scheduling.inflight import in_flight_instance
from ..scheduling.plan import ExistingNode
from ..scheduling.templates import pool_usage
from .provision import cluster_budget as cluster_limits
from .provision.explain import PodFate, pending_fates
from .provision.pool_status import pool_statuses
from .terminate import INTERRUPTION_ANNOTATION
from .world import World, read_world

if TYPE_CHECKING:
    from ..runtime import Runtime

# Written by the disruption function on a node it is taking away (see nodescale.usecases.disrupt.run).
DISRUPTION_REASON_ANNOTATION = "nodescale.io/disruption-reason"
# Managed node groups label capacity this way; Karpenter-style nodes use karpenter.sh/capacity-type.
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"

READY = "Ready"
NOT_READY = "NotReady"
LAUNCHING = "Launching"
DRAINING = "Draining"
CORDONED = "Cordoned"
DELETING = "Deleting"


@dataclass
class NodeStatus:
    name: str
    nodepool: str
    capacity_type: str
    zone: str
    instance_type: str
    state: str
    pods: int  # pods that are not DaemonSet pods
    requested: res.Resources
    allocatable: res.Resources
    price: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodePool": self.nodepool,
            "capacityType": self.capacity_type,
            "zone": self.zone,
            "instanceType": self.instance_type,
            "state": self.state,
            "pods": self.pods,
            "cpu": _usage(self.requested, self.allocatable, res.CPU),
            "memory": _usage(self.requested, self.allocatable, res.MEMORY),
            "pricePerHour": round(self.price, 6),
        }


@dataclass
class Group:
    """Nodes that share a NodePool, capacity type and zone."""

    nodepool: str
    capacity_type: str
    zone: str
    nodes: int = 0
    requested: res.Resources = field(default_factory=dict)
    allocatable: res.Resources = field(default_factory=dict)
    price: float = 0.0

    def add(self, node: NodeStatus) -> None:
        self.nodes += 1
        self.requested = res.add(self.requested, node.requested)
        self.allocatable = res.add(self.allocatable, node.allocatable)
        self.price += node.price

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodePool": self.nodepool,
            "capacityType": self.capacity_type,
            "zone": self.zone,
            "nodes": self.nodes,
            "cpu": _usage(self.requested, self.allocatable, res.CPU),
            "memory": _usage(self.requested, self.allocatable, res.MEMORY),
            "pricePerHour": round(self.price, 6),
        }


@dataclass
class Drain:
    node: str
    nodepool: str
    since: str  # when the disruption taint went on, RFC 3339 ('' when it carries no timeAdded)
    reason: str
    pods: list[str]  # pods still to leave (not DaemonSet, mirror or finished)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "nodePool": self.nodepool, "since": self.since, "reason": self.reason,
                "podsRemaining": len(self.pods), "pods": self.pods}


@dataclass
class Limit:
    scope: str  # a NodePool's name, or "cluster"
    resource: str  # cpu | memory | nodes | pricePerHour
    used: float
    limit: float

    def to_dict(self, currency: str) -> dict[str, Any]:
        shown = Priced.of(show(self.resource, self.used), " of ", show(self.resource, self.limit))
        return {"scope": self.scope, "resource": self.resource, "used": _number(self.resource, self.used),
                "limit": _number(self.resource, self.limit), "shown": shown.render(currency)}


@dataclass
class Status:
    cluster: str
    now: str
    nodes: list[NodeStatus]
    groups: list[Group]
    pending: list[PodFate]
    drains: list[Drain]
    limits: list[Limit]
    config_errors: list[str]
    currency: str = USD  # of every price here: the region's (CNY in the China regions)
    # Zones under an ARC zonal shift (no launches there): zoneId, zone, kinds, until.
    zonal_shifts: list[dict[str, Any]] = field(default_factory=list)
    # NodePools whose last launch failed for a reason other than capacity: nodePool, code, message, since.
    launch_failing: list[dict[str, Any]] = field(default_factory=list)
    # The status Karpenter would write on each NodePool and node class, SSM or cluster alike (#30.2):
    # kind, name, source and status (resources and conditions; resolved subnets, groups, AMIs, profile).
    nodepool_status: list[dict[str, Any]] = field(default_factory=list)
    nodeclass_status: list[dict[str, Any]] = field(default_factory=list)

    @property
    def price(self) -> float:
        return sum(n.price for n in self.nodes)

    def totals(self) -> dict[str, Any]:
        requested = res.total(n.requested for n in self.nodes if n.state != LAUNCHING)
        allocatable = res.total(n.allocatable for n in self.nodes if n.state != LAUNCHING)
        return {
            "nodes": sum(1 for n in self.nodes if n.state != LAUNCHING),
            "launching": sum(1 for n in self.nodes if n.state == LAUNCHING),
            "pricePerHour": round(self.price, 6),
            "cpu": _usage(requested, allocatable, res.CPU),
            "memory": _usage(requested, allocatable, res.MEMORY),
            "pendingPods": len(self.pending),
            "drains": len(self.drains),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "time": self.now,
            "totals": self.totals(),
            "groups": [g.to_dict() for g in self.groups],
            "nodes": [n.to_dict() for n in self.nodes],
            "pending": [p.to_dict(self.currency) for p in self.pending],
            "drains": [d.to_dict() for d in self.drains],
            "limits": [x.to_dict(self.currency) for x in self.limits],
            "configErrors": self.config_errors,
            "currency": self.currency,
            "zonalShifts": self.zonal_shifts,
            "launchFailing": self.launch_failing,
            "nodePools": self.nodepool_status,
            "nodeClasses": self.nodeclass_status,
        }


# ------------------------------------------------------------------------------------------------ reading


def read_status(rt: Runtime, world: World | None = None) -> Status:
    """The cluster's status from one snapshot of the world (read here unless given)."""
    world = world or read_world(rt)
    existing = world.existing_nodes()
    nodes = [node_status(world, n, world.node(n.name)) for n in existing]
    nodes.sort(key=lambda n: (n.nodepool, n.capacity_type, n.zone, n.name))
    errors = [str(e) for e in world.config_errors]
    errors += [f"pod {key}: {why}" for key, why in world.pod_errors]
    limits = limits_of(world, existing, rt.settings.cluster_limits)
    now = clock.format_timestamp(world.now)
    pools, classes = pool_statuses(rt, world, now)
    return Status(
        cluster=world.cluster,
        now=now,
        nodes=nodes,
        groups=group(nodes),
        pending=pending_fates(rt, world),
        drains=drains(world),
        limits=limits,
        config_errors=errors,
        currency=currency_of(rt.settings.region),
        zonal_shifts=zonal_shifts(world),
        launch_failing=[world.launch_failures[p].to_dict() for p in sorted(world.launch_failures)],
        nodepool_status=pools,
        nodeclass_status=classes,
    )


def zonal_shifts(world: World) -> list[dict[str, Any]]:
    """The zones under an ARC zonal shift, with the zone names the offerings give their ids."""
    names = zonalshift.zone_names(world.catalog, world.shifts)
    return [
        {"zoneId": s.zone_id, "zone": names.get(s.zone_id), "kinds": list(s.kinds),
         "until": clock.format_timestamp(datetime.fromtimestamp(s.until, UTC))}
        for s in sorted(world.shifts.values(), key=lambda s: s.zone_id)
    ]


def node_status(world: World, node: ExistingNode, view: ClusterNode | None) -> NodeStatus:
    labels = node.labels
    itype = labels.get(wk.INSTANCE_TYPE, "")
    zone = labels.get(wk.ZONE, "")
    capacity_type = capacity_type_of(labels)
    price = node.price or catalog_price(world, itype, zone, capacity_type, node.nodepool)
    return NodeStatus(
        name=node.name,
        nodepool=node.nodepool,
        capacity_type=capacity_type,
        zone=zone,
        instance_type=itype,
        state=state_of(node, view),
        pods=sum(1 for p in node.pods if not p.is_daemon),
        requested=res.total(p.requests for p in node.pods),
        allocatable=dict(node.allocatable),
        price=price,
    )


def capacity_type_of(labels: Mapping[str, str]) -> str:
    value = labels.get(wk.CAPACITY_TYPE)
    if value:
        return value
    eks = labels.get(EKS_CAPACITY_TYPE, "")
    return {"ON_DEMAND": wk.CAPACITY_ON_DEMAND, "SPOT": wk.CAPACITY_SPOT}.get(eks, eks.lower())


def catalog_price(world: World, itype: str, zone: str, capacity_type: str, pool: str) -> float:
    """The catalog's price per hour of the type in that zone and capacity type (0 when unknown)."""
    if not itype:
        return 0.0
    it = world.instance_type(itype, pool or None)
    if it is None:
        return 0.0
    for o in it.offerings:
        if o.zone == zone and o.capacity_type == capacity_type:
            return o.price
    return 0.0


def state_of(node: ExistingNode, view: ClusterNode | None) -> str:
    if view is None:
        return LAUNCHING if in_flight_instance(node.name) is not None else NOT_READY
    if view.deleting:
        return DELETING
    if view.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY):
        return DRAINING
    if not view.ready:
        return NOT_READY
    if view.unschedulable:
        return CORDONED
    return READY


def group(nodes: Iterable[NodeStatus]) -> list[Group]:
    groups: dict[tuple[str, str, str], Group] = {}
    for n in nodes:
        key = (n.nodepool, n.capacity_type, n.zone)
        groups.setdefault(key, Group(*key)).add(n)
    return [groups[k] for k in sorted(groups)]


def drains(world: World) -> list[Drain]:
    """Nodes carrying the disruption taint, with the pods that still have to leave."""
    out = []
    for view in world.nodes:
        if not view.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY):
            continue
        name, annotations = view.name, view.annotations
        # When the disruption taint went on (its timeAdded): when the drain began.
        started = next((k8s_nodes.parse_time(t.get("timeAdded")) for t in view.taints
                        if t.get("key") == k8s_nodes.DISRUPTED_TAINT_KEY), None)
        reason = annotations.get(DISRUPTION_REASON_ANNOTATION) or (
            f"interruption: {annotations[INTERRUPTION_ANNOTATION]}" if annotations.get(INTERRUPTION_ANNOTATION)
            else "")
        out.append(Drain(
            node=name,
            nodepool=pool_key(view.labels, world.nodepools),
            since=clock.format_timestamp(started) if started else "",
            reason=reason,
            pods=sorted(p.key for p in world.pods_by_node.get(name, []) if _must_leave(p)),
        ))
    return sorted(out, key=lambda d: (d.since, d.node))


def _must_leave(pod: Pod) -> bool:
    return not (pod.is_daemon or pod.is_mirror or pod.finished)


def limits_of(world: World, existing: list[ExistingNode], raw_cluster_limits: Mapping[str, str]) -> list[Limit]:
    """Each NodePool's usage against its limits, then the cluster-wide limits.

    Cluster-wide limits that cannot be read raise SettingsError: the provisioner cannot run with them
    either, so that is what an operator must hear first.
    """
    out: list[Limit] = []
    usage = pool_usage(existing, {})
    for name in sorted(world.nodepools):
        used = usage.get(name, {})
        for resource, limit in sorted(world.nodepools[name].limits.items()):
            out.append(Limit(name, resource, float(used.get(resource, 0)), float(limit)))
    if raw_cluster_limits:
        budget = cluster_limits.ClusterBudget.of(raw_cluster_limits, existing)
        for resource, limit in sorted(budget.limits.items()):
            out.append(Limit("cluster", resource, budget.usage.get(resource, 0.0), limit))
    return out


# ----------------------------------------------------------------------------------------------- numbers


def show(resource: str, value: float) -> Message:
    """A resource amount as a person reads it: cpu in cores, memory in Gi, price per hour (rendered in the
    region's currency)."""
    if resource == res.CPU:
        return f"{value / 1000:g}"
    if resource == res.MEMORY:
        return f"{value / 2**30:.1f}Gi"
    if resource == cluster_limits.PRICE:
        return Priced.of(Money(value), "/h")
    return f"{value:g}"


def _number(resource: str, value: float) -> float:
    """Canonical units for machines: cpu in cores, memory in bytes, price per hour in the region's currency."""
    if resource == res.CPU:
        return round(value / 1000, 3)
    if resource == cluster_limits.PRICE:
        return round(value, 6)
    return int(value) if float(value).is_integer() else value


def _usage(requested: Mapping[str, int], allocatable: Mapping[str, int], resource: str) -> dict[str, Any]:
    used = requested.get(resource, 0)
    total = allocatable.get(resource, 0)
    return {
        "requested": _number(resource, used),
        "allocatable": _number(resource, total),
        "utilization": round(used / total, 4) if total else None,
    }
