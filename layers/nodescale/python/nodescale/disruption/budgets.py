"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, for a given reason.

``allowed_disruptions`` reads the budgets; ``Tally`` keeps one plan's count, so that what one method
takes is no longer there for the next. v1alpha5 pools have no budget (Karpenter v0.2x had none) but
Karpenter v0.2x's pace instead, one disruption that moves pods at a time: ``Tally.wait_turn``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..model.nodepool import DEFAULT_BUDGETS, Budget, NodePool
from .decisions import DRIFTED, EMPTY, UNDERUTILIZED, Blocker, Hold
from .nodes import NodeView

# The reasons Karpenter's budgets name; a budget without reasons applies to all of them.
REASONS = (EMPTY, DRIFTED, UNDERUTILIZED)


@dataclass(frozen=True, slots=True)
class Allowance:
    """How many more of a pool's nodes may be disrupted for ``reason`` now, and which budget said so."""

    allowed: int  # how many more nodes may be disrupted now (never negative)
    limiting: Budget | None  # the budget that set the number; None when no budget applies to the reason
    reason: str
    total: int  # the pool's nodes
    disrupting: int  # of them, already being disrupted
    budget_nodes: int  # what the limiting budget allows of ``total``, before those disrupting count

    @property
    def why(self) -> str:
        b = self.limiting
        if b is None:
            return f"no budget applies to reason {self.reason}"
        window = f" (schedule {b.schedule!r} for {_duration(b.duration_seconds)})" if b.schedule else ""
        return (f"budget nodes={b.nodes}{window} allows {self.budget_nodes} of {self.total} node(s), "
                f"{self.disrupting} already disrupting")

    def __str__(self) -> str:
        return self.why


def is_active(budget: Budget, now: datetime) -> bool:
    """A budget without a schedule is always active; with one, from each cron fire for ``duration``."""
    if not budget.schedule:
        return True
    if budget.duration_seconds is None:
        return False
    # Imported here, not at module load: only a budget with a schedule needs it (cold start).
    from croniter import croniter

    # croniter's get_prev from just after ``now`` includes a fire exactly at ``now``.
    last = croniter(budget.schedule, now + timedelta(microseconds=1)).get_prev(datetime)
    return now < last + timedelta(seconds=budget.duration_seconds)


def budget_nodes(budget: Budget, total_nodes: int) -> int:
    """The number of nodes a budget allows out of ``total_nodes``; percentages round up, like Karpenter."""
    raw = budget.nodes.strip()
    if raw.endswith("%"):
        return math.ceil(total_nodes * int(raw[:-1]) / 100)
    return int(raw)


def allowed_disruptions(
    budgets: Iterable[Budget], total_nodes: int, disrupting: int, reason: str, now: datetime
) -> Allowance:
    """The most restrictive active budget for ``reason`` wins; nodes already being disrupted count against it."""
    budgets = tuple(budgets) or DEFAULT_BUDGETS
    best: Allowance | None = None
    for b in budgets:
        if b.reasons and reason not in b.reasons:
            continue
        if not is_active(b, now):
            continue
        n = budget_nodes(b, total_nodes)
        allowed = max(0, n - disrupting)
        if best is None or allowed < best.allowed:
            best = Allowance(allowed, b, reason, total_nodes, disrupting, n)
    if best is None:
        return Allowance(total_nodes, None, reason, total_nodes, disrupting, total_nodes)
    return best


class Tally:
    """Allowances per (pool, reason), reduced as decisions are taken in this plan; and, for pools that
    disrupt one at a time (v1alpha5), whether their turn is taken."""

    def __init__(
        self, now: datetime, pools: Mapping[str, NodePool], views: Iterable[NodeView], in_progress: frozenset[str]
    ) -> None:
        self.now = now
        self.pools = pools
        self.total: dict[str, int] = {}
        self.disrupting: dict[str, int] = {}
        for v in views:
            self.total[v.nodepool] = self.total.get(v.nodepool, 0) + 1
            if v.name in in_progress:
                self.disrupting[v.nodepool] = self.disrupting.get(v.nodepool, 0) + 1
        # Karpenter v0.2x waited for a command's nodes to be gone before the next: any node under way keeps
        # the turn, whatever it was disrupted for.
        self.turn_taken: set[str] = set(self.disrupting)

    def allowance(self, pool: str, reason: str) -> Allowance:
        p = self.pools[pool]
        return allowed_disruptions(
            p.disruption.budgets, self.total.get(pool, 0), self.disrupting.get(pool, 0), reason, self.now
        )

    def take(self, pool: str, count: int = 1, moves_pods: bool = True) -> None:
        self.disrupting[pool] = self.disrupting.get(pool, 0) + count
        if moves_pods:
            self.turn_taken.add(pool)

    def wait_turn(self, pool: str) -> Hold | None:
        """Why a disruption that moves pods must wait in a one-at-a-time pool, or None (its turn, or no such rule)."""
        if not self.pools[pool].disruption.one_at_a_time or pool not in self.turn_taken:
            return None
        return Hold(
            Blocker.ONE_AT_A_TIME,
            f"Provisioner {pool} (v1alpha5) disrupts nodes with pods one at a time, as Karpenter v0.2x did, "
            "and one is under way",
        )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v) or "0s"
