"""Drift a node shows against its NodePool's template: requirements, labels and taints.

What the cloud side changes (image, subnets, security groups, user data, tags) is the launcher's
business (``Launcher.drift``); this module compares the Node with what the pool would make today, and
names every kind of drift (``DriftKind``) as Karpenter does.
Weight, limits and disruption settings are not looked at: changing them changes no node.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..model import labels as wk
from ..model.nodepool import NodePool
from .nodes import NodeView

# Labels the node gets from its hardware and place, not from the pool template: a pool requirement on
# them is checked against the value the node has.
_PLACEMENT = frozenset({wk.HOSTNAME, wk.REGION})


class DriftKind(StrEnum):
    """Which field drifted, with the reason strings Karpenter v1 gives (``DriftReason``).

    The first two are kubernetes-sigs/karpenter's (``pkg/controllers/nodeclaim/disruption/drift.go``),
    the rest aws/karpenter-provider-aws's (``pkg/cloudprovider/drift.go``).
    """

    NODE_POOL = "NodePoolDrifted"  # the pool template's labels or taints
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
    """Why the node no longer matches ``pool``'s template, or None."""
    for key, req in pool.requirements.items():
        if key in _PLACEMENT:
            continue
        value = node.labels.get(key)
        # A label the node lacks is left alone: older nodes may not carry every well-known label.
        if value is not None and not req.has(value):
            return Drifted(DriftKind.REQUIREMENTS, f"label {key}={value} no longer meets the NodePool requirement {req}")
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
