"""Static scale-down: a static NodePool (``spec.replicas``) with more nodes than its replicas gives the rest up.

Karpenter's static capacity design (kubernetes-sigs/karpenter ``designs/static-capacity.md``, "When a user
scales down a static NodePool, Karpenter will drain nodes and terminate [them]"; karpenter.sh NodePools,
``spec.replicas``: "scale operations bypass disruption budgets but still respect PodDisruptionBudgets"):
the user asked for fewer nodes, so the pool's budget does not hold this back, but a node whose pods a
PodDisruptionBudget at zero or ``karpenter.sh/do-not-disrupt`` protects is passed over for the next one.
The order is Karpenter's (``pkg/controllers/static/deprovisioning``, ``resolvedDeprovisioningCandidates``):
empty nodes (DaemonSet pods only) first, then nodes without a do-not-disrupt pod, the lowest rescheduling cost
(the sum of its pods' eviction costs, DaemonSet pods included) times remaining lifetime (the share of
``expireAfter`` still ahead, 1 without one) first; ties go by node name (Karpenter's order is its list's).
Nodes already being drained count as gone; nodes still coming up count as the pool's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ...model.nodepool import NodePool
from ..balanced import eviction_cost
from ..context import Context
from ..decisions import Action, Decision, Reason
from ..guards import node_blocks
from ..nodes import NodeView
from .base import Method


def lifetime_remaining(node: NodeView, pool: NodePool, now: datetime) -> float:
    """Karpenter's LifetimeRemaining: the share of ``expireAfter`` still ahead of the node, within [0, 1]; 1 when
    the pool does not expire nodes (or the node's age is unknown)."""
    expire = pool.disruption.expire_after_seconds
    if not expire or node.created is None:
        return 1.0
    left = expire - (now - node.created).total_seconds()
    return min(1.0, max(0.0, left / expire))


def scale_down_order(node: NodeView, pool: NodePool, now: datetime) -> tuple[bool, bool, float, str]:
    """Empty first; then without do-not-disrupt before with; then rescheduling cost times lifetime remaining."""
    if node.empty:
        return (False, False, 0.0, node.name)
    held = node_blocks(node, now, pool.legacy_annotations) is not None
    cost = sum(eviction_cost(p) for p in (*node.pods, *node.daemon_pods))
    return (True, held, cost * lifetime_remaining(node, pool, now), node.name)


class StaticScaleDown(Method):
    name = "static-scale-down"
    reason = Reason.SCALED_DOWN

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        return ctx.pool(node).static

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken: list[Decision] = []
        by_pool: dict[str, list[NodeView]] = {}
        for v in candidates:
            by_pool.setdefault(v.nodepool, []).append(v)
        for name, mine in sorted(by_pool.items()):
            pool = ctx.inputs.nodepools[name]
            have = sum(1 for v in ctx.by_pool.get(name, []) if v.name not in ctx.inputs.in_progress)
            excess = have - int(pool.replicas or 0)
            for v in sorted(mine, key=lambda v: scale_down_order(v, pool, ctx.now)):
                if excess <= 0:
                    break
                ctx.decided.add(v.name)
                if ctx.guarded(v, Reason.SCALED_DOWN):
                    continue  # the next node goes instead
                d = Decision([v.name], Reason.SCALED_DOWN,
                             f"NodePool {name} has {have} nodes and spec.replicas {pool.replicas}",
                             Action.DELETE, saving_per_hour=v.price, pods=[p.key for p in v.pods])
                ctx.take(d, name)
                taken.append(d)
                excess -= 1
        return taken
