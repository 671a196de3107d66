"""Consolidation: remove underutilized nodes whose pods fit elsewhere, or replace several with one cheaper.

This method picks the candidates (pool policy WhenEmptyOrUnderutilized, settled for ``consolidateAfter``),
applies do-not-disrupt, PodDisruptionBudgets and the Underutilized budget, and hands the rest to the
pure search in ``disruption.consolidation`` with the simulator the use-case built.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ...config.nodepools import WHEN_UNDERUTILIZED
from ..consolidation import Simulator, disruption_cost, search
from ..context import Context
from ..decisions import Blocker, Decision, Reason
from ..nodes import NodeView
from .base import Method


def settled_since(v: NodeView) -> datetime | None:
    """When the node last changed in a way that matters to consolidation: turned Ready or got a pod."""
    moments = [v.ready_since] if v.ready_since else []
    moments.extend(started for p in v.pods if (started := p.started) is not None)
    return max(moments) if moments else None


class Consolidation(Method):
    name = "consolidation"
    reason = Reason.UNDERUTILIZED

    def __init__(self, simulate: Simulator) -> None:
        self.simulate = simulate

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        if node.empty or not node.ready:
            return False  # empty nodes are emptiness's
        disruption = ctx.pool(node).disruption
        after = disruption.consolidate_after_seconds
        if disruption.consolidation_policy != WHEN_UNDERUTILIZED or after is None:
            return False
        since = settled_since(node)
        return since is None or ctx.now >= since + timedelta(seconds=after)

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        eligible, room = self._admit(candidates, ctx)
        capped = _cap(eligible, room)
        result = search(capped, self.simulate, max_seconds=ctx.inputs.consolidation_seconds)
        ctx.out.consolidation = result
        for r in result.refusals:
            ctx.refuse(r.nodes, r.reason, r.why, Blocker.NOT_CONSOLIDATABLE)
        d = result.decision
        if d is None:
            return []
        # One multi-node decision may span pools: each pool's budget pays for its own nodes.
        ctx.out.decisions.append(d)
        ctx.decided.update(d.nodes)
        pool_of = {v.name: v.nodepool for v in capped}
        for name in d.nodes:
            ctx.budgets.take(pool_of[name])
        return [d]

    def _admit(self, candidates: Sequence[NodeView], ctx: Context) -> tuple[list[NodeView], dict[str, int]]:
        """The candidates guards let through, and each pool's room under its Underutilized budget.

        A one-at-a-time pool (v1alpha5) with a disruption under way offers none: Karpenter v0.2x started
        no consolidation before the last command's nodes were gone. Its budget is unlimited, so one
        multi-node consolidation may take up to ``MAX_MULTI_NODE`` of its nodes, as v0.2x's did.
        """
        eligible: list[NodeView] = []
        room: dict[str, int] = {}
        for v in candidates:
            if ctx.guarded(v, Reason.UNDERUTILIZED) or ctx.wait_turn(v, Reason.UNDERUTILIZED):
                continue
            if v.nodepool not in room:
                allowance = ctx.budgets.allowance(v.nodepool, Reason.UNDERUTILIZED)
                room[v.nodepool] = allowance.allowed
                if allowance.allowed < 1:
                    ctx.out.notes.append(f"consolidation of NodePool {v.nodepool} held: {allowance.why}")
            if room[v.nodepool] < 1:
                why = ctx.budgets.allowance(v.nodepool, Reason.UNDERUTILIZED).why
                ctx.refuse([v.name], Reason.UNDERUTILIZED, why, Blocker.BUDGET)
                continue
            eligible.append(v)
        return eligible, room


def _cap(eligible: Sequence[NodeView], room: dict[str, int]) -> list[NodeView]:
    """The budget caps how many of a pool's nodes one (multi-node) decision may take: the cheapest to disrupt."""
    capped: list[NodeView] = []
    used: dict[str, int] = {}
    for v in sorted(eligible, key=disruption_cost):
        if used.get(v.nodepool, 0) < room.get(v.nodepool, 0):
            capped.append(v)
            used[v.nodepool] = used.get(v.nodepool, 0) + 1
    return capped
