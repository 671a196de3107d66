"""The spot interruption figure (#33.2) from sim's record: each step per node, the pods lost told apart, the goal."""

from __future__ import annotations

from typing import Any

from sim import spotfigure


def entry(node: str, warned: float, cordoned: float | None, first: float | None, last: float | None,
          ended: float | None = 130.0, pdb: list[str] | None = None, unreached: list[str] | None = None,
          pods: int = 2) -> dict[str, Any]:
    return {"instanceId": f"i-{node}", "node": node, "warnedAt": warned, "noticeEndsAt": warned + 120,
            "endedAt": ended, "cordonedAt": cordoned, "firstEvictionAt": first, "lastEvictablePodGoneAt": last,
            "evictablePods": pods, "evictionRequests": pods, "lostHeldByPdb": pdb or [],
            "lostNotReached": unreached or []}


RECORD = [
    entry("a", 10.0, 11.0, 12.0, 14.0),
    entry("b", 10.0, 13.0, 20.0, None, pdb=["ns/held"]),
    entry("c", 10.0, None, None, None, unreached=["ns/x", "ns/y"]),
]


def test_each_step_counts_only_the_nodes_that_reached_both_its_ends() -> None:
    """#33.2: warning -> cordoned -> first eviction -> last pod gone, and from the batch's start."""
    steps = spotfigure.steps(RECORD, {"a": 10.5, "b": 10.5, "c": 10.5})
    assert steps["warning -> tainted and cordoned"] == [1.0, 3.0]
    assert steps["tainted and cordoned -> first eviction"] == [1.0, 7.0]
    assert steps["first eviction -> last evictable pod gone"] == [2.0]
    assert steps["last evictable pod gone -> instance ended"] == [116.0]
    assert steps["batch start -> first eviction"] == [1.5, 9.5]


def test_pods_lost_are_split_into_held_by_a_pdb_and_not_reached() -> None:
    """#33.2: the pods still on a node when its instance ended, by why."""
    assert spotfigure.lost(RECORD) == {"heldByPdb": 1, "heldByPdbNodes": 1, "notReached": 2, "notReachedNodes": 1}


def test_the_goal_needs_every_node_cordoned_and_evicting_in_time_and_nothing_lost_unreached() -> None:
    """#33.2: cordoned within 5 s of the batch's start, evicting within 15 s, no pod lost but to a PDB."""
    starts = {"a": 10.0, "b": 10.0}
    assert spotfigure.goal_met(RECORD[:2], starts)["met"]
    assert not spotfigure.goal_met(RECORD[:2], {"a": 10.0, "b": 7.0})["met"]  # b cordoned 6 s after its start
    assert not spotfigure.goal_met(RECORD, {**starts, "c": 10.0})["met"]
    lines = list(spotfigure.lines("wave", RECORD, starts))
    assert any("1 a PDB allowed no more (on 1 nodes), 2 not reached in time (on 1 nodes)" in line for line in lines)
    assert lines[-1].startswith("wave: goal") and "NOT met" in lines[-1]
