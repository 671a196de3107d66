"""Capacity-block expiry: drain the nodes of a capacity block before EC2 takes its instances back.

A capacity block ends at a set time, and EC2 reclaims its instances then. Karpenter deletes the
NodeClaims of a block from 40 minutes before its end (karpenter-provider-aws
``controllers/capacityreservation/expiration``; the window is ``capacityReservationExpirationPeriod``
in ``ec2nodeclass_status.go``), whatever the budgets say, so the pods move while the node is still there.
Here the same: a node labelled with such a block's ``karpenter.k8s.aws/capacity-reservation-id`` is
replaced (deleted when it has no pods), forcefully as expiry is under the v1 API; the replacement cannot
go into the block, whose offering is unavailable from then on.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...model import labels as wk
from ..context import Context
from ..decisions import Action, Decision, Reason
from ..nodes import NodeView
from .base import Method


def _block(node: NodeView, ctx: Context) -> str | None:
    rid = node.labels.get(wk.CAPACITY_RESERVATION_ID)
    return rid if rid and rid in ctx.inputs.expiring_reservations else None


class CapacityBlockExpiry(Method):
    name = "capacity-block-expiry"
    reason = Reason.CAPACITY_BLOCK_EXPIRING

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        return _block(node, ctx) is not None

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken: list[Decision] = []
        for v in candidates:
            rid = _block(v, ctx)
            if rid is None:
                continue
            end = ctx.inputs.expiring_reservations[rid]
            minutes = max(0, int((end - ctx.now).total_seconds() // 60))
            d = Decision([v.name], Reason.CAPACITY_BLOCK_EXPIRING,
                         f"capacity block {rid} ends at {end.isoformat()} (in {minutes} min)",
                         action=Action.REPLACE if v.pods else Action.DELETE, pods=[p.key for p in v.pods])
            ctx.take(d, v.nodepool)
            taken.append(d)
        return taken
