"""Static scale-down: a static NodePool (``spec.replicas``) with more nodes than its replicas gives the rest up.

Karpenter's static capacity design (kubernetes-sigs/karpenter ``designs/static-capacity.md``, "When a user
scales down a static NodePool, Karpenter will drain nodes and terminate [them]"; karpenter.sh NodePools,
``spec.replicas``: "scale operations bypass disruption budgets but still respect PodDisruptionBudgets"):
the user asked for fewer nodes, so the pool's budget does not hold this back, but a node whose pods a
PodDisruptionBudget at zero or ``karpenter.sh/do-not-disrupt`` protects is passed over for the next one.
The nodes cheapest to disrupt go first: empty ones, then those with the fewest pods. Nodes already being
drained count as gone; nodes still coming up count as the pool's.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..context import Context
from ..decisions import Action, Decision, Reason
from ..nodes import NodeView
from .base import Method


def _fewest_pods_first(node: NodeView) -> tuple[int, float, str]:
    """Fewest pods, then the dearest node (most saved), then by name."""
    return (len(node.pods), -node.price, node.name)


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
            for v in sorted(mine, key=_fewest_pods_first):
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
