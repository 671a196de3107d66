"""What a NodePool would launch: its node template, and each instance type it can use with daemon overhead;
and the integer-vector tests the packing loops use on them.

Everything here is computed once per solve, so the packing loops only compare integer vectors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model import labels as wk
from ..model import nodelabels
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod
from ..model.requirements import Requirement, Requirements
from ..model.taints import tolerates_all
from .plan import ExistingNode

UNLIMITED = 1 << 62

# Labels a node gets from its instance type; a type without one of them does not have that label at all.
# The Windows build is among them: the catalog sets it on types prepared for a Windows AMI family.
TYPE_KEYS = frozenset(
    wk.WELL_KNOWN - {wk.ZONE, wk.ZONE_ID, wk.CAPACITY_TYPE, wk.NODEPOOL, wk.HOSTNAME, wk.REGION, *wk.RESERVATION_KEYS}
)


def absent_ok(req: Requirement) -> bool:
    """A node without the label satisfies NotIn and DoesNotExist, nothing else."""
    return req.operator in ("NotIn", "DoesNotExist")


def type_satisfies(
    labels: Mapping[str, str], oses: frozenset[str], reqs: Requirements, defined: Mapping[str, str] | None = None
) -> bool:
    """Whether an instance type's own labels meet ``reqs``. Zone and capacity type are left to the
    offerings; a label the type lacks but the pool's nodes get anyway (``defined``) is the pool's business."""
    for key, req in reqs.items():
        if key not in TYPE_KEYS:
            continue
        if key == wk.OS:
            if not any(req.has(o) for o in oses):
                return False
            continue
        value = labels.get(key)
        if value is None:
            if not absent_ok(req) and (defined is None or key not in defined):
                return False
        elif not req.has(value):
            return False
    return True


def labels_satisfy(labels: Mapping[str, str], reqs: Requirements) -> bool:
    """Whether a node with exactly these labels meets ``reqs``."""
    for key, req in reqs.items():
        value = labels.get(key)
        if value is None:
            if not absent_ok(req):
                return False
        elif not req.has(value):
            return False
    return True


def daemon_requirements(pod: Pod) -> list[Requirements]:
    terms = pod.required_affinity or [Requirements()]
    return [pod.node_selector.intersect(t) for t in terms]


class TypeOption:
    """One instance type as a pool would launch it: allocatable after daemons, offerings the pool allows."""

    __slots__ = ("it", "name", "index", "alloc", "capacity", "offers", "daemon", "limit_vec", "_prices")

    def __init__(self, it: InstanceType, index: int, alloc: tuple[int, ...], daemon: tuple[int, ...],
                 offers: tuple[tuple[str, str, float], ...], limit_vec: tuple[int, ...]) -> None:
        self.it = it
        self.name = it.name
        self.index = index
        self.alloc = alloc  # allocatable minus daemon overhead, in the solve's resource order
        self.daemon = daemon
        self.offers = offers  # (zone, capacity type, price), cheapest first
        self.limit_vec = limit_vec  # what one node of it counts against the pool's limits
        self._prices: dict[tuple[frozenset[str], frozenset[str]], float | None] = {}

    def price(self, zones: frozenset[str], capacity_types: frozenset[str]) -> float | None:
        """The cheapest offering in those zones and capacity types; None when it has none there."""
        key = (zones, capacity_types)
        try:
            return self._prices[key]
        except KeyError:
            pass
        found = None
        for zone, capacity_type, price in self.offers:
            if zone in zones and capacity_type in capacity_types:
                found = price
                break
        self._prices[key] = found
        return found


class PoolTemplate:
    """A NodePool prepared for one solve."""

    __slots__ = ("index", "pool", "name", "weight", "requirements", "taints", "labels", "types",
                 "zones", "zone_ids", "capacity_types", "limit_keys", "remaining", "fits")

    def __init__(self, index: int, pool: NodePool, extra_labels: Mapping[str, str]) -> None:
        self.index = index
        self.pool = pool
        self.name = pool.name
        self.weight = pool.weight
        # The labels every node of the pool gets, as the launch and registration give them (nodelabels).
        labels = {**extra_labels, **nodelabels.pool_labels(pool)}
        reqs = pool.requirements.intersect(Requirements.from_labels(labels))
        # Its nodes lack the other generation's pool label: a pod selecting the NodePool "default" does
        # not land on the Provisioner "default" (karpenter.sh/nodepool is otherwise allowed undefined).
        other = wk.NODEPOOL if pool.label_key == wk.LEGACY_PROVISIONER else wk.LEGACY_PROVISIONER
        reqs = reqs.with_requirement(Requirement.create(other, "DoesNotExist"))
        self.requirements = reqs
        self.labels = labels
        self.taints = pool.taints
        self.types: list[TypeOption] = []
        self.zones: frozenset[str] = frozenset()
        self.zone_ids: dict[str, str] = {}  # zone -> its id (topology.k8s.aws/zone-id), where known
        self.capacity_types: frozenset[str] = frozenset()
        self.limit_keys: tuple[str, ...] = tuple(sorted(pool.limits))
        self.remaining: list[int] | None = None  # None: no limits
        self.fits: dict = {}  # per group level: a Fit or a reason string


def build_template(
    index: int,
    pool: NodePool,
    types: Iterable[InstanceType],
    dims: tuple[str, ...],
    daemons: list[Pod],
    extra_labels: Mapping[str, str],
    unavailable: frozenset[tuple[str, str, str]],
    usage: Mapping[str, int],
) -> PoolTemplate:
    template = PoolTemplate(index, pool, extra_labels)
    reqs = template.requirements
    zone_req = reqs.get(wk.ZONE)
    zone_id_req = reqs.get(wk.ZONE_ID)
    ct_req = reqs.get(wk.CAPACITY_TYPE)
    # Daemons that would run on this pool's nodes: they tolerate its taints (startup taints go away)
    # and their node requirements can hold on its template.
    pool_daemons = []
    for d in daemons:
        if tolerates_all(d.tolerations, pool.taints) is not None:
            continue
        terms = [t for t in daemon_requirements(d) if reqs.compatible(t)]
        if terms:
            pool_daemons.append((d, terms))
    zones: set[str] = set()
    capacity_types: set[str] = set()
    for i, it in enumerate(types):
        if not type_satisfies(it.labels, it.operating_systems, reqs, template.labels):
            continue
        offers = _offers(it, unavailable, zone_req, zone_id_req, ct_req, reqs)
        if not offers:
            continue
        overhead = [0] * len(dims)
        for d, terms in pool_daemons:
            if any(type_satisfies(it.labels, it.operating_systems, t, template.labels) for t in terms):
                for j, name in enumerate(dims):
                    overhead[j] += d.requests.get(name, 0)
        alloc = it.allocatable
        # A host port two daemons ask for is held once: the second daemon's pod is refused by the node, not
        # the node by its daemons.
        overhead = [min(o, 1) if res.is_host_port(name) else o for o, name in zip(overhead, dims, strict=True)]
        vec = tuple(res.node_holds(alloc, name) - overhead[j] for j, name in enumerate(dims))
        if any(v < 0 for v in vec):
            continue  # the daemons alone do not fit
        template.types.append(TypeOption(it, i, vec, tuple(overhead), tuple(offers),
                                         limit_vector(it, template.limit_keys)))
        zones.update(o[0] for o in offers)
        template.zone_ids.update((o.zone, o.zone_id) for o in it.offerings if o.zone_id)
        capacity_types.update(o[1] for o in offers)
    template.types.sort(key=lambda t: (t.offers[0][2], t.name))
    template.zones = frozenset(zones)
    template.capacity_types = frozenset(capacity_types)
    template.remaining = remaining_limits(pool, usage)
    return template


def _offers(it: InstanceType, unavailable: frozenset[tuple[str, str, str]], zone_req: Requirement | None,
            zone_id_req: Requirement | None, ct_req: Requirement | None,
            reqs: Requirements) -> list[tuple[str, str, float]]:
    """The type's offerings the pool allows (its zone, capacity type and reservation labels), as (zone,
    capacity type, price), cheapest first."""
    return sorted(
        (
            (o.zone, o.capacity_type, o.price)
            for o in it.offerings
            if o.available
            and (it.name, o.zone, o.capacity_type) not in unavailable
            and (zone_req is None or zone_req.has(o.zone))
            and (zone_id_req is None or zone_id_req.has(o.zone_id))
            and (ct_req is None or ct_req.has(o.capacity_type))
            and o.meets(reqs)
        ),
        key=lambda o: o[2],
    )


class Fit:
    """A group level against a pool: the combined requirements and the types that can hold its pods."""

    __slots__ = ("template", "requirements", "zones", "capacity_types", "types", "type_names", "min_values", "max_alloc",
                 "least_rates")

    def __init__(self, template: PoolTemplate, requirements: Requirements, zones: frozenset[str],
                 capacity_types: frozenset[str], types: list[TypeOption]) -> None:
        self.template = template
        self.requirements = requirements
        self.zones = zones
        self.capacity_types = capacity_types
        self.types = types
        self.type_names = frozenset(t.name for t in types)
        self.min_values = min_values_of(requirements)
        # The most of each resource any of its types offers.
        self.max_alloc = tuple(max(col) for col in zip(*(t.alloc for t in types), strict=True))
        # The least any of its types asks per unit of cpu and of memory (its cheapest offering anywhere):
        # no node of them holds a pod for less than that pod's cpu, or its memory, at these rates.
        self.least_rates = (_least_rate(types, 0), _least_rate(types, 1))


def _least_rate(types: Sequence[TypeOption], dim: int) -> float:
    """The lowest price per unit of one resource among the types that have any of it (0 when none has)."""
    return min((t.offers[0][2] / t.alloc[dim] for t in types if t.alloc[dim] > 0 and t.offers), default=0.0)


def min_values_of(reqs: Requirements) -> tuple[tuple[str, int], ...]:
    return tuple((key, r.min_values) for key, r in reqs.items() if r.min_values)


def _value(t: TypeOption, key: str) -> str | None:
    return t.name if key == wk.INSTANCE_TYPE else t.it.labels.get(key)


def min_values_met(types: Iterable[TypeOption], mins: tuple[tuple[str, int], ...]) -> bool:
    """Whether the options keep at least ``minValues`` distinct values of each key that asks for some."""
    types = list(types)
    return all(len({v for t in types if (v := _value(t, key)) is not None}) >= n for key, n in mins)


def truncate(types: list[TypeOption], mins: tuple[tuple[str, int], ...], limit: int) -> list[TypeOption]:
    """The cheapest ``limit`` options, swapping in the cheapest type of each value minValues needs."""
    head = types[:limit]
    if not mins or min_values_met(head, mins):
        return head
    keep: dict[int, TypeOption] = {}
    for key, n in mins:
        seen: set[str] = set()
        for t in types:
            v = _value(t, key)
            if v is not None and v not in seen:
                seen.add(v)
                keep[id(t)] = t
                if len(seen) == n:
                    break
    for t in types:
        if len(keep) >= limit:
            break
        keep.setdefault(id(t), t)
    order = {id(t): i for i, t in enumerate(types)}
    return sorted(keep.values(), key=lambda t: order[id(t)])


def fit_level(template: PoolTemplate, reqs: Requirements, tolerations: tuple) -> Fit | str:
    """The Fit of a pod level on a pool, or why it cannot use the pool at all (one clause)."""
    taint = tolerates_all(tolerations, template.taints)
    if taint is not None:
        return f"did not tolerate {taint}"
    host = reqs.get(wk.HOSTNAME)
    if host is not None and not (host.complement and host.greater_than is None and host.less_than is None):
        # A new node's hostname is made when it launches, so only NotIn and Exists can hold on it.
        return f"{host} names a node, and a new node's hostname cannot match it"
    why = template.requirements.incompatibility(reqs)
    if why is not None:
        return why
    combined = template.requirements.intersect(reqs)
    zone_req = combined.get(wk.ZONE)
    ct_req = combined.get(wk.CAPACITY_TYPE)
    zones = frozenset(z for z in template.zones if zone_req is None or zone_req.has(z))
    zone_id_req = combined.get(wk.ZONE_ID)
    if zone_id_req is not None:
        # A zone id names one zone: the claim's zones (what the launch reads) are cut to those it allows.
        zones = frozenset(z for z in zones if zone_id_req.has(template.zone_ids.get(z, "")))
    capacity_types = frozenset(c for c in template.capacity_types if ct_req is None or ct_req.has(c))
    reservation = _reservation_requirements(combined)
    if reservation is not None and _needs_reservation(reservation):
        # Only reserved offerings carry reservation labels; allot() pins the claim to one that matches.
        capacity_types &= frozenset({wk.CAPACITY_RESERVED})
    if not template.types:
        return f"no instance type meets the nodepool's requirements ({_describe(template.pool.requirements)})"
    types = []
    for t in template.types:
        if not type_satisfies(t.it.labels, t.it.operating_systems, reqs, template.labels):
            continue
        if t.price(zones, capacity_types) is None:
            continue
        if reservation is None or _has_offering(t.it, zones, capacity_types, reservation):
            types.append(t)
    if not types:
        return f"no instance type satisfies {_describe(reqs)}" if len(reqs) else "no instance type is offered"
    if zones != template.zones or capacity_types != template.capacity_types:
        types.sort(key=lambda t: (t.price(zones, capacity_types), t.name))
    return Fit(template, combined, zones, capacity_types, types)


def _reservation_requirements(reqs: Requirements) -> Requirements | None:
    """The pod's requirements on reservation labels (offering labels), or None when it has none."""
    found = [r for k in wk.RESERVATION_KEYS if (r := reqs.get(k)) is not None]
    return Requirements(found) if found else None


def _needs_reservation(reqs: Requirements) -> bool:
    return any(not r.allows_absent for r in reqs.values())


def _has_offering(it: InstanceType, zones: frozenset[str], capacity_types: frozenset[str], reqs: Requirements) -> bool:
    return any(
        o.available and o.zone in zones and o.capacity_type in capacity_types and o.meets(reqs) for o in it.offerings
    )


def _describe(reqs: Requirements) -> str:
    return ", ".join(str(r) for r in reqs.values())


def fit_count(alloc: Sequence[int], used: Sequence[int], req: Sequence[int]) -> int:
    """How many more pods requesting ``req`` fit in ``alloc`` beside ``used``."""
    most = UNLIMITED
    for have, taken, wanted in zip(alloc, used, req, strict=True):
        if wanted:
            room = (have - taken) // wanted
            if room < most:
                most = room
    return most if most > 0 else 0


def holds(alloc: Sequence[int], used: Sequence[int]) -> bool:
    # A plain loop: all() over a generator costs twice as much in this hot path.
    for have, taken in zip(alloc, used, strict=True):  # noqa: SIM110
        if taken > have:
            return False
    return True


def largest_limits(options: Iterable[TypeOption]) -> tuple[int, ...]:
    """What a node counts against its pool's limits at worst: the most of each limited resource."""
    return most_of(t.limit_vec for t in options)


def most_of(vectors: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """The most of each column of ``vectors`` (limit vectors: what one of the nodes counts at worst)."""
    return tuple(max(column) for column in zip(*vectors, strict=True))


def limit_vector(it: InstanceType, keys: Sequence[str]) -> tuple[int, ...]:
    """What one node of type ``it`` counts against the limited resources ``keys`` (``nodes``: one node)."""
    return tuple(1 if k == "nodes" else it.capacity.get(k, 0) for k in keys)


def remaining_limits(pool: NodePool, usage: Mapping[str, int]) -> list[int] | None:
    """What the pool's limits leave beside ``usage``, one value per limited resource in sorted order (the
    order of ``limit_vector``'s keys); None when the pool has no limits."""
    keys = sorted(pool.limits)
    return [pool.limits[k] - usage.get(k, 0) for k in keys] if keys else None


def nodes_within(reserve: Sequence[int], remaining: Sequence[int]) -> int:
    """How many nodes, each counting ``reserve`` against the limits, ``remaining`` leaves room for."""
    most = UNLIMITED
    for reserved, left in zip(reserve, remaining, strict=True):
        if reserved:
            most = min(most, left // reserved)
    return max(most, 0)


def pool_usage(nodes: Sequence[ExistingNode],
               limits_usage: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """What each pool's existing nodes, plus the extra usage given, count against its limits."""
    usage = {pool: dict(extra) for pool, extra in limits_usage.items()}
    for node in nodes:
        if node.nodepool:
            used = usage.setdefault(node.nodepool, {})
            for resource, amount in (node.capacity or node.allocatable).items():
                used[resource] = used.get(resource, 0) + amount
            used["nodes"] = used.get("nodes", 0) + 1
    return usage
