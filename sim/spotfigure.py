"""The spot interruption figure (#33.2), from sim's record of warned nodes (``GET /sim/v1/spot-interruptions``).

Per warned node, on the simulated clock: warning delivered -> tainted and cordoned -> first eviction request
-> last evictable pod gone, against the instance's end; p50 / p95 / max of each step over the nodes that
reached it, and the evictable pods still on a node when its instance ended, split into those a
PodDisruptionBudget allowed no more disruptions for and those the drain had not reached in time. With the
time each node's batch started (the invocation that carried its warning), the same from the batch's start,
and the goal's verdict: cordoned within ``CORDON_GOAL`` seconds of the batch's start, evicting within
``DRAIN_GOAL`` seconds, nothing evictable lost but what a PDB held.

Pure: the benchmarks (``bench.scalerun``, the soak's chaos run) read the record and print these lines.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

CORDON_GOAL = 5.0
DRAIN_GOAL = 15.0


def percentile(values: list[float], share: float) -> float:
    """Nearest rank of the sorted values (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def _between(entries: list[dict[str, Any]], start: str | Mapping[str, float], end: str) -> list[float]:
    out = []
    for entry in entries:
        begin = entry.get(start) if isinstance(start, str) else start.get(entry.get("node") or "")
        finish = entry.get(end)
        if begin is not None and finish is not None:
            out.append(finish - begin)
    return out


def steps(entries: list[dict[str, Any]], batch_started: Mapping[str, float] | None = None) -> dict[str, list[float]]:
    """Each step's seconds per node that reached both its ends (``batch_started``: node -> elapsed seconds)."""
    out = {
        "warning -> tainted and cordoned": _between(entries, "warnedAt", "cordonedAt"),
        "tainted and cordoned -> first eviction": _between(entries, "cordonedAt", "firstEvictionAt"),
        "first eviction -> last evictable pod gone": _between(entries, "firstEvictionAt", "lastEvictablePodGoneAt"),
        "warning -> last evictable pod gone": _between(entries, "warnedAt", "lastEvictablePodGoneAt"),
        "last evictable pod gone -> instance ended": _between(entries, "lastEvictablePodGoneAt", "endedAt"),
    }
    if batch_started:
        out.update({
            "batch start -> tainted and cordoned": _between(entries, batch_started, "cordonedAt"),
            "batch start -> first eviction": _between(entries, batch_started, "firstEvictionAt"),
            "batch start -> last evictable pod gone": _between(entries, batch_started, "lastEvictablePodGoneAt"),
        })
    return out


def lost(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Evictable pods still on their node when its instance ended, and the nodes they were on."""
    return {
        "heldByPdb": sum(len(e["lostHeldByPdb"]) for e in entries),
        "heldByPdbNodes": sum(1 for e in entries if e["lostHeldByPdb"]),
        "notReached": sum(len(e["lostNotReached"]) for e in entries),
        "notReachedNodes": sum(1 for e in entries if e["lostNotReached"]),
    }


def goal_met(entries: list[dict[str, Any]], batch_started: Mapping[str, float]) -> dict[str, Any]:
    """The goal, node by node: cordoned and evicting in time from its batch's start, nothing lost unreached."""
    with_pods = [e for e in entries if e["evictablePods"]]
    cordoned = [e for e in entries if _late(e, batch_started, "cordonedAt", CORDON_GOAL) is False]
    evicting = [e for e in with_pods if _late(e, batch_started, "firstEvictionAt", DRAIN_GOAL) is False]
    drained = [e for e in with_pods if _late(e, batch_started, "lastEvictablePodGoneAt", DRAIN_GOAL) is False]
    unreached = lost(entries)["notReached"]
    return {"cordoned": len(cordoned), "evicting": len(evicting), "drained": len(drained), "nodes": len(entries),
            "withPods": len(with_pods), "met": len(cordoned) == len(entries) and len(evicting) == len(with_pods)
            and unreached == 0}


def _late(entry: dict[str, Any], batch_started: Mapping[str, float], key: str, goal: float) -> bool | None:
    start, at = batch_started.get(entry.get("node") or ""), entry.get(key)
    if start is None or at is None:
        return None
    return at - start > goal


def lines(head: str, entries: list[dict[str, Any]], batch_started: Mapping[str, float] | None = None
          ) -> Iterator[str]:
    """The figure, one line a step, then the pods lost and (with batch starts) the goal's verdict."""
    ended = [e for e in entries if e.get("endedAt") is not None]
    with_pods = [e for e in entries if e["evictablePods"]]
    yield (f"{head}: {len(entries)} warned nodes ({len(with_pods)} with evictable pods, "
           f"{sum(e['evictablePods'] for e in entries)} pods), {len(ended)} instances ended by their notice; "
           f"simulated clock, sim's record of the API server's writes")
    for name, values in steps(entries, batch_started).items():
        if values:
            yield (f"{head}:   {name:44} p50 {percentile(values, 0.5):6.1f} s, p95 {percentile(values, 0.95):6.1f} s, "
                   f"max {max(values):6.1f} s over {len(values)} nodes")
        else:
            yield f"{head}:   {name:44} no node"
    gone = lost(ended)
    drained = sum(1 for e in with_pods if e.get("lastEvictablePodGoneAt") is not None)
    yield (f"{head}: drained before the instance ended: {drained} of {len(with_pods)} nodes with pods; pods still on "
           f"a node when its instance ended: {gone['heldByPdb']} a PDB allowed no more (on {gone['heldByPdbNodes']} "
           f"nodes), {gone['notReached']} not reached in time (on {gone['notReachedNodes']} nodes)")
    if batch_started:
        met = goal_met(entries, batch_started)
        yield (f"{head}: goal (cordoned within {CORDON_GOAL:.0f} s of the batch's start, evicting within "
               f"{DRAIN_GOAL:.0f} s, no pod lost unreached): {'MET' if met['met'] else 'NOT met'}: "
               f"{met['cordoned']}/{met['nodes']} cordoned in time, {met['evicting']}/{met['withPods']} evicting in "
               f"time, {met['drained']}/{met['withPods']} empty within {DRAIN_GOAL:.0f} s")
