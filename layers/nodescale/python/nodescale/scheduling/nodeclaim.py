"""A NodeClaim being built during a solve: the instance types that still hold its pods, narrowed as pods
join it (the way Karpenter narrows a NodeClaim's requirements), which of them takes one more pod
cheapest, what it reserves against its pool's limits, and the `plan.NodeClaim` it becomes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import sub
from typing import NamedTuple

from ..model import labels as wk
from ..model.pod import Pod
from ..model.requirements import Requirement, Requirements
from .plan import MAX_INSTANCE_TYPES, SPOT_FLEXIBILITY, NodeClaim
from .templates import Fit, TypeOption, fit_count, holds, largest_limits, min_values_met
from .topology import Topology


class Narrowed(NamedTuple):
    """A claim as it would be if it also took pods of some fit."""

    requirements: Requirements
    zones: frozenset[str]
    capacity_types: frozenset[str]
    options: list[TypeOption]  # cheapest first before narrowing
    # Each option's price before narrowing, when narrowing may have reordered them (a floor under each
    # narrowed price); None when the options keep their order.
    base_prices: list[float] | None


class Intersections:
    """Requirements of two levels together; many claims ask about the same pair of objects."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache: dict[tuple[int, int], tuple[Requirements, Requirements, Requirements | None]] = {}

    def both(self, first: Requirements, second: Requirements) -> Requirements | None:
        """``first`` and ``second`` together, or None when nothing meets both."""
        key = (id(first), id(second))
        hit = self._cache.get(key)
        if hit is None:
            combined = first.intersect(second)
            # Holding both objects keeps their ids unique for the solve.
            hit = self._cache[key] = (first, second, None if combined.empty_keys() else combined)
        return hit[2]


class ClaimBin:
    """A claim opened in this solve and the pods it takes so far."""

    __slots__ = ("fit", "template", "requirements", "zones", "capacity_types", "options", "used", "counts", "pods",
                 "price", "next_price", "reserved", "narrow_cache", "open", "room", "as_is", "floor", "top")

    def __init__(self, fit: Fit, zones: frozenset[str], capacity_types: frozenset[str],
                 options: list[TypeOption], dimensions: int) -> None:
        self.fit = fit  # what it was opened for
        self.template = fit.template
        self.requirements = fit.requirements
        self.zones = zones
        self.capacity_types = capacity_types
        self.options = options
        self.used = [0] * dimensions
        self.counts: dict[int, int] = {}  # pods per group
        self.pods: list[Pod] = []
        self.price = options[0].price(zones, capacity_types)
        self.next_price = 0.0  # of the second-cheapest option: the least any upgrade costs
        self.reserved: tuple[int, ...] = ()  # what it counts against its pool's limits
        self.narrow_cache: dict[tuple, Narrowed | None] = {}
        self.open = True  # False once no option has room for the smallest pending pod
        self.room: tuple[int, ...] = ()  # the most any option has left, per resource
        self.top: tuple[int, ...] | None = None  # what room is counted from, per resource (see commit)
        # The claim as it stands, in the form narrowing gives: what most narrowing answers.
        self.as_is = Narrowed(self.requirements, zones, capacity_types, options, None)
        # Opened with enough types to stay spot-flexible: never narrowed below that while spot is allowed.
        spot = wk.CAPACITY_SPOT in capacity_types and len(options) >= SPOT_FLEXIBILITY
        self.floor = SPOT_FLEXIBILITY if spot else 1

    @property
    def zone(self) -> str | None:
        return next(iter(self.zones)) if len(self.zones) == 1 else None

    @property
    def capacity_type(self) -> str | None:
        return next(iter(self.capacity_types)) if len(self.capacity_types) == 1 else None

    def reserve(self, limits: tuple[int, ...]) -> None:
        """Count ``limits`` against the pool's remaining limits."""
        template = self.template
        template.remaining = [left - taken for left, taken in zip(template.remaining, limits, strict=True)]
        self.reserved = limits

    def update_reservation(self) -> bool:
        """Reserve only what the remaining options need; True when the pool's remaining limits changed."""
        template = self.template
        if template.remaining is None or not self.reserved:
            return False
        reserve = largest_limits(self.options)
        if reserve == self.reserved:
            return False
        template.remaining = [
            left + old - new for left, old, new in zip(template.remaining, self.reserved, reserve, strict=True)
        ]
        self.reserved = reserve
        return True

    def narrow(self, fit: Fit, zones: frozenset[str] | None, capacity_types: frozenset[str] | None,
               intersections: Intersections) -> Narrowed | None:
        """The claim if it also took pods of ``fit`` in those domains; None when it cannot take them."""
        new_zones = self.zones & fit.zones if zones is None else self.zones & fit.zones & zones
        new_types = (self.capacity_types & fit.capacity_types if capacity_types is None
                     else self.capacity_types & fit.capacity_types & capacity_types)
        same_requirements = self.requirements is fit.requirements
        if same_requirements and new_zones == self.zones and new_types == self.capacity_types:
            return self.as_is
        if not new_zones or not new_types:
            return None
        key = (id(fit), new_zones, new_types)
        hit = self.narrow_cache.get(key, False)
        if hit is not False:
            return hit
        narrowed = None
        requirements = (self.requirements if same_requirements
                        else intersections.both(self.requirements, fit.requirements))
        if requirements is not None:
            names = None if same_requirements else fit.type_names
            options = [
                t for t in self.options
                if (names is None or t.name in names) and t.price(new_zones, new_types) is not None
            ]
            if options:
                base_prices = [t.price(self.zones, self.capacity_types) for t in options]
                narrowed = Narrowed(requirements, new_zones, new_types, options, base_prices)
        self.narrow_cache[key] = narrowed
        return narrowed

    def commit(self, group_id: int, pods: Sequence[Pod], req: Sequence[int], added: int, narrowed: Narrowed,
               min_values: tuple[tuple[str, int], ...], smallest: Sequence[int], topology: Topology) -> bool:
        """Put ``added`` pods on the claim as ``narrowed``, keeping the options that hold them; False (and
        no change) when none does or minValues forbids it."""
        used = [taken + wanted * added for taken, wanted in zip(self.used, req, strict=True)]
        cpu, memory, slots = used[0], used[1], used[2]
        # cpu, memory and pods inline: this runs for every option of every claim a pod joins.
        if len(used) > 3:
            options = [t for t in narrowed.options
                       if (a := t.alloc)[0] >= cpu and a[1] >= memory and a[2] >= slots and holds(a, used)]
        else:
            options = [t for t in narrowed.options if (a := t.alloc)[0] >= cpu and a[1] >= memory and a[2] >= slots]
        zones, capacity_types = narrowed.zones, narrowed.capacity_types
        if narrowed.base_prices is not None:
            options.sort(key=lambda t: (t.price(zones, capacity_types), t.name))
        if not options:
            return False
        if len(options) < self.floor and wk.CAPACITY_SPOT in capacity_types:
            return False
        if min_values and not min_values_met(options, min_values):
            return False
        # The same options in the same domains (about a quarter of commits) keep what room counts from,
        # and so do most that only drop options too small for the pods (#32 throughput).
        if self.top is None or narrowed is not self.as_is or (
                len(options) != len(self.options) and not self._keeps_top(options)):
            self.top = self._top(options, capacity_types)
        self.used = used
        if narrowed is not self.as_is:  # as it is: the same requirements and domains, nothing newly pinned
            was_zone, was_type = self.zone, self.capacity_type
            self.requirements = narrowed.requirements
            self.zones = zones
            self.capacity_types = capacity_types
            new_zone = self.zone if was_zone is None else None
            new_type = self.capacity_type if was_type is None else None
            if new_zone or new_type:
                # Newly pinned to one zone or capacity type: the pods already on it now count there.
                for counted_group, counted in self.counts.items():
                    topology.count_domains(new_zone, new_type, counted_group, counted)
        self.options = options
        self.price = options[0].price(zones, capacity_types)
        self.next_price = options[1].price(zones, capacity_types) if len(options) > 1 else float("inf")
        self.narrow_cache.clear()
        self.as_is = Narrowed(self.requirements, zones, capacity_types, options, None)
        self.pods.extend(pods)
        topology.record(self.counts, self.zone, self.capacity_type, group_id, added)
        self.room = room = tuple(map(sub, self.top, used))  # as long as each other
        for have, least in zip(room, smallest, strict=True):
            if have < least:
                self.open = False  # for good: options only ever shrink
                break
        return True

    def _keeps_top(self, options: list[TypeOption]) -> bool:
        """Whether ``options``, the claim's options in order less some, keep its ``top``: they do when each
        option dropped is below it in every resource. Then the options top was read from (the roomiest,
        or the floor-th roomiest and those above) all stay, and none is added, so it reads the same."""
        top = self.top
        kept = len(options)
        dropped = len(self.options) - kept
        i = 0
        for option in self.options:
            if i < kept and options[i] is option:
                i += 1
                continue
            for have, most in zip(option.alloc, top, strict=True):
                if have >= most:
                    return False
            dropped -= 1
            if not dropped:
                return True  # the rest all stay (most dropped options are the cheapest, first)
        return True

    def _top(self, options: list[TypeOption], capacity_types: frozenset[str]) -> tuple[int, ...]:
        """Per resource, what the claim's room is counted from: the most any option has or, kept
        spot-flexible, what the floor-th roomiest option has."""
        columns = zip(*[t.alloc for t in options], strict=True)
        if self.floor > 1 and wk.CAPACITY_SPOT in capacity_types:
            k = self.floor - 1
            return tuple(sorted(column, reverse=True)[k] for column in columns)
        return tuple(max(column) for column in columns)


def cheapest_with_room(narrowed: Narrowed, used: list[int], req: tuple[int, ...],
                       extended: bool) -> tuple[TypeOption, float] | None:
    """The claim's cheapest option with room for one more pod, and its price (options keep price order
    unless narrowed). A plain pair: this runs for every claim considered, where a NamedTuple costs."""
    base_prices = narrowed.base_prices
    zones, capacity_types = narrowed.zones, narrowed.capacity_types
    cpu, memory = req[0], req[1]
    used_cpu, used_memory, used_pods = used[0], used[1], used[2]
    best: TypeOption | None = None
    best_price = 0.0
    for i, option in enumerate(narrowed.options):
        if base_prices is not None and best is not None and base_prices[i] >= best_price:
            break  # narrowing only raises prices: nothing further on is cheaper
        alloc = option.alloc
        if alloc[0] - used_cpu < cpu or alloc[1] - used_memory < memory or alloc[2] <= used_pods:
            continue
        if extended and not fit_count(alloc, used, req):
            continue
        price = option.price(zones, capacity_types)
        if best is None or price < best_price:
            best, best_price = option, price
            if base_prices is None:
                break
    return None if best is None else (best, best_price)


def build_node_claims(claims: Sequence[ClaimBin], dims: Sequence[str]) -> list[NodeClaim]:
    """The claims to launch, their zones and capacity types cut to where their options are offered."""
    offered_cache: dict[tuple, tuple[list[str], list[str]]] = {}
    pinned_cache: dict[tuple, tuple] = {}
    return [_node_claim(claim, dims, offered_cache, pinned_cache) for claim in claims]


def pinned(
    requirements: Requirements, template_labels: Mapping[str, str], zones: Sequence[str], capacity_types: Sequence[str]
) -> tuple[Requirements, dict[str, str]]:
    """A claim's requirements narrowed to its zones and capacity types, and the labels its node will carry:
    the template's, every single-valued requirement's (not the hostname), and the zone and capacity type
    when only one remains."""
    requirements = requirements.with_requirement(Requirement.exactly(wk.ZONE, *zones))
    requirements = requirements.with_requirement(Requirement.exactly(wk.CAPACITY_TYPE, *capacity_types))
    labels = dict(template_labels)
    for key, value in requirements.labels().items():
        if key not in labels and key != wk.HOSTNAME:
            labels[key] = value
    if len(zones) == 1:
        labels[wk.ZONE] = zones[0]
    if len(capacity_types) == 1:
        labels[wk.CAPACITY_TYPE] = capacity_types[0]
    return requirements, labels


def _node_claim(claim: ClaimBin, dims: Sequence[str], offered_cache: dict, pinned_cache: dict) -> NodeClaim:
    options = claim.options[:MAX_INSTANCE_TYPES]
    zones, capacity_types = _offered(options, claim.zones, claim.capacity_types, offered_cache)
    # Zones and capacity types were tracked as sets while packing; they join the requirements here.
    # Most claims of a solve share their requirements object, template and domains: pinned once for
    # them all (#32 throughput). Requirements are never changed in place; each claim gets its own labels.
    template = claim.template
    key = (id(claim.requirements), id(template), tuple(zones), tuple(capacity_types))
    hit = pinned_cache.get(key)
    if hit is None:
        # Holding the requirements and template keeps their ids unique while the cache lives.
        hit = pinned_cache[key] = (claim.requirements, template,
                                   *pinned(claim.requirements, template.labels, zones, capacity_types))
    requirements, labels = hit[2], dict(hit[3])
    requests = {dim: used for dim, used in zip(dims, claim.used, strict=True) if used}
    for dim, overhead in zip(dims, options[0].daemon, strict=True):
        if overhead:
            requests[dim] = requests.get(dim, 0) + overhead
    return NodeClaim(
        nodepool=template.name,
        instance_types=[t.name for t in options],
        capacity_types=capacity_types,
        zones=zones,
        labels=labels,
        taints=template.pool.taints,
        startup_taints=template.pool.startup_taints,
        requirements=requirements,
        pods=claim.pods,
        price=claim.price,
        requests=requests,
        overlays=options[0].it.overlays,
    )


def _offered(options: list[TypeOption], zones: frozenset[str], capacity_types: frozenset[str],
             cache: dict) -> tuple[list[str], list[str]]:
    """Zones and capacity types where one of the options is actually offered."""
    key = (tuple(map(id, options)), zones, capacity_types)
    hit = cache.get(key)
    if hit is None:
        pairs = {
            (zone, capacity_type)
            for t in options
            for zone, capacity_type, _ in t.offers
            if zone in zones and capacity_type in capacity_types
        }
        hit = cache[key] = (sorted({z for z, _ in pairs}), sorted({c for _, c in pairs}))
    return hit
