"""Repair: replace nodes NotReady, or failing their EC2 status checks, for longer than the threshold.

Not held by budgets or do-not-disrupt (the node is broken already), but by the share of its pool
that is unhealthy: past a fifth (rounded up, as Karpenter's node health controller rounds it), the cause is
likely not the nodes and nothing is repaired. Only with the NodeRepair feature gate on (methods.default_methods).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from ..context import Context
from ..decisions import Action, Blocker, Decision, Reason
from ..nodes import NodeView
from .base import Method

UNHEALTHY_SHARE_LIMIT = 0.2


def repair_check(node: NodeView, now: datetime, threshold_seconds: float, status_failed_since: datetime | None) -> Decision | None:
    """NotReady, or failing EC2 status checks, for longer than the threshold."""
    if not node.ready and node.ready_since is not None and now >= node.ready_since + timedelta(seconds=threshold_seconds):
        return Decision(
            [node.name], Reason.UNHEALTHY, f"NotReady for {int((now - node.ready_since).total_seconds())}s",
            action=Action.REPLACE,
        )
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
            total = len(ctx.by_pool.get(pool, []))
            if not unhealthy_share_too_high(len(decisions), total):
                for d in decisions:
                    ctx.take(d, pool)
                taken.extend(decisions)
                continue
            why = (
                f"{len(decisions)} of {total} nodes of NodePool {pool} are unhealthy (more than 20%): "
                "nothing is repaired, the cause is likely not the nodes"
            )
            ctx.out.notes.append(why)
            for d in decisions:
                ctx.refuse(d.nodes, Reason.UNHEALTHY, why, Blocker.HEALTH)
                ctx.decided.update(d.nodes)
        return taken
