"""Drift a node shows against its NodePool's template: requirements, and the template hash (or labels and taints).

This module compares the Node with what the pool would make today (``template_drift``), and an
instance with what its node class resolves to today (``cloud_drift``: image, subnets, security
groups, the launch settings' hash); ``Launcher.drift`` only reads what the latter needs. It names every
kind of drift (``DriftKind``) as Karpenter does.
Weight, limits and disruption settings are not looked at: changing them changes no node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum

from ..model import labels as wk
from ..model.nodepool import NodePool
from ..model.nodepool_hash import recorded_hash, template_hash
from .nodes import NodeView

# Labels the node gets from its hardware and place, not from the pool template: a pool requirement on
# them is checked against the value the node has.
_PLACEMENT = frozenset({wk.HOSTNAME, wk.REGION})


class DriftKind(StrEnum):
    """Which field drifted, with the reason strings Karpenter v1 gives (``DriftReason``).

    The first two are kubernetes-sigs/karpenter's (``pkg/controllers/nodeclaim/disruption/drift.go``),
    the rest aws/karpenter-provider-aws's (``pkg/cloudprovider/drift.go``).
    """

    NODE_POOL = "NodePoolDrifted"  # the pool template's static fields (its hash), or labels or taints
    REQUIREMENTS = "RequirementsDrifted"  # a node label no longer meets the pool's requirements
    AMI = "AMIDrift"
    SUBNET = "SubnetDrift"
    SECURITY_GROUP = "SecurityGroupDrift"
    NODE_CLASS = "NodeClassDrift"  # the launch configuration's hash (user data, IMDS, block devices, tags...)
    # nodescale's own, not Karpenter's: a NodePool that opts in has its nodes in a shifted zone replaced
    # (disruption/zonalshift.py).
    ZONAL_SHIFT = "ZonalShift"


@dataclass(frozen=True, slots=True)
class Drifted:
    """One node's drift: the kind (what the summary, the JSON and the event name) and what changed."""

    kind: DriftKind
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def template_drift(node: NodeView, pool: NodePool) -> Drifted | None:
    """Why the node no longer matches ``pool``'s template, or None.

    Requirements are checked against the node's labels (Karpenter leaves them out of its hash). The other
    static fields are Karpenter's hash: a node launched with a template digest (``model/nodepool_hash``) has
    drifted once the pool's digest differs from it. A node with no digest of this version (launched before the
    record, #31.5) is never drifted for lacking it; its labels and taints are compared with the pool's instead,
    as before the record existed."""
    for key, req in pool.requirements.items():
        if key in _PLACEMENT:
            continue
        value = node.labels.get(key)
        # A label the node lacks is left alone: older nodes may not carry every well-known label.
        if value is not None and not req.has(value):
            return Drifted(DriftKind.REQUIREMENTS, f"label {key}={value} no longer meets the NodePool requirement {req}")
    recorded = recorded_hash(node.annotations)
    if recorded is None:
        return _labels_or_taints(node, pool)
    if recorded == template_hash(pool):
        return None
    # Name the field where the node shows it; otherwise one the node cannot show changed.
    return _labels_or_taints(node, pool) or Drifted(
        DriftKind.NODE_POOL, "NodePool template changed since launch (annotations, startup taints, "
        "nodeClassRef, expireAfter, terminationGracePeriod, or a label or taint removed)")


def _labels_or_taints(node: NodeView, pool: NodePool) -> Drifted | None:
    for key, value in sorted(pool.labels.items()):
        have = node.labels.get(key)
        if have != value:
            shown = "missing" if have is None else f"{have!r}"
            return Drifted(DriftKind.NODE_POOL, f"NodePool label {key}={value!r} is {shown} on the node")
    present = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in node.taints}
    for taint in pool.taints:
        if (taint.key, taint.value, taint.effect) not in present:
            return Drifted(DriftKind.NODE_POOL, f"NodePool taint {taint} is missing on the node")
    return None


@dataclass(frozen=True, slots=True)
class LaunchedWith:
    """What an instance was launched with, as EC2 describes it ("", None or () where it says nothing)."""

    image_id: str
    subnet_id: str
    config_hash: str | None
    security_group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeClassNow:
    """What the instance's node class resolves to in the account right now."""

    image_ids: frozenset[str]
    subnet_ids: frozenset[str]
    security_group_ids: frozenset[str]


def cloud_drift(
    launched: LaunchedWith, now: NodeClassNow, current_hashes: Callable[[], Collection[str]]
) -> Drifted | None:
    """Why an instance no longer matches its node class, or None when it does: the checks and their order
    are karpenter-provider-aws's ``IsDrifted`` (AMI, subnet, security groups, then the static fields).

    ``current_hashes`` (the settings hashes the pool's templates carry today) is asked only when the
    instance has a hash and neither image nor subnet drifted: rendering them is the costly part.
    Security groups are looked at only once the settings hash (which holds the resolved group ids) has
    changed: EC2 answers with the groups an instance has, moto with its VPC's default group."""
    if launched.image_id and launched.image_id not in now.image_ids:
        selected = ", ".join(sorted(now.image_ids))
        return Drifted(DriftKind.AMI, f"image {launched.image_id} is no longer selected (now {selected})")
    if launched.subnet_id and launched.subnet_id not in now.subnet_ids:
        return Drifted(DriftKind.SUBNET, f"subnet {launched.subnet_id} is no longer selected")
    if launched.config_hash and launched.config_hash not in current_hashes():
        # The resolved groups are part of the settings hash: a changed hash with other groups than the
        # instance has is SecurityGroupDrift; any other change to it is the node class's (NodeClassDrift).
        wanted = sorted(now.security_group_ids)
        if launched.security_group_ids and sorted(set(launched.security_group_ids)) != wanted:
            return Drifted(DriftKind.SECURITY_GROUP, f"security groups {', '.join(launched.security_group_ids)} "
                           f"are no longer the selected ones ({', '.join(wanted)})")
        return Drifted(DriftKind.NODE_CLASS, "launch configuration changed "
                       "(user data, labels, taints, IMDS, block devices or tags)")
    return None
