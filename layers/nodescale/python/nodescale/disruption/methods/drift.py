"""Drift: replace nodes that no longer match what their pool would launch today.

The cloud side (image, subnets, security groups...) comes in as ``Inputs.cloud_drift``, looked up by
the use-case; the template side (requirements, labels, taints) is ``disruption.drift.template_drift``.
A drifted node with pods is replaced; an empty one is deleted. Drift is graceful (budgets hold it), and
do-not-disrupt pods and PodDisruptionBudgets at zero keep the node, unless its pool sets
``terminationGracePeriod``: then, as in Karpenter v1, the node is drifted anyway and its drain respects
them only until that grace period runs out.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import zonalshift
from ..context import Context
from ..decisions import Action, Decision, Reason
from ..drift import Drifted, template_drift
from ..nodes import NodeView
from .base import Method


class Drift(Method):
    name = "drift"
    reason = Reason.DRIFTED

    def _why(self, node: NodeView, ctx: Context) -> Drifted | None:
        # Karpenter's order: the pool's own fields first (NodePoolDrifted, RequirementsDrifted), then the cloud's;
        # then a zonal shift the pool asks to move off (nodescale's own).
        pool = ctx.pool(node)
        return (template_drift(node, pool) or ctx.inputs.cloud_drift.get(node.name)
                or zonalshift.drifted(node, pool, ctx.inputs.shifted_zones))

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        return bool(self._why(node, ctx))

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken: list[Decision] = []
        for v in candidates:
            why = self._why(v, ctx)
            if not why:
                continue
            ctx.decided.add(v.name)
            bounded = ctx.pool(v).disruption.termination_grace_period_seconds is not None
            if ctx.voluntary_ok(v, Reason.DRIFTED, guards=not bounded):
                d = Decision([v.name], Reason.DRIFTED, str(why), Action.REPLACE if v.pods else Action.DELETE,
                             pods=[p.key for p in v.pods], drift=why.kind)
                ctx.take(d, v.nodepool)
                taken.append(d)
        return taken
