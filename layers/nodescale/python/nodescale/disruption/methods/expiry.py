"""Expiry: replace nodes older than their pool's ``expireAfter``.

Forceful under the v1 API (past budgets and do-not-disrupt, as Karpenter v1 does); older APIs let
budgets and do-not-disrupt hold it. An expired node without pods is deleted, not replaced. A v1alpha5
pool has no budget but goes at Karpenter v0.2x's pace: its empty expired nodes all at once, those with
pods one at a time, the longest expired first.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ...config.nodepools import V1
from ...model.nodepool import NodePool
from ...model.timestamps import shifted
from ..context import Context
from ..decisions import Action, Decision, Reason
from ..nodes import NodeView
from .base import Method


def expiry_check(node: NodeView, pool: NodePool, now: datetime) -> Decision | None:
    expire = pool.disruption.expire_after_seconds
    if expire is None or node.created is None:
        return None
    if now < shifted(node.created, expire):
        return None
    age_h = (now - node.created).total_seconds() / 3600
    return Decision([node.name], Reason.EXPIRED, f"{age_h:.1f}h old, expireAfter {expire / 3600:g}h",
                    action=Action.REPLACE)


class Expiry(Method):
    name = "expiry"
    reason = Reason.EXPIRED

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        return expiry_check(node, ctx.pool(node), ctx.now) is not None

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken: list[Decision] = []
        for v in _in_turn(candidates, ctx):
            pool = ctx.pool(v)
            d = expiry_check(v, pool, ctx.now)
            if d is None:
                continue
            d.pods = [p.key for p in v.pods]
            if not v.pods:
                d.action = Action.DELETE
            if pool.api_version == V1 or ctx.voluntary_ok(v, Reason.EXPIRED):
                ctx.take(d, v.nodepool)
                taken.append(d)
            else:
                ctx.decided.add(v.name)
        return taken


def _in_turn(candidates: Sequence[NodeView], ctx: Context) -> list[NodeView]:
    """One-at-a-time pools (v1alpha5) last, their longest-expired (oldest) node first, the one Karpenter
    v0.2x replaced first; the other pools keep the order they came in, as before."""
    def serial(v: NodeView) -> bool:
        return ctx.pool(v).disruption.one_at_a_time

    oldest_first = sorted((v for v in candidates if serial(v)), key=lambda v: v.created or ctx.now)
    return [v for v in candidates if not serial(v)] + oldest_first
