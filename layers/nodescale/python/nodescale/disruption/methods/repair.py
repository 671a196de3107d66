"""Repair: replace nodes whose conditions show one of Karpenter's repair policies past its toleration.

The policies are karpenter-provider-aws's (``CloudProvider.RepairPolicies``): the kubelet's Ready False or
Unknown for 30 minutes, and the EKS node monitoring agent's AcceleratedHardwareReady False for 10 minutes and
StorageReady, NetworkingReady, KernelReady, ContainerRuntimeReady False for 30 minutes. nodescale adds its own:
an instance failing its EC2 status checks for ``NODESCALE_REPAIR_THRESHOLD_SECONDS``.

Not held by budgets or do-not-disrupt (the node is broken already), but by the share of its pool that is
unhealthy (Karpenter's ``pkg/controllers/node/health``): every node showing a policy's condition counts,
however new, and past a fifth (rounded up) the cause is likely not the nodes and nothing is repaired. Only
with the NodeRepair feature gate on (methods.default_methods).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..context import Context
from ..decisions import Action, Blocker, Decision, Reason
from ..nodes import NodeView
from .base import Method

UNHEALTHY_SHARE_LIMIT = 0.2


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A node condition type and status that makes a node unhealthy, and how long it is tolerated."""

    condition: str
    status: str
    toleration_seconds: float


REPAIR_POLICIES = (
    RepairPolicy("Ready", "False", 1800.0),
    RepairPolicy("Ready", "Unknown", 1800.0),
    RepairPolicy("AcceleratedHardwareReady", "False", 600.0),
    RepairPolicy("StorageReady", "False", 1800.0),
    RepairPolicy("NetworkingReady", "False", 1800.0),
    RepairPolicy("KernelReady", "False", 1800.0),
    RepairPolicy("ContainerRuntimeReady", "False", 1800.0),
)


def unhealthy_since(node: NodeView) -> list[tuple[RepairPolicy, datetime | None]]:
    """The policies whose condition the node shows, each with the condition's lastTransitionTime."""
    found = []
    for policy in REPAIR_POLICIES:
        status, since = node.conditions.get(policy.condition, ("", None))
        if status == policy.status:
            found.append((policy, since))
    return found


def shows_unhealthy(node: NodeView, status_failed_since: datetime | None) -> bool:
    """Whether the node counts towards its pool's unhealthy share: a policy's condition or failing status
    checks, however new (Karpenter counts every node matching a policy, tolerated or not)."""
    return status_failed_since is not None or bool(unhealthy_since(node))


def repair_check(node: NodeView, now: datetime, threshold_seconds: float, status_failed_since: datetime | None) -> Decision | None:
    """The first policy whose condition has held past its toleration; then EC2 status checks failing for
    longer than ``threshold_seconds``. A condition without a lastTransitionTime is never past its toleration."""
    for policy, since in unhealthy_since(node):
        if since is not None and now >= since + timedelta(seconds=policy.toleration_seconds):
            held = int((now - since).total_seconds())
            shown = "NotReady" if policy.condition == "Ready" else f"{policy.condition}={policy.status}"
            return Decision([node.name], Reason.UNHEALTHY, f"{shown} for {held}s", action=Action.REPLACE)
    if status_failed_since is not None and now >= status_failed_since + timedelta(seconds=threshold_seconds):
        return Decision(
            [node.name],
            Reason.UNHEALTHY,
            f"failing EC2 status checks for {int((now - status_failed_since).total_seconds())}s",
            action=Action.REPLACE,
        )
    return None


def unhealthy_share_too_high(unhealthy: int, total: int, limit: float = UNHEALTHY_SHARE_LIMIT) -> bool:
    """Karpenter's repair guard: when a large part of a pool is unhealthy, the cause is not the nodes. Up to
    ceil(20%) of the pool may be unhealthy (a percentage scaled rounding up, as a PodDisruptionBudget's
    maxUnavailable is), so one bad node in a pool of one to five is repaired."""
    allowed = math.ceil(round(total * limit, 9))
    return unhealthy > allowed


class Repair(Method):
    name = "repair"
    reason = Reason.UNHEALTHY

    def _check(self, node: NodeView, ctx: Context) -> Decision | None:
        inputs = ctx.inputs
        return repair_check(node, ctx.now, inputs.repair_threshold_seconds, inputs.impaired_since.get(node.name))

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        return self._check(node, ctx) is not None

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        found: dict[str, list[Decision]] = {}
        for v in candidates:
            d = self._check(v, ctx)
            if d is not None:
                d.pods = [p.key for p in v.pods]
                found.setdefault(v.nodepool, []).append(d)
        taken: list[Decision] = []
        for pool, decisions in found.items():
            members = ctx.by_pool.get(pool, [])
            total = len(members)
            impaired = ctx.inputs.impaired_since
            unhealthy = sum(shows_unhealthy(v, impaired.get(v.name)) for v in members)
            if not unhealthy_share_too_high(unhealthy, total):
                for d in decisions:
                    ctx.take(d, pool)
                taken.extend(decisions)
                continue
            why = (
                f"{unhealthy} of {total} nodes of NodePool {pool} are unhealthy (more than 20%): "
                "nothing is repaired, the cause is likely not the nodes"
            )
            ctx.out.notes.append(why)
            for d in decisions:
                ctx.refuse(d.nodes, Reason.UNHEALTHY, why, Blocker.HEALTH)
                ctx.decided.update(d.nodes)
        return taken
