"""How a disruption pass too large for one invocation is cut: into slices of whole NodePools.

A slice is a set of NodePools one invocation disrupts (repair, expiry, drift, emptiness,
consolidation of those pools' nodes), while it still reads the whole cluster (every node is a
place a candidate's pods could go). Cutting along NodePools keeps every budget exact: a budget
(``disruption.budgets``) and a limit (``limits``) belong to one pool, so the invocation that holds
a pool counts all of it. A pool is never cut in two; one pool larger than the threshold is one
slice of its own (see docs/scale.md for that limit).

Pure: pool name -> node count in, lists of pool names out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

# At most this many slices a pass: the disruption function's reserved concurrency is this plus one
# (the scheduled invocation that fans out), set in infra/functions.py from this name.
MAX_SLICES = 8


def plan_slices(nodes_by_pool: Mapping[str, int], slice_nodes: int, max_slices: int = MAX_SLICES) -> list[list[str]]:
    """The pools cut into slices of about ``slice_nodes`` nodes each, at most ``max_slices`` of them.

    One slice (every pool) when the cluster has ``slice_nodes`` nodes or fewer, when ``slice_nodes``
    is 0 (never split), or when there is one pool. Otherwise the pools go, largest first, to the
    slice holding the fewest nodes so far (longest-processing-time order), so the slices' sizes, and
    so their invocations' durations, are as even as whole pools allow. Pools without nodes join the
    smallest slice: they may still have work (an expired in-flight claim) and cost nothing to plan.
    """
    pools = sorted(nodes_by_pool, key=lambda p: (-nodes_by_pool[p], p))
    total = sum(max(0, n) for n in nodes_by_pool.values())
    if slice_nodes <= 0 or total <= slice_nodes or len(pools) < 2:
        return [sorted(pools)] if pools else []
    count = min(max_slices, len(pools), math.ceil(total / slice_nodes))
    slices: list[list[str]] = [[] for _ in range(count)]
    sizes = [0] * count
    for pool in pools:
        smallest = min(range(count), key=lambda i: (sizes[i], i))
        slices[smallest].append(pool)
        sizes[smallest] += max(0, nodes_by_pool[pool])
    return [sorted(s) for s in slices if s]
