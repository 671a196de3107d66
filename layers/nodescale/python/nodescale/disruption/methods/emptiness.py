"""Emptiness: delete nodes that have had no pods for the pool's ``consolidateAfter``.

The clock starts when nodescale first sees the node empty and records it on the node (the outcome's
``mark_empty``); a node that has pods again loses the mark (``clear_empty``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ...model.nodepool import NodePool
from ...scheduling.capacity_split import split_refusal
from ..context import Context
from ..decisions import Blocker, Decision, Hold, Reason
from ..nodes import NodeView
from .base import Method


def empty_check(node: NodeView, pool: NodePool, now: datetime) -> Decision | None:
    """An empty node goes once it has been empty for ``consolidateAfter`` (v1alpha5: ttlSecondsAfterEmpty)."""
    after = pool.disruption.consolidate_after_seconds
    if not node.empty or after is None or pool.static:  # a static pool (spec.replicas) keeps its nodes
        return None
    since = node.empty_since
    if since is None:
        return None  # first sighting: the caller records it, the clock starts now
    if now < since + timedelta(seconds=after):
        return None
    waited = int((now - since).total_seconds())
    return Decision([node.name], Reason.EMPTY, f"empty for {waited}s (consolidateAfter {int(after)}s)")


class Emptiness(Method):
    name = "emptiness"
    reason = Reason.EMPTY

    def notice(self, candidates: Sequence[NodeView], ctx: Context) -> None:
        for v in candidates:
            if not v.empty:
                if v.empty_since is not None:
                    ctx.out.clear_empty.append(v.name)
            elif (ctx.pool(v).disruption.consolidate_after_seconds is not None and not ctx.pool(v).static
                  and v.ready and v.empty_since is None):
                ctx.out.mark_empty.append(v.name)

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        # A node not Ready may still be joining; one that stays NotReady is repair's to replace.
        return node.ready and empty_check(node, ctx.pool(node), ctx.now) is not None

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken: list[Decision] = []
        for v in candidates:
            d = empty_check(v, ctx.pool(v), ctx.now)
            if d is None:
                continue
            ctx.decided.add(v.name)
            hold = _split_blocks(v, ctx)
            if hold:
                ctx.hold([v.name], Reason.EMPTY, hold)
                continue
            if ctx.voluntary_ok(v, Reason.EMPTY):
                d.saving_per_hour = v.price
                ctx.take(d, v.nodepool)
                taken.append(d)
        return taken


def _split_blocks(v: NodeView, ctx: Context) -> Hold | None:
    """Why removing ``v`` would take its pool under its on-demand minimum, counting this run's removals."""
    pool = ctx.pool(v)
    if not pool.on_demand_min_percent:
        return None
    gone = {n for d in ctx.out.decisions for n in d.nodes} | set(ctx.inputs.in_progress)
    before = [x.capacity_type for x in ctx.by_pool.get(v.nodepool, []) if x.name not in gone]
    after = [x.capacity_type for x in ctx.by_pool.get(v.nodepool, []) if x.name not in gone and x.name != v.name]
    refusal = split_refusal(pool, before, after)
    return None if refusal is None else Hold(Blocker.CAPACITY_SPLIT, refusal.why)
