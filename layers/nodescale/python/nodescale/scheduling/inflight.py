"""Capacity in flight: instances launched whose Node has not registered, the NodeClaims whose instance EC2 does
not show yet (#30.1), and the stand-in node the bin-packer plans onto for each (what its Node will look like,
its DaemonSets' pods already on it).

The use-cases decide from one snapshot what "in flight" means through this module, so the provisioner,
disruption and the status report agree; it takes plain inputs and does no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..model import labels as wk
from ..model import nodelabels
from ..model.instance import ManagedInstance
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod
from ..model.requirements import Requirements
from ..model.taints import Taint, tolerates_all
from . import nodeclaim_manifest as ncm
from .plan import ExistingNode
from .templates import daemon_requirements, labels_satisfy

# Taints a node carries only while it comes up: a pod that waits for the node need not tolerate them.
TRANSIENT_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "karpenter.sh/unregistered",
    }
)
# Name prefix of the stand-in node for an instance whose Node has not registered yet.
IN_FLIGHT_PREFIX = "in-flight/"
# EC2 is eventually consistent: DescribeInstances may not list an instance for some seconds after CreateFleet
# returned it. A launched NodeClaim whose instance EC2 does not list counts in flight this long, then is taken
# for gone (terminated, or reclaimed before it joined), as Karpenter's NodeClaim garbage collection does.
LAUNCH_LAG_SECONDS = 30.0


def in_flight_name(instance_id: str) -> str:
    """The stand-in node name of an instance launched and not registered yet."""
    return f"{IN_FLIGHT_PREFIX}{instance_id}"


def in_flight_instance(node_name: str) -> str | None:
    """The instance id behind an in-flight stand-in node's name; None for a registered node's name."""
    return node_name[len(IN_FLIGHT_PREFIX) :] if node_name.startswith(IN_FLIGHT_PREFIX) else None


def startup_keys(pool: NodePool | None) -> set[str]:
    """The taint keys a node of ``pool`` (None: of no known pool) carries only while it starts."""
    keys = set(TRANSIENT_TAINT_KEYS)
    if pool is not None:
        keys.update(t.key for t in pool.startup_taints)
    return keys


def unregistered(instances: Iterable[ManagedInstance], claimed: Collection[str]) -> list[ManagedInstance]:
    """The pending/running instances that no Node names yet (``claimed``: the instance ids any Node names)."""
    # Named by any Node, trusted or not: an instance is never expired as "never joined" because its Node's
    # name is not the one expected (a custom hostname); the untrusted Node is warned about.
    return [i for i in instances if i.state in ("pending", "running") and i.instance_id not in claimed]


def expected_labels(inst: ManagedInstance, pool: NodePool, it: InstanceType, *, zone_id: str,
                    class_labels: Mapping[str, str]) -> dict[str, str]:
    """The labels the instance's node carries once registered, as the solver planned it (nodelabels)."""
    return nodelabels.node_labels(
        pool, it.labels, zone=inst.zone, capacity_type=inst.capacity_type, zone_id=zone_id,
        class_labels=class_labels, reservation_id=inst.capacity_reservation_id,
        reservation_type=inst.capacity_reservation_type,
    )


def stand_in(inst: ManagedInstance, pool: NodePool | None, it: InstanceType, *, price: float,
             daemon_pods: Sequence[Pod], zone_id: str = "",
             class_labels: Mapping[str, str] | None = None) -> ExistingNode:
    """What the instance's Node will look like once registered, with the DaemonSets' pods that will run there.

    ``pool`` is the instance's NodePool (None when it is no longer configured: its tags then name it);
    ``zone_id`` and ``class_labels`` what its pool's node class gives its nodes.
    """
    name = in_flight_name(inst.instance_id)
    if pool is not None:
        # What the node will carry once registered (the registration step syncs the same labels).
        labels = expected_labels(inst, pool, it, zone_id=zone_id, class_labels=class_labels or {})
    else:
        named = {k: v for k, v in inst.tags.items() if k in (wk.NODEPOOL, wk.LEGACY_PROVISIONER)}
        labels = {**it.labels, **(named or {wk.NODEPOOL: inst.nodepool or ""}), wk.ZONE: inst.zone,
                  wk.CAPACITY_TYPE: inst.capacity_type}
        if inst.capacity_reservation_id:
            labels[wk.CAPACITY_RESERVATION_ID] = inst.capacity_reservation_id
            labels[wk.CAPACITY_RESERVATION_TYPE] = inst.capacity_reservation_type
    labels[wk.INSTANCE_TYPE] = inst.instance_type
    labels[wk.HOSTNAME] = inst.private_dns_name or name
    taints: tuple[Taint, ...] = pool.taints if pool is not None else ()
    node = ExistingNode(name=name, labels=labels, allocatable=dict(it.allocatable), taints=taints,
                        capacity=dict(it.capacity), in_flight=True, price=price, pool=inst.nodepool or "")
    return _with_daemons(node, daemon_pods, inst.instance_id)


def _with_daemons(node: ExistingNode, daemon_pods: Sequence[Pod], suffix: str) -> ExistingNode:
    """The DaemonSets that will run there take their share before any pending pod does."""
    for d in daemon_pods:
        if tolerates_all(d.tolerations, node.taints) is not None:
            continue
        if any(labels_satisfy(node.labels, t) for t in daemon_requirements(d)):
            node.pods.append(dataclasses.replace(d, name=f"{d.name}-{suffix}", node_name=node.name))
    return node


# ---------------------------------------------------------------------------------- NodeClaims in flight (#30.1)


def instance_gone(claim: Mapping[str, Any], instance_ids: Collection[str], now: datetime) -> bool:
    """The NodeClaim was launched (it names an instance) more than LAUNCH_LAG_SECONDS ago and that instance is
    not among ``instance_ids`` (the snapshot's live ones): it is gone, and the NodeClaim with it."""
    iid = ncm.instance_of(claim)
    if not iid or iid in instance_ids:
        return False
    since = ncm.registration_since(claim)
    return since is not None and (now - since).total_seconds() > LAUNCH_LAG_SECONDS


def claims_in_flight(
    claims: Iterable[Mapping[str, Any]], instance_ids: Collection[str], now: datetime,
) -> list[Mapping[str, Any]]:
    """The NodeClaims that stand in flight on their own: not registered, not being deleted, and naming no
    instance in ``instance_ids`` (the snapshot's; such an instance is counted as itself, so never twice): no
    providerID yet, or EC2 not showing the instance yet (for LAUNCH_LAG_SECONDS; after that it is gone, see
    ``instance_gone``). Two naming the same instance count once.

    Every NodeClaim counts, nodescale's or another's (a Karpenter still running during a migration): Karpenter's
    cluster state plans onto every NodeClaim it sees."""
    out: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for claim in claims:
        if ncm.registered(claim) or (claim.get("metadata") or {}).get("deletionTimestamp"):
            continue
        iid = ncm.instance_of(claim)
        if iid and (iid in instance_ids or iid in seen or instance_gone(claim, instance_ids, now)):
            continue
        if iid:
            seen.add(iid)
        out.append(claim)
    return out


def claim_node_name(claim: Mapping[str, Any]) -> str:
    """The stand-in node name of a NodeClaim in flight: ``in-flight/<claim name>``."""
    return in_flight_name(str((claim.get("metadata") or {}).get("name") or ""))


def claim_type(claim: Mapping[str, Any], types: Sequence[InstanceType]) -> InstanceType | None:
    """The claim's instance type among ``types``: its instance-type label (written at launch), else the cheapest
    its instance-type requirement allows in its zones and capacity types (what the Fleet call picks first).
    Raises RequirementError for requirements the API server would refuse."""
    labels = (claim.get("metadata") or {}).get("labels") or {}
    by_name = {it.name: it for it in types}
    if labels.get(wk.INSTANCE_TYPE):
        return by_name.get(str(labels[wk.INSTANCE_TYPE]))
    reqs = claim_requirements(claim)
    allowed = reqs.get(wk.INSTANCE_TYPE)
    priced = [(o.price, it.name, it) for it in types if allowed is None or allowed.has(it.name)
              if (o := it.cheapest(reqs)) is not None]
    return min(priced, key=lambda p: (p[0], p[1]))[2] if priced else None


def claim_requirements(claim: Mapping[str, Any]) -> Requirements:
    return Requirements.from_node_selector_requirements((claim.get("spec") or {}).get("requirements") or [],
                                                        where="spec.requirements")


def claim_stand_in(claim: Mapping[str, Any], it: InstanceType, *, pool_key: str, daemon_pods: Sequence[Pod],
                   class_labels: Mapping[str, str] | None = None) -> ExistingNode:
    """What the NodeClaim's Node will look like: its labels, else its requirements' single values (zone, capacity
    type), the type's labels; its taints (startup taints go before pods wait on it). Raises RequirementError or
    TaintError for a spec the API server would refuse."""
    name = claim_node_name(claim)
    reqs = claim_requirements(claim)
    labels = {**it.labels, **(class_labels or {}), **reqs.labels(),
              **{str(k): str(v) for k, v in ((claim.get("metadata") or {}).get("labels") or {}).items()}}
    labels[wk.INSTANCE_TYPE] = it.name
    labels[wk.HOSTNAME] = name
    spec = claim.get("spec") or {}
    taints = tuple(Taint.from_dict(t, "spec.taints") for t in spec.get("taints") or [])
    offering = it.cheapest(Requirements.from_labels({k: labels[k] for k in (wk.ZONE, wk.CAPACITY_TYPE) if k in labels}))
    node = ExistingNode(name=name, labels=labels, allocatable=dict(it.allocatable), taints=taints,
                        capacity=dict(it.capacity), in_flight=True, price=offering.price if offering else 0.0,
                        pool=pool_key)
    return _with_daemons(node, daemon_pods, name.removeprefix(IN_FLIGHT_PREFIX))
