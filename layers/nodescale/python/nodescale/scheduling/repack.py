"""A local-improvement pass after the greedy packing: the new claims of one pool class (same fit, zones
and capacity types), whose pods carry no topology and are selected by none, are packed again with their
pods mixed, cpu-heavy beside memory-heavy, and each node's type chosen by how well the whole mix fills it.

Pods are packed by node patterns: for each candidate type, a greedy fill that takes at each step the pod
shape pointing most along the node's remaining room (the dot-product heuristic of vector bin packing),
scored by the type's price over the value of the pods it holds (each resource valued at a price fitted
to the types' prices). The best pattern is repeated while its pods last. The result replaces the class's
claims only when it costs less, so the pass never makes a plan dearer; the pods keep the requirements,
zones and capacity types they had, on types the claims could already launch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model.pod import Pod
from .groups import Group
from .nodeclaim import ClaimBin
from .plan import SPOT_FLEXIBILITY
from .templates import TypeOption, fit_count, holds
from .topology import Matcher

_EPSILON = 1e-9
_SPOT = "spot"
# How many of the best-scoring types each round of packing fills again.
_WIDTH = 8


def topology_bound_groups(groups: Iterable[Group], matcher: Matcher) -> set[int]:
    """Groups whose place matters to topology: those with spreads or pod (anti-)affinity, and those any
    such constraint selects."""
    bound: set[int] = set()
    for group in groups:
        sample = group.sample
        if not sample.spread and not sample.affinity_terms:
            continue
        bound.add(group.id)
        for spread in sample.spread:
            bound |= matcher.match(spread.selector, frozenset([group.namespace]))
        for term in sample.affinity_terms:
            bound |= matcher.match_term(term, group.namespace)
    return bound


def repack(claims: list[ClaimBin], bound: set[int], group_of: Mapping[int, int],
           dims: Sequence[str]) -> list[ClaimBin]:
    """The claims, each eligible class packed again when that is cheaper."""
    classes: dict[tuple, list[ClaimBin]] = {}
    out: list[ClaimBin] = []
    for claim in claims:
        if _eligible(claim, bound):
            classes.setdefault((id(claim.fit), claim.zones, claim.capacity_types), []).append(claim)
        else:
            out.append(claim)
    for members in classes.values():
        packed = _repack_class(members, group_of, dims) if len(members) > 1 else None
        out.extend(members if packed is None else packed)
    return out


def _eligible(claim: ClaimBin, bound: set[int]) -> bool:
    fit = claim.fit
    return (
        claim.requirements is fit.requirements
        and claim.template.remaining is None
        and not fit.min_values
        and not any(g in bound for g in claim.counts)
    )


def _repack_class(members: list[ClaimBin], group_of: Mapping[int, int],
                  dims: Sequence[str]) -> list[ClaimBin] | None:
    first = members[0]
    zones, capacity_types = first.zones, first.capacity_types
    candidates = [t for t in first.fit.types if t.price(zones, capacity_types) is not None]
    candidates.sort(key=lambda t: (t.price(zones, capacity_types), t.name))
    least = 1
    if _SPOT in capacity_types:
        least = min(SPOT_FLEXIBILITY, min(len(c.options) for c in members))
    by_shape: dict[tuple[int, ...], list[Pod]] = {}
    for claim in members:
        for pod in claim.pods:
            requests = pod.requests
            by_shape.setdefault(tuple(requests.get(d, 0) for d in dims), []).append(pod)
    packer = _Packer(candidates, zones, capacity_types, list(by_shape), least)
    patterns = packer.pack([len(p) for p in by_shape.values()])
    if patterns is None:
        return None
    old = sum(c.price for c in members)
    new = sum(packer.price_of(options) * times for _, _, options, times in patterns)
    if new >= old - _EPSILON:
        return None
    pods = list(by_shape.values())
    return [
        _claim(first, options, used, [pods[s].pop() for s, n in enumerate(counts) for _ in range(n)], group_of)
        for counts, used, options, times in patterns
        for _ in range(times)
    ]


def _claim(like: ClaimBin, options: list[TypeOption], used: list[int], pods: list[Pod],
           group_of: Mapping[int, int]) -> ClaimBin:
    claim = ClaimBin(like.fit, like.zones, like.capacity_types, options, len(used))
    claim.used = list(used)
    claim.pods = pods
    for pod in pods:
        gid = group_of[id(pod)]
        claim.counts[gid] = claim.counts.get(gid, 0) + 1
    claim.next_price = options[1].price(like.zones, like.capacity_types) if len(options) > 1 else float("inf")
    claim.open = False
    return claim


class _Packer:
    """Node patterns for pod shapes over a class's candidate types."""

    def __init__(self, candidates: list[TypeOption], zones: frozenset[str], capacity_types: frozenset[str],
                 shapes: list[tuple[int, ...]], least: int) -> None:
        self.candidates = candidates
        self.zones = zones
        self.capacity_types = capacity_types
        self.shapes = shapes
        self.least = least
        self.types = _undominated(candidates, zones, capacity_types)
        weights = _resource_prices(self.types)
        self.values = [sum(w * v for w, v in zip(weights, shape, strict=False)) for shape in shapes]

    def price_of(self, options: list[TypeOption]) -> float:
        return options[0].price(self.zones, self.capacity_types) or 0.0

    def pack(self, counts: list[int]) -> list[tuple[list[int], list[int], list[TypeOption], int]] | None:
        """Patterns (pods per shape, used, options, times) covering every pod; None when one fits nowhere.

        Each round fills again, where its pods ran out, the patterns of the ``_WIDTH`` types that scored
        best when last filled, and repeats the best of them: a type filled long ago rises into that
        window as the patterns ahead of it worsen."""
        left = list(counts)
        entries: list[list] = []  # [score, type index, taken, used]
        for i, (option, price) in enumerate(self.types):
            hit = self._fill(option, price, left)
            if hit is not None:
                entries.append([hit[0], i, hit[1], hit[2]])
        out = []
        while any(left):
            entries.sort(key=lambda e: e[0])
            best = None
            for entry in entries[:_WIDTH]:
                if entry[2] and any(c > n for c, n in zip(entry[2], left, strict=True)):
                    option, price = self.types[entry[1]]
                    hit = self._fill(option, price, left)
                    entry[:] = [float("inf"), entry[1], [], []] if hit is None else [hit[0], entry[1], hit[1], hit[2]]
                if entry[2] and (best is None or entry[0] < best[0]):
                    best = entry
            if best is None:
                if not entries or entries[0][0] == float("inf"):
                    return None
                continue
            taken, used = best[2], best[3]
            times = min(n // c for c, n in zip(taken, left, strict=True) if c)
            left = [n - c * times for c, n in zip(taken, left, strict=True)]
            options = [t for t in self.candidates if holds(t.alloc, used)]
            out.append((taken, used, options, times))
        return out

    def _flexible(self, used: list[int]) -> bool:
        return _at_least(self.candidates, used, self.least)

    def _fill(self, option: TypeOption, price: float,
              left: list[int]) -> tuple[float, list[int], list[int]] | None:
        """The dot-product greedy fill of one node of ``option``: (price per value, counts, used)."""
        alloc = option.alloc
        scale_cpu, scale_mem = [1.0 / (a * a) if a else 0.0 for a in alloc[:2]]
        room = list(alloc)
        taken = [0] * len(left)
        shapes = self.shapes
        extended = len(alloc) > 3
        # Room only shrinks and counts only grow: a shape that is out once (no room, or all its pods
        # taken) stays out for this node. Entries carry a shape's cpu, memory and pods for the hot loop.
        active = [(s, shape[0], shape[1], shape[2]) for s, shape in enumerate(shapes) if left[s] > 0]
        demand = [sum(shapes[s][j] * left[s] for s, _, _, _ in active) for j in range(len(alloc))]
        while True:
            if (demand[0] <= room[0] and demand[1] <= room[1] and demand[2] <= room[2]
                    and (not extended or holds(room, demand))):
                # All the pods left fit: the greedy would take every one of them, in whatever order.
                room = [r - d for r, d in zip(room, demand, strict=True)]
                taken = list(left)
                break
            best = best_at = -1
            best_score = -1.0
            room_cpu, room_mem, room_pods = room[0], room[1], room[2]
            still = []
            for entry in active:
                s, cpu, memory, pods = entry
                if cpu > room_cpu or memory > room_mem or pods > room_pods or (extended and not holds(room, shapes[s])):
                    continue
                score = cpu * room_cpu * scale_cpu + memory * room_mem * scale_mem
                if score > best_score:
                    best, best_score, best_at = s, score, len(still)
                still.append(entry)
            if best < 0:
                break
            shape = shapes[best]
            add = max(1, min(left[best] - taken[best], fit_count(room, (0,) * len(room), shape) // 2))
            taken[best] += add
            if taken[best] >= left[best]:
                del still[best_at]
            active = still
            room = [r - v * add for r, v in zip(room, shape, strict=True)]
            demand = [d - v * add for d, v in zip(demand, shape, strict=True)]
        value = sum(v * n for v, n in zip(self.values, taken, strict=True))
        if value <= 0:
            return None
        used = [a - r for a, r in zip(alloc, room, strict=True)]
        if self.least > 1 and not self._flexible(used):
            return None
        return price / value, taken, used


def _at_least(candidates: list[TypeOption], used: list[int], least: int) -> bool:
    """Whether ``least`` of the candidates hold ``used`` (stops counting there)."""
    held = 0
    for t in candidates:
        if holds(t.alloc, used):
            held += 1
            if held >= least:
                return True
    return False


def _undominated(candidates: list[TypeOption], zones: frozenset[str],
                 capacity_types: frozenset[str]) -> list[tuple[TypeOption, float]]:
    """Candidates (cheapest first) no cheaper-or-equal type beats in every resource."""
    kept: list[tuple[TypeOption, float]] = []
    for option in candidates:
        price = option.price(zones, capacity_types) or 0.0
        alloc = option.alloc
        cpu, memory = alloc[0], alloc[1]
        # cpu and memory first, inline: this compares every pair of candidates.
        if not any(p <= price and (o := other.alloc)[0] >= cpu and o[1] >= memory and holds(o, alloc)
                   for other, p in kept):
            kept.append((option, price))
    return kept


def _resource_prices(types: list[tuple[TypeOption, float]]) -> list[float]:
    """A price per unit of cpu and of memory fitted (least squares, through the origin) to the types'
    prices; each at least a tenth of its share when the fit fails."""
    if not types:
        return [1.0, 0.0]
    rows = [(t.alloc[0], t.alloc[1], price) for t, price in types]
    sxx = sum(c * c for c, _, _ in rows)
    syy = sum(m * m for _, m, _ in rows)
    sxy = sum(c * m for c, m, _ in rows)
    sxp = sum(c * p for c, _, p in rows)
    syp = sum(m * p for _, m, p in rows)
    det = sxx * syy - sxy * sxy
    cpu = mem = 0.0
    if det > 0:
        cpu = (sxp * syy - syp * sxy) / det
        mem = (syp * sxx - sxp * sxy) / det
    total = sum(p for _, _, p in rows)
    floor_cpu = 0.1 * total / max(1, sum(c for c, _, _ in rows))
    floor_mem = 0.1 * total / max(1, sum(m for _, m, _ in rows))
    return [max(cpu, floor_cpu), max(mem, floor_mem)]
