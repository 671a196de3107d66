"""A disruption pass split across invocations: the slice an event names, the fan-out, the leases.

The scheduled invocation reads the world; when the cluster holds more nodes than
``NODESCALE_DISRUPTION_SLICE_NODES`` and more than one NodePool, it does the cluster-wide cleanup
itself and starts one asynchronous invocation per slice of NodePools (``disruption.slices``), each
with the event ``{"slice": {"pools": [...], "index": i, "of": n}}``. An invocation, sliced or whole,
holds one lease per NodePool it disrupts (``aws/leases``, the DynamoDB table), so a pool is never in
two passes at once, however the passes were cut; a pool whose lease is held is left to the next
minute's pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...aws import leases
from ...disruption.slices import MAX_SLICES, plan_slices
from ...runtime import Runtime

LEASE_PREFIX = "disruption-pool#"
# A slice waits this long for a pool's lease: a previous pass of the pool that is still running will
# not finish within it, and the next minute's pass comes anyway.
LEASE_WAIT_SECONDS = 2.0


class SliceError(ValueError):
    """An event's ``slice`` field nodescale cannot read; the message names the field."""


@dataclass(frozen=True)
class Slice:
    pools: tuple[str, ...]
    index: int = 0
    of: int = 1

    def event(self) -> dict[str, Any]:
        return {"slice": {"pools": list(self.pools), "index": self.index, "of": self.of}}

    @classmethod
    def from_event(cls, value: Any) -> Slice:
        if not isinstance(value, Mapping):
            raise SliceError(f"event field slice={value!r}: expected an object with pools, index and of")
        pools, index, of = value.get("pools"), value.get("index", 0), value.get("of", 1)
        if not isinstance(pools, list) or not pools or not all(isinstance(p, str) and p for p in pools):
            raise SliceError(f"event field slice.pools={pools!r}: expected a non-empty list of NodePool names")
        if not isinstance(index, int) or not isinstance(of, int) or not 0 <= index < of <= MAX_SLICES:
            raise SliceError(f"event field slice.index={index!r}, slice.of={of!r}: expected 0 <= index < of <= "
                             f"{MAX_SLICES}")
        return cls(tuple(pools), index, of)


def nodes_by_pool(nodepools: Mapping[str, Any], views: list[Any]) -> dict[str, int]:
    """Node count per NodePool this system knows (every known pool, 0 for an empty one)."""
    counts = dict.fromkeys(nodepools, 0)
    for view in views:
        if view.nodepool in counts:
            counts[view.nodepool] += 1
    return counts


def slices_for(rt: Runtime, nodepools: Mapping[str, Any], views: list[Any]) -> list[Slice]:
    cut = plan_slices(nodes_by_pool(nodepools, views), rt.settings.disruption_slice_nodes)
    return [Slice(tuple(pools), i, len(cut)) for i, pools in enumerate(cut)]


@contextlib.contextmanager
def pool_leases(rt: Runtime, pools: tuple[str, ...], ttl_seconds: float) -> Iterator[list[str]]:
    """Holds the lease of each pool it can within LEASE_WAIT_SECONDS; yields the pools whose lease is held
    elsewhere (those are not disrupted by this invocation). Taken in name order, released at the end."""
    busy: list[str] = []
    with contextlib.ExitStack() as stack:
        for pool in sorted(pools):
            try:
                stack.enter_context(leases.hold(rt.aws.dynamodb, rt.settings.table_name, LEASE_PREFIX + pool,
                                                wait_seconds=LEASE_WAIT_SECONDS, ttl_seconds=ttl_seconds))
            except leases.LeaseBusy:
                busy.append(pool)
        yield busy


FanOut = Callable[[dict[str, Any]], None]
