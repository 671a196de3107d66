"""A spot/on-demand split per NodePool (aws/karpenter-provider-aws#331, open since 2021): the NodePool
annotation ``nodescale.io/on-demand-min-percent: "30"`` keeps at least that share of the pool's nodes
off spot, counting the nodes it has (registered and in flight, not being deleted) with the ones a plan
launches. Whole nodes are counted, not vCPUs: an interruption takes a node, so the guarantee is in nodes.
On-demand and reserved capacity both count as off spot (neither is interrupted).

Launches: after packing, the pool's new NodeClaims that may be either spot or on-demand are narrowed to
on-demand (and reserved, where the pool has it), in plan order, until ``ceil(percent x (existing + new) / 100)`` nodes are off spot; a claim
whose pods require spot stays spot. The same solve plans interruption replacements (the interrupted node
no longer counts) and consolidation's simulations (the candidates no longer count), so a replacement keeps
the split; removing nodes that would leave the pool under it with fewer on-demand nodes is refused
(:func:`removal_breaks_split`). Spot nodes are not replaced only to reach the split: it is reached as
nodes are launched and replaced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..model import labels as wk
from ..model.instancetype import InstanceType
from ..model.nodepool import ON_DEMAND_MIN_PERCENT, NodePool
from .nodeclaim import pinned
from .plan import ExistingNode, NodeClaim

__all__ = ["ON_DEMAND_MIN_PERCENT", "SplitRefusal", "keep_split", "on_demand_only", "removal_breaks_split",
           "required_on_demand", "split_refusal"]


def required_on_demand(percent: int, total: int) -> int:
    """Nodes that must be off spot among ``total``: ``percent`` of them, rounded up (30% of 10 is 3, of 11 is 4)."""
    return (percent * total + 99) // 100


def off_spot(capacity_type: str) -> bool:
    return capacity_type != wk.CAPACITY_SPOT


def removal_breaks_split(percent: int | None, before: Sequence[str], after: Sequence[str]) -> bool:
    """Whether a pool whose nodes have the capacity types ``before`` may not become ``after`` (nodes removed,
    replacements added): it would end under its minimum with fewer nodes off spot than it had. A pool
    already under its minimum may still lose spot nodes."""
    if not percent:
        return False
    have_after = sum(map(off_spot, after))
    return have_after < required_on_demand(percent, len(after)) and have_after < sum(map(off_spot, before))


@dataclass(frozen=True, slots=True)
class SplitRefusal:
    """A pool's on-demand minimum refusing a change: ``off`` of ``total`` nodes would be off spot, ``needed`` are."""

    pool: str
    percent: int
    off: int
    total: int
    needed: int

    @property
    def why(self) -> str:
        return (f"NodePool {self.pool} keeps at least {self.percent}% of its nodes off spot ({ON_DEMAND_MIN_PERCENT}): "
                f"{self.off} of {self.total} would be, and {self.needed} are needed")

    def __str__(self) -> str:
        return self.why


def split_refusal(pool: NodePool, before: Sequence[str], after: Sequence[str]) -> SplitRefusal | None:
    """Why the pool may not go from nodes of capacity types ``before`` to ``after``, or None when it may."""
    percent = pool.on_demand_min_percent
    if not removal_breaks_split(percent, before, after):
        return None
    assert percent is not None
    return SplitRefusal(pool.name, percent, sum(map(off_spot, after)), len(after),
                        required_on_demand(percent, len(after)))


def keep_split(
    claims: list[NodeClaim],
    pools: Iterable[NodePool],
    existing: Iterable[ExistingNode],
    types_by_pool: Mapping[str, Sequence[InstanceType]],
    unavailable: frozenset[tuple[str, str, str]] = frozenset(),
) -> list[NodeClaim]:
    """``claims`` with as many of each split pool's narrowed off spot as its minimum needs."""
    split = {p.name: p.on_demand_min_percent for p in pools if p.on_demand_min_percent}
    if not split or not claims:
        return claims
    have: dict[str, list[int]] = {}  # pool -> [off spot, total]
    for node in existing:
        if node.nodepool in split and not node.unschedulable:
            counted = have.setdefault(node.nodepool, [0, 0])
            counted[0] += off_spot(node.labels.get(wk.CAPACITY_TYPE, ""))
            counted[1] += 1
    out = list(claims)
    for pool, percent in split.items():
        mine = [i for i, c in enumerate(out) if c.nodepool == pool]
        if not mine:
            continue
        off, total = have.get(pool, [0, 0])
        off += sum(wk.CAPACITY_SPOT not in out[i].capacity_types for i in mine)  # pods that rule spot out
        need = required_on_demand(percent, total + len(mine)) - off
        for i in mine:
            if need <= 0:
                break
            if wk.CAPACITY_SPOT in out[i].capacity_types and wk.CAPACITY_ON_DEMAND in out[i].capacity_types:
                narrowed = on_demand_only(out[i], types_by_pool.get(pool, ()), unavailable)
                if narrowed is not None:
                    out[i] = narrowed
                    need -= 1
    return out


def on_demand_only(
    claim: NodeClaim, types: Sequence[InstanceType], unavailable: frozenset[tuple[str, str, str]] = frozenset()
) -> NodeClaim | None:
    """The claim without spot: its other capacity types (on-demand, and reserved where a pool has it), its
    types offered in them in its zones, cheapest first; None if no type is."""
    allowed = [c for c in claim.capacity_types if off_spot(c)]
    by_name = {t.name: t for t in types}
    options: list[tuple[float, str]] = []
    zones: set[str] = set()
    kept: set[str] = set()
    for name in claim.instance_types:
        it = by_name.get(name)
        offers = [o for o in (it.offerings if it is not None else ())
                  if o.available and o.capacity_type in allowed and o.zone in claim.zones
                  and (name, o.zone, o.capacity_type) not in unavailable]
        if offers:
            options.append((min(o.price for o in offers), name))
            zones.update(o.zone for o in offers)
            kept.update(o.capacity_type for o in offers)
    if not options:
        return None
    options.sort()
    ordered_zones = [z for z in claim.zones if z in zones]
    capacity_types = [c for c in allowed if c in kept]
    requirements, labels = pinned(claim.requirements, claim.labels, ordered_zones, capacity_types)
    return dataclasses.replace(
        claim, instance_types=[n for _, n in options], capacity_types=capacity_types, zones=ordered_zones,
        requirements=requirements, labels=labels, price=options[0][0],
    )
