"""Budgets limit how many nodes a NodePool loses at once, by reason and by cron window."""

from __future__ import annotations

from datetime import UTC, datetime

from nodescale.disruption import budgets as b
from nodescale.model.nodepool import Budget

# The v1 example's budgets: 10% always; none for drift/underutilization weekdays 09:00-17:00.
EXAMPLE = (
    Budget(nodes="10%"),
    Budget(nodes="0", schedule="0 9 * * mon-fri", duration_seconds=8 * 3600, reasons=(b.DRIFTED, b.UNDERUTILIZED)),
)
MONDAY_10AM = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
MONDAY_6PM = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
SUNDAY_10AM = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def test_percentage_rounds_up():
    assert b.allowed_disruptions(EXAMPLE, 15, 0, b.EMPTY, MONDAY_10AM).allowed == 2
    assert b.allowed_disruptions(EXAMPLE, 1, 0, b.EMPTY, MONDAY_10AM).allowed == 1


def test_cron_window_blocks_named_reasons_only_inside_the_window():
    inside = b.allowed_disruptions(EXAMPLE, 10, 0, b.DRIFTED, MONDAY_10AM)
    assert inside.allowed == 0 and "0 9 * * mon-fri" in inside.why
    assert b.allowed_disruptions(EXAMPLE, 10, 0, b.DRIFTED, MONDAY_6PM).allowed == 1
    assert b.allowed_disruptions(EXAMPLE, 10, 0, b.DRIFTED, SUNDAY_10AM).allowed == 1
    # Emptiness is not among the window's reasons.
    assert b.allowed_disruptions(EXAMPLE, 10, 0, b.EMPTY, MONDAY_10AM).allowed == 1


def test_window_starts_exactly_at_the_cron_fire():
    assert b.allowed_disruptions(EXAMPLE, 10, 0, b.DRIFTED, datetime(2026, 11, 23, 9, 0, tzinfo=UTC)).allowed == 0
    assert b.allowed_disruptions(EXAMPLE, 10, 0, b.DRIFTED, datetime(2026, 11, 23, 17, 0, tzinfo=UTC)).allowed == 1


def test_nodes_already_disrupting_count_against_the_budget():
    assert b.allowed_disruptions((Budget(nodes="3"),), 10, 2, b.EMPTY, MONDAY_10AM).allowed == 1
    assert b.allowed_disruptions((Budget(nodes="3"),), 10, 5, b.EMPTY, MONDAY_10AM).allowed == 0


def test_default_is_ten_percent():
    assert b.allowed_disruptions((), 30, 0, b.UNDERUTILIZED, MONDAY_10AM).allowed == 3


def test_an_allowance_carries_the_limiting_budget_and_its_counts_besides_the_message():
    """#29.3: the allowance is typed (the budget, the reason and the counts); its message is built from them."""
    three = Budget(nodes="3")
    got = b.allowed_disruptions((three,), 10, 2, b.EMPTY, MONDAY_10AM)
    assert (got.allowed, got.limiting, got.reason, got.total, got.disrupting, got.budget_nodes) == (
        1, three, b.EMPTY, 10, 2, 3)
    assert str(got) == got.why == "budget nodes=3 allows 3 of 10 node(s), 2 already disrupting"
    only_drift = (Budget(nodes="0", reasons=(b.DRIFTED,)),)
    free = b.allowed_disruptions(only_drift, 4, 1, b.EMPTY, MONDAY_10AM)
    assert (free.allowed, free.limiting, free.why) == (4, None, "no budget applies to reason Empty")
