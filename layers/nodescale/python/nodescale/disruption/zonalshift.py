"""Voluntary disruption while an Availability Zone is under an ARC zonal shift.

By default nodescale does what Karpenter v1.12+ does with ``ENABLE_ZONAL_SHIFT`` (Karpenter's Zonal Shift
RFC and the "ARC zonal shift support for EKS Auto Mode and Karpenter" post): nodes in the shifted zone
are not voluntarily disrupted (no emptiness, consolidation or drift: the zone may be failing, and
churning nodes there only adds to it), and a consolidation that would move pods *into* the zone is not
simulated as possible (its nodes are no destination, and its offerings are unavailable to replacements).
Forceful disruption (expiry of a karpenter.sh/v1 pool, repair, interruption) goes on.

A NodePool may ask for the opposite with the annotation ``nodescale.io/zonal-shift: replace`` in its node
template (``spec.template.metadata.annotations``; ``spec.annotations`` for a v1alpha5 Provisioner), where
``nodescale.io/rebalance`` goes too: its nodes in a shifted zone are then drifted
(``ZonalShift``), so they are replaced outside the zone, one budget's worth at a time, like any drift.
"""

from __future__ import annotations

from collections.abc import Container

from ..model.nodepool import NodePool
from .decisions import Blocker, Hold
from .drift import Drifted, DriftKind
from .nodes import NodeView

ZONAL_SHIFT_ANNOTATION = "nodescale.io/zonal-shift"
REPLACE = "replace"


def replaces(pool: NodePool) -> bool:
    """Whether ``pool`` asks for its nodes in a shifted zone to be replaced elsewhere."""
    return pool.annotations.get(ZONAL_SHIFT_ANNOTATION) == REPLACE


def held(node: NodeView, pool: NodePool, shifted: Container[str]) -> Hold | None:
    """Why a voluntary disruption of ``node`` waits (its zone is shifted and its pool keeps it), or None."""
    if not node.zone or node.zone not in shifted or replaces(pool):
        return None
    return Hold(Blocker.ZONAL_SHIFT,
                f"zone {node.zone} is under an ARC zonal shift: its nodes are not voluntarily disrupted until the "
                f"shift ends (set {ZONAL_SHIFT_ANNOTATION}: {REPLACE} on the NodePool to replace them elsewhere)")


def drifted(node: NodeView, pool: NodePool, shifted: Container[str]) -> Drifted | None:
    """The node's zone is shifted and its pool asks for replacement: drift, so budgets pace it."""
    if not node.zone or node.zone not in shifted or not replaces(pool):
        return None
    return Drifted(DriftKind.ZONAL_SHIFT, f"zone {node.zone} is under an ARC zonal shift and the NodePool asks "
                                          f"for its nodes there to be replaced ({ZONAL_SHIFT_ANNOTATION}: {REPLACE})")
