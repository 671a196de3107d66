"""Per-node disruption checks: emptiness, expiry, drift and repair. Consolidation lives in consolidation.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..model.nodepool import NodePool
from .nodes import NodeView

# Reasons, as Karpenter names them (budgets refer to the first three).
EMPTY = "Empty"
DRIFTED = "Drifted"
UNDERUTILIZED = "Underutilized"
EXPIRED = "Expired"
UNHEALTHY = "Unhealthy"
INTERRUPTED = "Interrupted"
ORPHANED = "Orphaned"  # an instance with no node, or a node with no instance

# Voluntary reasons are held by budgets and do-not-disrupt; the others are not.
VOLUNTARY = frozenset({EMPTY, DRIFTED, UNDERUTILIZED})


@dataclass(slots=True)
class Decision:
    nodes: list[str]
    reason: str
    detail: str
    # "delete": the pods fit elsewhere (or there are none); "replace": launch first, then drain.
    action: str = "delete"
    saving_per_hour: float = 0.0
    replacement: object | None = None  # a scheduling NodeClaim when action == "replace"
    pods: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Refusal:
    nodes: list[str]
    reason: str
    why: str


def empty_check(node: NodeView, pool: NodePool, now: datetime) -> Decision | None:
    """An empty node goes once it has been empty for ``consolidateAfter`` (v1alpha5: ttlSecondsAfterEmpty)."""
    after = pool.disruption.consolidate_after_seconds
    if not node.empty or after is None:
        return None
    since = node.empty_since
    if since is None:
        return None  # first sighting: the caller records it, the clock starts now
    if now < since + timedelta(seconds=after):
        return None
    waited = int((now - since).total_seconds())
    return Decision([node.name], EMPTY, f"empty for {waited}s (consolidateAfter {int(after)}s)")


def expiry_check(node: NodeView, pool: NodePool, now: datetime) -> Decision | None:
    expire = pool.disruption.expire_after_seconds
    if expire is None or node.created is None:
        return None
    if now < node.created + timedelta(seconds=expire):
        return None
    age_h = (now - node.created).total_seconds() / 3600
    return Decision([node.name], EXPIRED, f"{age_h:.1f}h old, expireAfter {expire / 3600:g}h", action="replace")


def repair_check(node: NodeView, now: datetime, threshold_seconds: float, status_failed_since: datetime | None) -> Decision | None:
    """NotReady, or failing EC2 status checks, for longer than the threshold."""
    if not node.ready and node.ready_since is not None and now >= node.ready_since + timedelta(seconds=threshold_seconds):
        return Decision(
            [node.name], UNHEALTHY, f"NotReady for {int((now - node.ready_since).total_seconds())}s", action="replace"
        )
    if status_failed_since is not None and now >= status_failed_since + timedelta(seconds=threshold_seconds):
        return Decision(
            [node.name],
            UNHEALTHY,
            f"failing EC2 status checks for {int((now - status_failed_since).total_seconds())}s",
            action="replace",
        )
    return None


def unhealthy_share_too_high(unhealthy: int, total: int, limit: float = 0.2) -> bool:
    """Karpenter's repair guard: when a large part of a pool is unhealthy, the cause is not the nodes."""
    return total > 0 and unhealthy / total > limit
