"""A local-improvement pass after the greedy packing (#32): the new claims of one pool class (same fit and
capacity types) are packed again with the pods of different deployments mixed, cpu-heavy beside
memory-heavy, and each node's type chosen by how well the whole mix fills it.

Only free pods move: those of groups with no topology of their own that no spread or (anti-)affinity
selects. A claim that also holds topology-bound pods is a seed: it keeps them, its zones and capacity
types (so every spread, affinity and hostname count stays as the greedy pass left it), and either takes
free pods around them on the type that scores best, or shrinks to the cheapest type that holds them
alone; both ways are tried and the cheaper kept. Claims narrowed by anything else (other requirements,
pool limits, minValues, spot claims holding bound pods, zones narrowed without a bound pod) are left as
they are.

Free pods are packed by node patterns: for each candidate type, a greedy fill that takes at each step the
pod shape pointing most along the node's remaining room (the dot-product heuristic of vector bin
packing), scored by the type's price over the value of the pods it holds. Each resource is valued at the
dual price of the cheapest fractional cover of what is left to place (a two-resource linear program over
the types the best per dollar, solved exactly by trying every type and pair of types), so the types
that cover the remaining mix cheapest score best; the best pattern is repeated while its pods last. The
pass as it was before (one least-squares price per resource) is tried too, and the cheapest way kept.
The result replaces the class's claims only when it costs less, so the pass never makes a plan dearer;
the pods keep the requirements, zones and capacity types they had, on types the class could already
launch. A class with more than ``_MOST_SEEDS`` seeds, or no free pod, is left as the greedy pass made it.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from operator import itemgetter, mul, sub
from typing import NamedTuple

from ..model.pod import Pod
from .coverprices import efficient, fitted_prices, resource_prices, undominated
from .nodeclaim import ClaimBin
from .plan import MAX_INSTANCE_TYPES, SPOT_FLEXIBILITY
from .templates import TypeOption, fit_count, holds

_EPSILON = 1e-9
_EXACT = 2**53  # every int below it is exactly a float
_SCORE = itemgetter(0)  # of a pattern entry; sorting by it calls no Python function
_SPOT = "spot"
# The ways a class is packed, the cheapest kept: (pods valued at fitted prices, seeds filled first). The
# fitted way (one least-squares price per resource, the best of a window of patterns each round) is the
# pass as it was before the dual prices; neither beats the other on every mix.
_WAYS = ((False, True), (False, False), (True, False))
_WAYS_WITHOUT_SEEDS = ((False, False), (True, False))
# A class with more seeds than this is left as the greedy pass packed it: each seed tries several types
# in each way, and so many claims holding topology-bound pods leave few free pods to gain on.
_MOST_SEEDS = 500
# Spot seeds take part only while a class has at most this many of them (see _cheapest_repack).
_MOST_SPOT_SEEDS = 100
# Spot seeds take part only while the class's free pods come in few shapes, each of several pods: every
# fill weighs every shape, and pods whose requests all differ (Karpenter's benchmark mix) leave no pattern
# to repeat, so packing them again around each seed cost seconds for under 1% (#32).
_MOST_SPOT_SHAPES = 64
_REPLICAS_PER_SHAPE = 4
# How many of the best-scoring patterns the fitted way fills again each round.
_WIDTH = 8


def repack(claims: list[ClaimBin], bound: set[int], group_of: Mapping[int, int],
           dims: Sequence[str], zonal: Mapping[int, int] | None = None) -> list[ClaimBin]:
    """The claims, each eligible class packed again when that is cheaper.

    ``group_of`` maps each free pod (of a group not topology-bound) to its group; a pod it does not hold
    stays on its claim. A claim holding such pods is a seed: it keeps them, its zones and its options,
    and free pods fill its room again. ``zonal`` maps each pod of a :func:`boundgroups.zonal_groups` group to its
    group: first, the claims of each class pinned to one zone are packed again with those pods free
    among them (:func:`_zone_pass`)."""
    classes: dict[tuple, list[ClaimBin]] = {}
    out: list[ClaimBin] = []
    for claim in claims:
        if _eligible(claim, bound):
            classes.setdefault((id(claim.fit), claim.capacity_types), []).append(claim)
        else:
            out.append(claim)
    cache: dict = {}  # the seeds' types by fit and zones, for every class and zone
    for members in classes.values():
        # On-demand classes only: a spot claim stays spot-flexible in its one zone, and spot classes are
        # where the benchmarks' hostname spreads put hundreds of seeds (the pass would cost seconds).
        if zonal and _SPOT not in members[0].capacity_types:
            members = _zone_pass(members, group_of, zonal, dims, cache) or members
        out.extend(_cheapest_repack(members, bound, group_of, dims, cache))
    return out


def _zone_pass(members: list[ClaimBin], group_of: Mapping[int, int], zonal: Mapping[int, int],
               dims: Sequence[str], cache: dict) -> list[ClaimBin] | None:
    """The class with the claims of each single zone that hold zone-keyed pods packed again, those pods
    and the free ones moving among them (new claims stay in that zone). Before, a zonal spread's pods
    kept the claims the greedy pass opened for them, each zone's share on as few large nodes as it
    filled, whatever those cost (#32: up to 1.15 of the bound)."""
    by_zone: dict[str, list[ClaimBin]] = {}
    out: list[ClaimBin] = []
    for claim in members:
        if len(claim.zones) == 1 and any(id(p) in zonal for p in claim.pods):
            by_zone.setdefault(next(iter(claim.zones)), []).append(claim)
        else:
            out.append(claim)
    either = ChainMap(group_of, zonal)  # type: ignore[arg-type]
    changed = False
    for zone, claims in by_zone.items():
        packed = _repack_class(claims, either, dims, frozenset([zone]), cache) if len(claims) > 1 else None
        changed = changed or packed is not None
        out.extend(claims if packed is None else packed)
    return out if changed else None


def _cheapest_repack(members: list[ClaimBin], bound: set[int], group_of: Mapping[int, int],
                     dims: Sequence[str], cache: dict) -> list[ClaimBin]:
    """One class packed again, the cheaper of two ways when it has spot seeds: with them (their free pods
    move, they stay spot-flexible) and as they are, the rest packed around them. Neither always wins: a
    seed re-typed for its bound pods may leave the class's free pods fewer good patterns. A class with
    more than ``_MOST_SPOT_SEEDS`` spot seeds keeps them as they are: each tries its types' flexibility
    once per fill, and so many (a spread over hostnames on every node, say) leave few free pods to gain on."""
    spot = [c for c in members if c.floor > 1 and any(g in bound for g in c.counts)]
    if spot:
        kept = set(map(id, spot))
        rest = [c for c in members if id(c) not in kept]
        packed = _repack_class(rest, group_of, dims, cache=cache) if len(rest) > 1 else None
        without = spot + (rest if packed is None else packed)
        if len(spot) > _MOST_SPOT_SEEDS or not _repeating(members, group_of):
            return without
    packed = _repack_class(members, group_of, dims, cache=cache) if len(members) > 1 else None
    if packed is None:
        return without if spot else members
    if spot and _price(without) <= _price(packed):
        return without
    return packed


def _repeating(members: list[ClaimBin], group_of: Mapping[int, int]) -> bool:
    """Whether the class's free pods come in at most ``_MOST_SPOT_SHAPES`` shapes (distinct requests), with
    at least ``_REPLICAS_PER_SHAPE`` pods per shape on average."""
    shapes: set[tuple] = set()
    seen: set[int] = set()  # replicas of one template share their requests: each is read once
    free = 0
    for claim in members:
        for pod in claim.pods:
            if id(pod) in group_of:
                free += 1
                requests = pod.requests
                if id(requests) not in seen:
                    seen.add(id(requests))
                    shapes.add(tuple(sorted(requests.items())))
                    if len(shapes) > _MOST_SPOT_SHAPES:
                        return False
    return free >= _REPLICAS_PER_SHAPE * len(shapes)


def _price(claims: list[ClaimBin]) -> float:
    return sum(c.price for c in claims)


def _eligible(claim: ClaimBin, bound: set[int]) -> bool:
    fit = claim.fit
    if claim.requirements is not fit.requirements or claim.template.remaining is not None or fit.min_values:
        return False
    if any(g in bound for g in claim.counts):
        return True  # a seed (a spot one stays spot-flexible: see _reseed)
    # Zones narrowed with no topology-bound pod on it: kept as it is, as the pass cannot say why.
    return claim.zones == fit.zones


def _repack_class(members: list[ClaimBin], group_of: Mapping[int, int], dims: Sequence[str],
                  zones: frozenset[str] | None = None, cache: dict | None = None) -> list[ClaimBin] | None:
    """The class packed again, or None when that is no cheaper. Two ways are tried: free pods filled
    around each seed's pods first, the rest in patterns; and each seed on the cheapest type holding its
    own pods, every free pod in patterns. The cheaper wins."""
    free = group_of.__contains__
    seeds = [c for c in members if not all(map(free, map(id, c.pods)))]
    if len(members) - len(seeds) < 1 and len(seeds) < 2 or len(seeds) > _MOST_SEEDS:
        return None
    fit, capacity_types = members[0].fit, members[0].capacity_types
    zones = fit.zones if zones is None else zones  # where new claims go
    candidates = [t for t in fit.types if t.price(zones, capacity_types) is not None]
    candidates.sort(key=lambda t: (t.price(zones, capacity_types), t.name))
    least = 1
    if _SPOT in capacity_types:
        least = min(SPOT_FLEXIBILITY, min(len(c.options) for c in members))
    by_shape: dict[tuple[int, ...], list[Pod]] = {}
    # Replicas of one template share their requests object: its shape is worked out once.
    shape_of: dict[int, tuple[int, ...]] = {}
    for claim in members:
        for pod in claim.pods:
            if id(pod) in group_of:
                requests = pod.requests
                shape = shape_of.get(id(requests))
                if shape is None:
                    shape = shape_of[id(requests)] = tuple(requests.get(d, 0) for d in dims)
                by_shape.setdefault(shape, []).append(pod)
    if not by_shape:
        return None
    best: _Attempt | None = None
    cache = {} if cache is None else cache  # the seeds' types by fit and zones, shared by every way
    shared = _Shared(candidates, zones, capacity_types)
    for fitted, fill in _WAYS if seeds else _WAYS_WITHOUT_SEEDS:
        packer = _Packer(candidates, zones, capacity_types, list(by_shape), least, fitted, shared)
        attempt = _attempt(seeds, packer, [list(p) for p in by_shape.values()], group_of, dims, fill, cache)
        if attempt is not None and (best is None or attempt.price < best.price):
            best = attempt
    if best is None or best.price >= sum(c.price for c in members) - _EPSILON:
        return None
    pods = best.pods
    out = best.seeds
    for counts, used, options, times in best.patterns:
        shares = [(s, n) for s, n in enumerate(counts) if n]
        out.extend(_claim(members[0], zones, options, used, _take(pods, shares), group_of) for _ in range(times))
    return out


def _take(pods: list[list[Pod]], shares: list[tuple[int, int]]) -> list[Pod]:
    """``n`` pods off the end of each shape's list, last first, shape by shape."""
    out: list[Pod] = []
    for s, n in shares:
        of_shape = pods[s]
        chunk = of_shape[-n:]
        chunk.reverse()
        out += chunk
        del of_shape[-n:]
    return out


class _Attempt(NamedTuple):
    price: float
    seeds: list[ClaimBin]
    patterns: list[tuple[list[int], list[int], list[TypeOption], int]]
    pods: list[list[Pod]]  # the free pods the patterns take, per shape


def _attempt(seeds: list[ClaimBin], packer: _Packer, pods: list[list[Pod]], group_of: Mapping[int, int],
             dims: Sequence[str], fill: bool, cache: dict) -> _Attempt | None:
    """One way of packing the class (see :func:`_repack_class`)."""
    left = [len(p) for p in pods]
    packer.revalue(left)
    reseeded = []
    for seed in seeds:
        reseeded.append(_reseed(seed, packer, left if fill else [0] * len(left), pods, group_of, dims, cache))
        if fill:
            packer.revalue(left)  # the pods a seed took no longer count in what is left to cover
    patterns = packer.pack(left)
    if patterns is None:
        return None
    price = sum(c.price for c in reseeded) + sum(packer.price_of(options) * times for _, _, options, times in patterns)
    return _Attempt(price, reseeded, patterns, pods)


def _reseed(seed: ClaimBin, packer: _Packer, left: list[int], pods: list[list[Pod]],
            group_of: Mapping[int, int], dims: Sequence[str], cache: dict) -> ClaimBin:
    """A new claim like ``seed`` with only its topology-bound pods, then free pods filled into the room its
    cheapest option leaves (taken out of ``left`` and ``pods``)."""
    kept = [p for p in seed.pods if id(p) not in group_of]
    fixed = [sum(p.requests.get(d, 0) for p in kept) for d in dims]
    zones, capacity_types = seed.zones, seed.capacity_types
    weights = packer.weights
    fixed_value = weights[0] * fixed[0] + weights[1] * fixed[1]
    best: tuple[float, list[int], list[int]] | None = None
    priced, unbeaten = _priced(seed, cache)
    least = packer.least
    # No node holds more value than its allocatable is worth: try types by that floor on their score, and
    # stop once the floor passes the best score found.
    ranked = sorted(
        ((price / worth, option, price) for option, price in unbeaten
         if holds(option.alloc, fixed) and (worth := weights[0] * option.alloc[0] + weights[1] * option.alloc[1]) > 0),
        key=lambda entry: entry[0],
    )
    for floor, option, price in ranked:
        if best is not None and floor >= best[0]:
            break
        taken, used = packer.fill_from(option.alloc, fixed, left)
        if least > 1 and not _at_least(priced, used, least):
            # A spot seed stays flexible: enough of its types hold what it holds, or it takes no free pod.
            taken, used = [0] * len(left), list(fixed)
            if not _at_least(priced, used, least):
                continue
        value = fixed_value + sum(v * n for v, n in zip(packer.values, taken, strict=True))
        if value > 0 and (best is None or price / value < best[0]):
            best = (price / value, taken, used)
    if best is None:
        taken, used = [0] * len(left), fixed
    else:
        _, taken, used = best
    options = _holding(priced, used)
    claim = ClaimBin(seed.fit, zones, capacity_types, options, len(used))
    claim.requirements = seed.requirements
    claim.options = options
    claim.price = options[0].price(zones, capacity_types)
    claim.next_price = options[1].price(zones, capacity_types) if len(options) > 1 else float("inf")
    claim.used = used
    claim.pods = kept
    claim.counts = dict(seed.counts)
    for pod in seed.pods:
        gid = group_of.get(id(pod))
        if gid is not None:
            claim.counts[gid] -= 1
    for s, n in enumerate(taken):
        for _ in range(n):
            pod = pods[s].pop()
            kept.append(pod)
            gid = group_of[id(pod)]
            claim.counts[gid] = claim.counts.get(gid, 0) + 1
        left[s] -= n
    claim.counts = {g: n for g, n in claim.counts.items() if n}
    claim.open = False
    return claim


def _priced(seed: ClaimBin, cache: dict) -> tuple[list[TypeOption], list[tuple[TypeOption, float]]]:
    """The seed's fit's types offered in its zones and capacity types, cheapest there first, and those of
    them no cheaper type beats in every resource (a type that beats one holding the seed's pods holds
    them too, so filtering after is the same as before)."""
    key = (id(seed.fit), seed.zones, seed.capacity_types)
    hit = cache.get(key)
    if hit is None:
        _, zones, capacity_types = key
        entries = [(p, t.name, t) for t in seed.fit.types if (p := t.price(zones, capacity_types)) is not None]
        entries.sort(key=lambda entry: (entry[0], entry[1]))
        types = [t for _, _, t in entries]
        hit = cache[key] = (types, undominated(types, zones, capacity_types))
    return hit


def _claim(like: ClaimBin, zones: frozenset[str], options: list[TypeOption], used: list[int], pods: list[Pod],
           group_of: Mapping[int, int]) -> ClaimBin:
    claim = ClaimBin(like.fit, zones, like.capacity_types, options, len(used))
    claim.used = list(used)
    claim.pods = pods
    for pod in pods:
        gid = group_of[id(pod)]
        claim.counts[gid] = claim.counts.get(gid, 0) + 1
    claim.next_price = options[1].price(zones, like.capacity_types) if len(options) > 1 else float("inf")
    claim.open = False
    return claim


class _Shared:
    """What every way of packing one class works out alike: its undominated types, the most efficient
    of them, and each empty node's fill by type and pods left (the fill does not depend on how a way
    values pods, only its score does; the ways start from the same pods, so most fills repeat)."""

    __slots__ = ("types", "efficient", "fills")

    def __init__(self, candidates: list[TypeOption], zones: frozenset[str], capacity_types: frozenset[str]) -> None:
        self.types = undominated(candidates, zones, capacity_types)
        self.efficient = efficient(self.types)
        # (id of the type, pods left) -> (pods taken per shape, use, whether enough types hold it or None)
        self.fills: dict[tuple, list] = {}


class _Packer:
    """Node patterns for pod shapes over a class's candidate types."""

    def __init__(self, candidates: list[TypeOption], zones: frozenset[str], capacity_types: frozenset[str],
                 shapes: list[tuple[int, ...]], least: int, fitted: bool = False,
                 shared: _Shared | None = None) -> None:
        self.candidates = candidates
        self.zones = zones
        self.capacity_types = capacity_types
        self.shapes = shapes
        self.least = least
        self.shared = shared = shared or _Shared(candidates, zones, capacity_types)
        self.types = shared.types
        self.efficient = shared.efficient
        self.fitted = fitted_prices(self.types) if fitted else None
        self.weights = [1.0, 0.0]
        # Consistent with the weights until revalue() prices the resources: each shape valued at its cpu.
        self.values: list[float] = [float(shape[0]) for shape in shapes]
        # What an empty node's fill starts from for the last pods left asked about (see _start).
        self._started: tuple[list[int], list[tuple[int, int, int, int, float, float]], list[int]] | None = None

    def price_of(self, options: list[TypeOption]) -> float:
        return options[0].price(self.zones, self.capacity_types) or 0.0

    def pack(self, counts: list[int]) -> list[tuple[list[int], list[int], list[TypeOption], int]] | None:
        """Patterns (pods per shape, used, options, times) covering every pod; None when one fits nowhere.

        Each round values the pods at the resource prices of the cheapest fractional cover of what is
        left (:func:`coverprices.resource_prices`), scores each type's pattern by its price over the value it
        holds, and repeats the best pattern while its pods last (:meth:`_freshest`)."""
        left = list(counts)
        entries: list[list] = []  # [score, type index, taken, used]
        self.revalue(left)
        for i, (option, price) in enumerate(self.types):
            hit = self._fill(option, price, left)
            if hit is not None:
                entries.append([hit[0], i, hit[1], hit[2]])
        out = []
        while any(left):
            if self.revalue(left):
                for entry in entries:
                    if entry[2]:
                        entry[0] = self._score(self.types[entry[1]][1], entry[2])
            best = self._freshest(entries, left)
            if best is None:
                return None
            taken, used = best[2], best[3]
            times = min(n // c for c, n in zip(taken, left, strict=True) if c)
            left = [n - c * times for c, n in zip(taken, left, strict=True)]
            out.append((taken, used, _holding(self.candidates, used), times))
        return out

    def _freshest(self, entries: list[list], left: list[int]) -> list | None:
        """The best-scoring entry whose pods are all still left: an entry ahead of it that took pods now
        gone is filled again (a fill from fewer pods scores no better, so its old score is a fair guide
        of whether it needs filling again)."""
        if self.fitted is not None:
            return self._best_in_window(entries, left)
        while True:
            entries.sort(key=_SCORE)
            best = next((e for e in entries if e[2] and e[0] < float("inf")), None)
            if best is None or all(c <= n for c, n in zip(best[2], left, strict=True)):
                return best
            option, price = self.types[best[1]]
            hit = self._fill(option, price, left)
            best[:] = [float("inf"), best[1], [], []] if hit is None else [hit[0], best[1], hit[1], hit[2]]

    def _best_in_window(self, entries: list[list], left: list[int]) -> list | None:
        """The fitted way: the best of the ``_WIDTH`` best-scoring entries, those that took pods now gone
        filled again first."""
        entries.sort(key=_SCORE)
        best = None
        for entry in entries[:_WIDTH]:
            if entry[2] and any(c > n for c, n in zip(entry[2], left, strict=True)):
                option, price = self.types[entry[1]]
                hit = self._fill(option, price, left)
                entry[:] = [float("inf"), entry[1], [], []] if hit is None else [hit[0], entry[1], hit[1], hit[2]]
            if entry[2] and entry[0] < float("inf") and (best is None or entry[0] < best[0]):
                best = entry
        if best is None:
            return self._best_in_window(entries, left) if any(e[2] for e in entries) else None
        return best

    def revalue(self, left: list[int]) -> bool:
        """Value the shapes at the resource prices of covering ``left``; True when those prices changed."""
        if self.fitted is not None:
            weights = self.fitted
        else:
            demand = [sum(shape[d] * n for shape, n in zip(self.shapes, left, strict=True)) for d in (0, 1)]
            weights = resource_prices(self.efficient, demand)
        if weights == self.weights:
            return False
        self.weights = weights
        self.values = [weights[0] * shape[0] + weights[1] * shape[1] for shape in self.shapes]
        return True

    def _score(self, price: float, taken: list[int]) -> float:
        value = sum(map(mul, self.values, taken))  # as a generator would, without one (equal lengths)
        return price / value if value > 0 else float("inf")

    def _flexible(self, used: list[int]) -> bool:
        return _at_least(self.candidates, used, self.least)

    def fill_from(self, alloc: Sequence[int], used: Sequence[int], left: list[int]) -> tuple[list[int], list[int]]:
        """Pods per shape the dot-product fill puts beside ``used`` in ``alloc``, and the use after it."""
        room = self._greedy(alloc, [a - u for a, u in zip(alloc, used, strict=True)], taken := [0] * len(left), left)
        return taken, [a - r for a, r in zip(alloc, room, strict=True)]

    def _greedy(self, alloc: Sequence[int], room: list[int], taken: list[int], left: list[int]) -> list[int]:
        """Add to ``taken`` (in place) the pods the dot-product heuristic of vector bin packing puts in
        ``room``: at each step the shape pointing most along the room left; returns the room after."""
        scale_cpu, scale_mem = [1.0 / (a * a) if a else 0.0 for a in alloc[:2]]
        shapes = self.shapes
        extended = len(alloc) > 3
        active, demand = self._start(left, taken, len(alloc))
        # Scores multiply floats when all factors are below 2**53 (scored shapes fit the room, so never
        # exceed alloc): two exact floats' product is rounded once, as the int product's conversion is,
        # so scores are the same without big ints (memory in bytes squared; #32 throughput).
        exact = alloc[0] < _EXACT and alloc[1] < _EXACT
        if not exact:
            active = [(s, cpu, memory, pods, cpu, memory) for s, cpu, memory, pods, _, _ in active]
        while True:
            if (demand[0] <= room[0] and demand[1] <= room[1] and demand[2] <= room[2]
                    and (not extended or holds(room, demand))):
                # All the pods left fit: the greedy would take every one of them, in whatever order.
                taken[:] = left
                return [r - d for r, d in zip(room, demand, strict=True)]
            best = -1
            best_score = -1.0
            chosen = None
            room_cpu, room_mem, room_pods = room[0], room[1], room[2]
            by_cpu, by_mem = (float(room_cpu), float(room_mem)) if exact else (room_cpu, room_mem)
            out = False  # a shape no longer fits: only then is the list filtered again
            for entry in active:
                s, cpu, memory, pods, as_cpu, as_mem = entry
                if cpu > room_cpu or memory > room_mem or pods > room_pods or (extended and not holds(room, shapes[s])):
                    out = True
                    continue
                score = as_cpu * by_cpu * scale_cpu + as_mem * by_mem * scale_mem
                if score > best_score:
                    best, best_score, chosen = s, score, entry
            if best < 0:
                return room
            shape = shapes[best]
            rest = left[best] - taken[best]  # at least one, or the shape would be out
            add = 1 if rest == 1 else max(1, min(rest, fit_count(room, (0,) * len(room), shape) // 2))
            taken[best] += add
            done = taken[best] >= left[best]
            # A new list, never the old one changed: the start of a fill is shared (see _start).
            if out:
                active = [entry for entry in active if (entry is not chosen or not done)
                          and not (entry[1] > room_cpu or entry[2] > room_mem or entry[3] > room_pods
                                   or (extended and not holds(room, shapes[entry[0]])))]
            elif done:
                at = active.index(chosen)
                active = active[:at] + active[at + 1:]
            if add == 1:  # most steps: the same differences, without a comprehension's call
                room = list(map(sub, room, shape))
                demand = list(map(sub, demand, shape))
            else:
                room = [r - v * add for r, v in zip(room, shape, strict=True)]
                demand = [d - v * add for d, v in zip(demand, shape, strict=True)]

    def _start(self, left: list[int], taken: list[int],
               dims: int) -> tuple[list[tuple[int, int, int, int, float, float]], list[int]]:
        """The shapes with pods still to take, and what those pods request in all, before a fill.

        Room only shrinks and counts only grow: a shape that is out once (no room, or all its pods
        taken) stays out for this node. Entries carry a shape's cpu, memory and pods for the hot loop, then
        its cpu and memory as floats (see _greedy).
        Every type's fill in a round starts from the same pods left with none taken: that start is
        worked out once per round, not once per type (#32 throughput). The fill never changes the lists
        in place (it rebinds them), so they are shared as they are."""
        shapes = self.shapes
        fresh = not any(taken)
        started = self._started
        if fresh and started is not None and started[0] == left:
            return started[1], started[2]
        active = [(s, shape[0], shape[1], shape[2], float(shape[0]), float(shape[1]))
                  for s, shape in enumerate(shapes) if left[s] > taken[s]]
        demand = [sum(shapes[s][j] * (left[s] - taken[s]) for s, *_ in active) for j in range(dims)]
        if fresh:
            self._started = (list(left), active, demand)
        return active, demand

    def _fill(self, option: TypeOption, price: float,
              left: list[int]) -> tuple[float, list[int], list[int]] | None:
        """The dot-product greedy fill of one node of ``option``: (price per value, counts, used)."""
        key = (id(option), tuple(left))
        hit = self.shared.fills.get(key)
        if hit is None:
            alloc = option.alloc
            taken = [0] * len(left)
            room = self._greedy(alloc, list(alloc), taken, left)
            hit = self.shared.fills[key] = [taken, [a - r for a, r in zip(alloc, room, strict=True)], None]
        taken, used = hit[0], hit[1]
        score = self._score(price, taken)
        if score == float("inf"):
            return None
        if self.least > 1:
            if hit[2] is None:
                hit[2] = self._flexible(used)
            if not hit[2]:
                return None
        return score, list(taken), list(used)


def _holding(types: list[TypeOption], used: Sequence[int]) -> list[TypeOption]:
    """The first ``MAX_INSTANCE_TYPES`` of ``types`` that hold ``used`` (all a claim launches with)."""
    out = []
    cpu, memory, pods = used[0], used[1], used[2]
    for t in types:
        alloc = t.alloc
        # cpu, memory and pods inline first, as in _at_least: most of the cheap types fail there.
        if alloc[0] >= cpu and alloc[1] >= memory and alloc[2] >= pods and holds(alloc, used):
            out.append(t)
            if len(out) == MAX_INSTANCE_TYPES:
                break
    return out


def _at_least(candidates: list[TypeOption], used: list[int], least: int) -> bool:
    """Whether ``least`` of the candidates hold ``used`` (stops counting there)."""
    held = 0
    cpu, memory, pods = used[0], used[1], used[2]
    for t in candidates:
        alloc = t.alloc
        # cpu, memory and pods inline: most candidates (the small ones) fail there, before holds().
        if alloc[0] >= cpu and alloc[1] >= memory and alloc[2] >= pods and holds(alloc, used):
            held += 1
            if held >= least:
                return True
    return False
