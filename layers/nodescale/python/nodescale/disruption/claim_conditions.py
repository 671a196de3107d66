"""The disruption conditions of a NodeClaim, as Karpenter v1's controllers write them (#30.1).

    drifted_mark(why)                        Drifted: True with the drift reason as reason and message, else removed
    consolidatable(view, pool, now)          whether consolidateAfter has passed since the node's last pod change
    consolidatable_mark(ok)                  Consolidatable: True, else removed
    with_marks(conditions, marks, ...)       the conditions with the marks applied; None when nothing changes

Karpenter's nodeclaim disruption controller sets Drifted (reason and message the drift reason: NodePoolDrifted,
RequirementsDrifted, AMIDrift...) and removes it once the NodeClaim is no longer drifted; it sets Consolidatable
once consolidateAfter has passed since the last pod event (or, with none, since initialization) and removes it
while that time has not passed, when the NodeClaim is not initialized or consolidateAfter is Never. Its
disruption queue sets DisruptionReason (reason and message the command's reason: Drifted, Empty,
Underutilized...) when a disruption starts; its termination controller sets InstanceTerminating once the
instance's deletion has been asked for. Pure: the caller gives the time and the object's generation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..model import labels as wk
from ..model.nodepool import NodePool
from ..scheduling import nodeclaim_manifest as ncm
from .drift import Drifted
from .methods.consolidation import pods_settled_since
from .nodes import NodeView

DRIFTED = "Drifted"
CONSOLIDATABLE = "Consolidatable"
DISRUPTION_REASON = "DisruptionReason"
INSTANCE_TERMINATING = "InstanceTerminating"

# A condition to set True with (reason, message), or None: the condition is removed.
Mark = tuple[str, str] | None
TRUE_MARK: Mark = ("", "")  # True with Karpenter's default reason (the type) and no message


def drifted_mark(why: Drifted | None) -> Mark:
    """Drifted as the drift decision says: True with its kind as reason and message, removed when not drifted."""
    if why is None:
        return None
    kind = str(why.kind)
    return (kind, kind)


def consolidatable(view: NodeView, pool: NodePool, now: datetime) -> bool:
    """consolidateAfter set and passed since the node's pods last changed (an empty node: since it was first
    seen empty; a node never recorded: since it turned Ready or got a pod), and the node initialized."""
    after = pool.disruption.consolidate_after_seconds
    if after is None or pool.static or not view.ready or view.labels.get(wk.INITIALIZED) != "true":
        return False
    since = view.empty_since if view.empty else pods_settled_since(view, now)
    return since is not None and now >= since + timedelta(seconds=after)


def consolidatable_mark(ok: bool) -> Mark:
    return TRUE_MARK if ok else None


def _shape(conditions: Sequence[Mapping[str, Any]]) -> dict[Any, tuple[Any, Any, Any]]:
    return {c.get("type"): (c.get("status"), c.get("reason"), c.get("message")) for c in conditions}


def with_marks(
    conditions: Sequence[Mapping[str, Any]], marks: Mapping[str, Mark], *, now: str, generation: int,
) -> list[dict[str, Any]] | None:
    """``conditions`` with each mark applied (set True, or removed); None when the result says what they said."""
    out = [dict(c) for c in conditions if isinstance(c, Mapping)]
    for type_, mark in marks.items():
        if mark is None:
            out = [c for c in out if c.get("type") != type_]
            continue
        reason, message = mark
        out = ncm.set_condition(out, type_, ncm.TRUE, now=now, generation=generation, reason=reason, message=message)
    return None if _shape(out) == _shape(conditions) else out
