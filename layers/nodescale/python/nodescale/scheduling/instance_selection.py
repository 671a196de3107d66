"""Choosing a new claim's nodepool and instance types: the pool (highest weight first) and type with the
lowest price per packed pod, then every type that holds as many pods, cheapest first, within the pool's
limits and minValues; a claim that may launch spot holds fewer pods when that keeps 15 types or more.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from ..model import labels as wk
from ..model import resources as res
from .plan import MAX_INSTANCE_TYPES, SPOT_FLEXIBILITY
from .reasons import Clause, Kind, Refusal, incompatibility, over_limits, topology_refusal
from .templates import Fit, PoolTemplate, TypeOption, fit_count, holds, min_values_met, truncate
from .topology import HostRules

_EPSILON = 1e-9


class Candidates(NamedTuple):
    """A fit's types offered in some zones and capacity types, cheapest there first."""

    types: list[TypeOption]
    zones: frozenset[str]
    capacity_types: frozenset[str]
    prices: list[float]  # each type's there, worked out once: every run of pods reads them (#32 throughput)


class NewClaimChoice:
    """What a new claim for a run of pods is: its fit, how many pods it takes, its options and domains.

    Most choices only price a pod (is growing an open claim dearer than new capacity?), which needs the
    cheapest option alone: the full list of options may be left to build when a claim is opened.
    """

    __slots__ = ("fit", "pods_per_node", "zones", "capacity_types", "first", "_options", "_pending")

    def __init__(self, fit: Fit, pods_per_node: int, options: list[TypeOption], zones: frozenset[str],
                 capacity_types: frozenset[str], pending: tuple | None = None) -> None:
        self.fit = fit
        self.pods_per_node = pods_per_node
        self.zones = zones
        self.capacity_types = capacity_types
        self.first = options[0] if options else None  # the cheapest option (there always is one)
        self._options = None if pending is not None else options
        self._pending = pending  # fitting's arguments for the full list, when ``options`` is only its head

    @property
    def options(self) -> list[TypeOption]:
        if self._options is None:
            self._options = fitting(*self._pending)
        return self._options


class _TypePick(NamedTuple):
    score: float  # price per pod of covering the whole run with this type
    pods_per_node: int
    instance_type: TypeOption


class _Memo(NamedTuple):
    key: tuple
    choice: NewClaimChoice | Refusal
    fits: list[Fit | str]  # held so its id, part of the key, stays unique


class InstanceSelector:
    """Answers "which new claim for these pods?" for one solve, caching what runs of pods share."""

    __slots__ = ("dims", "templates", "_candidates", "_memo", "_distinct_rows")

    def __init__(self, dims: tuple[str, ...], templates: Sequence[PoolTemplate]) -> None:
        self.dims = dims
        self.templates = templates
        self._candidates: dict[tuple, Candidates] = {}
        self._memo: _Memo | None = None
        self._distinct_rows: dict[tuple, list[tuple[TypeOption, float, int]]] = {}

    def forget(self) -> None:
        """A pool's remaining limits changed: the last answer may no longer hold."""
        self._memo = None

    def best_new(self, fits: list[Fit | str], req: tuple[int, ...], count: int, zones: frozenset[str] | None,
                 capacity_types: frozenset[str] | None, host: HostRules) -> NewClaimChoice | Refusal:
        """The new claim for ``count`` pods requesting ``req``, or why there is none."""
        # A run asks twice with the same question (to price upgrades, then to launch): answer once.
        key = (id(fits), req, count, zones, capacity_types, host.new_node_cap())
        memo = self._memo
        if memo is not None and memo.key == key:
            return memo.choice
        choice = self._choose(fits, req, count, zones, capacity_types, host)
        self._memo = _Memo(key, choice, fits)
        return choice

    def price_per_pod(self, fits: list[Fit | str], req: tuple[int, ...], count: int,
                      zones: frozenset[str] | None, capacity_types: frozenset[str] | None,
                      host: HostRules) -> float:
        """What a pod costs on the best new claim; infinite when there is none."""
        choice = self.best_new(fits, req, count, zones, capacity_types, host)
        if isinstance(choice, Refusal):
            return float("inf")
        return choice.first.price(choice.zones, choice.capacity_types) / choice.pods_per_node

    def candidates(self, fit: Fit, zones: frozenset[str] | None,
                   capacity_types: frozenset[str] | None) -> Candidates | None:
        """The fit's types offered in those domains; None when none is."""
        new_zones = fit.zones if zones is None else fit.zones & zones
        new_types = fit.capacity_types if capacity_types is None else fit.capacity_types & capacity_types
        if not new_zones or not new_types:
            return None
        key = (id(fit), new_zones, new_types)
        hit = self._candidates.get(key)
        if hit is None:
            if new_zones == fit.zones and new_types == fit.capacity_types:
                types = fit.types
            else:
                priced = [(p, t.name, t) for t in fit.types if (p := t.price(new_zones, new_types)) is not None]
                priced.sort(key=lambda entry: (entry[0], entry[1]))
                types = [t for _, _, t in priced]
            prices = [t.price(new_zones, new_types) for t in types]
            hit = self._candidates[key] = Candidates(types, new_zones, new_types, prices)
        return hit

    def _choose(self, fits: list[Fit | str], req: tuple[int, ...], count: int, zones: frozenset[str] | None,
                capacity_types: frozenset[str] | None, host: HostRules) -> NewClaimChoice | Refusal:
        cap = host.new_node_cap()
        if not cap:
            if host.affinity:
                return topology_refusal("pod affinity on kubernetes.io/hostname: no node has a matching pod")
            return topology_refusal("topology constraints on kubernetes.io/hostname cannot be met")
        want = min(count, cap)
        clauses: list[Clause] = []
        best: NewClaimChoice | None = None
        best_score = best_weight = 0.0
        for fit in fits:
            if isinstance(fit, str):
                continue
            template = fit.template
            if best is not None and template.weight < best_weight:
                break
            candidates = self.candidates(fit, zones, capacity_types)
            if candidates is None:
                clauses.append(Clause(template.name, Kind.NO_OFFERING,
                                      "no offering in the zones and capacity types the pods need"))
                continue
            pick = self._pick_type(fit, candidates, req, want, bool(host.affinity))
            if isinstance(pick, Clause):
                clauses.append(pick)
                continue
            if best is not None and not pick.score < best_score:
                continue
            choice = _options(fit, candidates, req, pick)
            if isinstance(choice, Clause):
                clauses.append(choice)
                continue
            best = choice
            best_score = pick.score * pick.pods_per_node / choice.pods_per_node
            best_weight = template.weight
        if best is None:
            return incompatibility(self.templates, fits, clauses)
        return best

    def _pick_type(self, fit: Fit, candidates: Candidates, req: tuple[int, ...], want: int,
                   must_share: bool) -> _TypePick | Clause:
        """The type with the lowest price per pod for ``want`` pods, or why the pool has none."""
        types, _, _, prices = candidates
        remaining = fit.template.remaining
        no_pods = (0,) * len(req)
        rest_cost: _RestCost | None = None
        limited: list[TypeOption] = []
        # No type holds more pods than the largest of each resource would: a bound for stopping early.
        most = min(want, fit_count(fit.max_alloc, no_pods, req)) or 1
        best: TypeOption | None = None
        best_score = 0.0
        best_per_node = 0
        if remaining is None and want > 1:
            rows: Iterable[tuple[TypeOption, float, int]] = self._distinct(candidates, req)
        else:
            rows = _holding_rows(types, prices, req, remaining, limited)
        for option, price, per_node in rows:
            if best is not None and price > best_score * most + _EPSILON:
                break  # types come cheapest first: none further on can beat (or tie) the best per pod
            per_node = min(per_node, want)
            # What covering the whole group costs, per pod: full nodes of this type, and the rest on the
            # cheapest type that holds the rest. A type that would leave most of a last node empty pays
            # for that here, so 5 pods take one node that holds 5 rather than 3 + 2 for the same money,
            # while 6 still take a node of 5 plus a small one when that is cheaper.
            rest = want % per_node
            score = (want // per_node) * price
            if rest:
                if rest_cost is None:
                    rest_cost = _RestCost(candidates, remaining, req)
                score += rest_cost(rest)
            score /= want
            if must_share and per_node < want:
                score *= want  # the group must share one node: a type that holds it all comes first
            # On a tie the type holding more pods wins: fewer nodes for the same price.
            if best is None or score < best_score - 1e-12 or (
                score <= best_score + 1e-12 and per_node > best_per_node
            ):
                best, best_score, best_per_node = option, score, per_node
        if best is not None:
            return _TypePick(best_score, best_per_node, best)
        if limited:
            return over_limits(fit.template.name)
        return Clause(fit.template.name, Kind.TOO_LARGE, f"no instance type has room for {self._describe(req)}")

    def _distinct(self, candidates: Candidates, req: tuple[int, ...]) -> list[tuple[TypeOption, float, int]]:
        """Of the candidates (no pool limits), the cheapest type for each number of pods one node holds.

        A dearer type holding as many pods as a cheaper one never scores better in ``_pick_type`` (its
        full nodes cost more, its rest costs the same), so only these need scoring; a run of many pods
        asks about the same candidates and request several times (#32 throughput: the 50,000-pod
        benchmark scored each of ~890 types for each of 276 runs)."""
        key = (id(candidates), req)  # candidates are held in self._candidates: their ids stay unique
        hit = self._distinct_rows.get(key)
        if hit is None:
            held: set[int] = set()
            hit = self._distinct_rows[key] = [
                row for row in _holding_rows(candidates.types, candidates.prices, req, None, [])
                if row[2] not in held and not held.add(row[2])
            ]
        return hit
    def _describe(self, req: tuple[int, ...]) -> str:
        shown = {d: v for d, v in zip(self.dims, req, strict=True) if v and d != res.PODS}
        return ", ".join(f"{name}={value}" for name, value in res.format_resources(shown).items()) or "one more pod"


class _RestCost:
    """The price of the cheapest candidate that holds some number of pods within the pool's limits."""

    __slots__ = ("candidates", "remaining", "req", "_memo")

    def __init__(self, candidates: Candidates, remaining: list[int] | None, req: tuple[int, ...]) -> None:
        self.candidates = candidates
        self.remaining = remaining
        self.req = req
        self._memo: dict[int, float] = {}

    def __call__(self, pods: int) -> float:
        hit = self._memo.get(pods)
        if hit is None:
            types, zones, capacity_types, _ = self.candidates
            holding = fitting(types, self.req, pods, self.remaining, 1)
            hit = self._memo[pods] = holding[0].price(zones, capacity_types) if holding else float("inf")
        return hit


def _options(fit: Fit, candidates: Candidates, req: tuple[int, ...], pick: _TypePick) -> NewClaimChoice | Clause:
    """Every candidate holding as many pods as the picked type, cheapest first; minValues may lower that
    number until enough distinct values remain."""
    types = candidates.types
    per_node = pick.pods_per_node
    mins = fit.min_values
    remaining = fit.template.remaining
    if not mins and remaining is None:
        # The first SPOT_FLEXIBILITY options decide everything below; the rest wait until a claim opens.
        head = fitting(types, req, per_node, None, SPOT_FLEXIBILITY)
        if len(head) == SPOT_FLEXIBILITY:
            pending = (types, req, per_node, None, MAX_INSTANCE_TYPES)
            return NewClaimChoice(fit, per_node, head, candidates.zones, candidates.capacity_types, pending)
    options = fitting(types, req, per_node, remaining, None if mins else MAX_INSTANCE_TYPES)
    while mins and per_node > 1 and not min_values_met(options, mins):
        per_node -= 1
        options = fitting(types, req, per_node, remaining, None)
    if wk.CAPACITY_SPOT in candidates.capacity_types and len(options) < SPOT_FLEXIBILITY:
        # Spot flexibility: fewer pods per node rather than a claim only a few (large) types can take. The
        # most pods 15 types hold is the 15th largest of what each type holds.
        no_pods = (0,) * len(req)
        held = sorted((fit_count(t.alloc, no_pods, req) for t in types
                       if remaining is None or all(v <= r for v, r in zip(t.limit_vec, remaining, strict=True))),
                      reverse=True)
        if len(held) >= SPOT_FLEXIBILITY and held[SPOT_FLEXIBILITY - 1] > 0:
            per_node = min(per_node, held[SPOT_FLEXIBILITY - 1])
            options = fitting(types, req, per_node, remaining, None if mins else MAX_INSTANCE_TYPES)
    if mins and not min_values_met(options, mins):
        wanted = ", ".join(f"{key} {n}" for key, n in mins)
        return Clause(fit.template.name, Kind.MIN_VALUES,
                      f"too few instance types fit to meet minValues ({wanted})")
    if remaining is not None:
        # Limits count a claim's largest option: keep none larger than the chosen type, so the claim
        # reserves no more than it needs.
        chosen = pick.instance_type.limit_vec
        options = [t for t in options if all(a <= b for a, b in zip(t.limit_vec, chosen, strict=True))]
    options = truncate(options, mins, MAX_INSTANCE_TYPES)
    return NewClaimChoice(fit, per_node, options, candidates.zones, candidates.capacity_types)


def _holding_rows(types: list[TypeOption], prices: list[float], req: tuple[int, ...], remaining: list[int] | None,
                  limited: list[TypeOption]) -> Iterator[tuple[TypeOption, float, int]]:
    """(type, price, pods of ``req`` one node holds) for each type cheapest first that holds one within
    the pool's remaining limits; a type over them goes to ``limited``."""
    no_pods = (0,) * len(req)
    # cpu, memory and pods all requested and nothing else (the usual pod): how many fit is inline.
    cpu, memory, slots = req[0], req[1], req[2]
    plain = len(req) == 3 and cpu > 0 and memory > 0 and slots > 0
    for option, price in zip(types, prices, strict=True):
        if remaining is not None and any(v > r for v, r in zip(option.limit_vec, remaining, strict=True)):
            limited.append(option)
            continue
        if plain:
            alloc = option.alloc  # never negative (build_template drops such types)
            per_node = min(alloc[0] // cpu, alloc[1] // memory, alloc[2] // slots)
        else:
            per_node = fit_count(option.alloc, no_pods, req)
        if per_node:
            yield option, price, per_node


def price_floor(fits: Sequence[Fit | str], req: tuple[int, ...]) -> float:
    """No new claim of these fits holds a pod requesting ``req`` for less per pod: any node of a type
    that holds n such pods costs at least n times the pod's cpu (and its memory) at its fit's least
    rate. The selector's answer (``InstanceSelector.price_per_pod``) is never below it."""
    floor = float("inf")
    for fit in fits:
        if isinstance(fit, Fit):
            rate_cpu, rate_memory = fit.least_rates
            least = max(req[0] * rate_cpu, req[1] * rate_memory)
            if least < floor:
                floor = least
    return floor


def fitting(types: list[TypeOption], req: tuple[int, ...], pods: int, remaining: list[int] | None,
            limit: int | None) -> list[TypeOption]:
    """Types (cheapest first) that hold ``pods`` pods of ``req`` and stay within the pool's remaining limits."""
    # Allocatable is never negative (build_template drops such types), so holding ``pods`` times the
    # request is the same test as fit_count(...) >= pods, without a division per resource.
    needed = [wanted * pods for wanted in req]
    cpu, memory, slots = needed[0], needed[1], needed[2]
    extended = len(needed) > 3
    out = []
    for option in types:
        alloc = option.alloc
        # cpu, memory and pods inline: this runs for every type of every new claim.
        if alloc[0] < cpu or alloc[1] < memory or alloc[2] < slots or (extended and not holds(alloc, needed)):
            continue
        if remaining is None or all(v <= r for v, r in zip(option.limit_vec, remaining, strict=True)):
            out.append(option)
            if limit is not None and len(out) == limit:
                break
    return out
