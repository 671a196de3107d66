"""Disruption budgets: how many of a NodePool's nodes may be disrupted now, for a given reason."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import croniter

from ..model.nodepool import DEFAULT_BUDGETS, Budget

# The reasons Karpenter's budgets name; a budget without reasons applies to all of them.
EMPTY = "Empty"
DRIFTED = "Drifted"
UNDERUTILIZED = "Underutilized"
REASONS = (EMPTY, DRIFTED, UNDERUTILIZED)


@dataclass(frozen=True, slots=True)
class Allowance:
    allowed: int  # how many more nodes may be disrupted now (never negative)
    limiting: Budget | None  # the budget that set the number
    why: str


def is_active(budget: Budget, now: datetime) -> bool:
    """A budget without a schedule is always active; with one, from each cron fire for ``duration``."""
    if not budget.schedule:
        return True
    if budget.duration_seconds is None:
        return False
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
            window = f" (schedule {b.schedule!r} for {_duration(b.duration_seconds)})" if b.schedule else ""
            why = f"budget nodes={b.nodes}{window} allows {n} of {total_nodes} node(s), {disrupting} already disrupting"
            best = Allowance(allowed, b, why)
    if best is None:
        return Allowance(total_nodes, None, f"no budget applies to reason {reason}")
    return best


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v) or "0s"
