"""How far a plan's price is from the best any packing could do, and how a Karpenter-like packing fares.

For one workload and one NodePool this prints three prices per hour and two ratios:

- nodescale's plan (``nodescale.scheduling.solve``);
- a model of Karpenter's first-fit-decreasing packing of the same pods (:func:`ffd`);
- the linear relaxation over instance types (:func:`lp_bound`), solved with HiGHS: per type, a
  fractional number of nodes, and per pod group and type, a fractional number of pods; every group's
  pods placed; on each type, the pods placed fit in its nodes' allocatable cpu, memory and pod slots
  (the allocatable the solver uses: the pool's instance types as ``pool_types`` builds them, EKS
  reservations included, less the DaemonSets' requests per node); a group only goes on types one of
  its pods fits on; minimise the price. No packing of whole pods on whole nodes costs less, so
  "price over bound" is an upper limit on how far from optimal a plan can be.

Workloads: (a) 50,000 pods from 50 deployments of mixed cpu and memory shapes with 5 DaemonSets on an
on-demand c/m/r, generation > 2 pool and the bundled us-east-1 catalog; (b) Karpenter's benchmark mix
of ``bench.scheduling`` (5,000 pods, 400 synthetic types). The bound ignores topology (spread,
affinity): it stays a valid lower bound, only a looser one where topology costs nodes.

The FFD model follows kubernetes-sigs/karpenter's scheduler: pods sorted by cpu then memory,
descending; each pod goes on the first open NodeClaim that can still take it, the claims tried
fewest-pods first; a claim keeps every instance type that can hold all its pods (daemon overhead
included), and a pod that no open claim takes opens a new claim with every compatible type. Each claim
launches the cheapest type it kept. (Karpenter's opt-in NodeClaim optimization pass, which splits a claim
that one more pod pushed onto a much dearer type, is not modelled: it is off by default.) Hostname spread (maxSkew 1) and hostname anti-affinity allow one
pod of a selector per claim; zonal spread puts a pod in a least-loaded zone of its selector and zonal
self-affinity keeps a selector in one zone; a claim narrowed to a zone stays there.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import print_lines
from bench.scheduling import HOST_ANTI, HOST_SPREAD, ZONE_AFFINITY, ZONE_SPREAD, _pod, karpenter_mix
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.catalog_kwok import benchmark_types
from nodescale.aws.pricing import ebs_prices
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.plan import Plan
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.templates import type_satisfies

DIMS = (res.CPU, res.MEMORY, res.PODS)
# The LP is solved in cores, GiB and pods, so its coefficients stay within a few orders of magnitude.
_SCALE = (1e-3, 1 / 2**30, 1.0)


@dataclass(frozen=True)
class TypeRow:
    """One instance type as a pool launches it: allocatable after DaemonSets (cpu m, memory B, pods), price."""

    name: str
    alloc: tuple[int, int, int]
    price: float
    zones: frozenset[str] = frozenset()


def type_rows(pool: NodePool, types: Sequence[InstanceType], daemons: Sequence[Pod] = ()) -> list[TypeRow]:
    """The pool's types, cheapest first, each with its allocatable less every DaemonSet's requests.

    The DaemonSets here select no nodes and tolerate nothing in particular, so every one of them runs on
    every node of the pool (as they do in the workloads below)."""
    overhead = [sum(d.requests.get(k, 0) for d in daemons) for k in DIMS]
    rows = []
    for it in types:
        if not type_satisfies(it.labels, it.operating_systems, pool.requirements):
            continue
        offer = it.cheapest(pool.requirements)
        if offer is None:
            continue
        alloc = tuple(it.allocatable.get(k, 0) - overhead[i] for i, k in enumerate(DIMS))
        if min(alloc) <= 0:
            continue
        zone_req = pool.requirements.get(wk.ZONE)
        ct_req = pool.requirements.get(wk.CAPACITY_TYPE)
        zones = frozenset(
            o.zone for o in it.offerings
            if o.available and o.price == offer.price
            and (zone_req is None or zone_req.has(o.zone)) and (ct_req is None or ct_req.has(o.capacity_type))
        )
        rows.append(TypeRow(it.name, alloc, offer.price, zones))  # type: ignore[arg-type]
    rows.sort(key=lambda r: (r.price, r.name))
    return rows


def pod_shape(pod: Pod) -> tuple[int, int, int]:
    return tuple(pod.requests.get(k, 0) for k in DIMS)  # type: ignore[return-value]


def groups_of(pods: Sequence[Pod]) -> list[tuple[tuple[int, int, int], int]]:
    """Identical requests make one group: the LP only needs (shape, count)."""
    return sorted(Counter(pod_shape(p) for p in pods).items())


def host_groups_of(pods: Sequence[Pod]) -> tuple[list[tuple[tuple[int, int, int], int]], list[bool]]:
    """Groups as :func:`groups_of` makes them, but each hostname-bound selector (bench.scheduling's
    hostname spread and anti-affinity kinds) a group of its own, flagged one-per-node."""
    counts: Counter = Counter()
    for p in pods:
        kind = p.labels.get("kind", "plain")
        selector = f"{kind}/{p.labels.get('value', '')}" if kind in (HOST_SPREAD, HOST_ANTI) else ""
        counts[(pod_shape(p), selector)] += 1
    keys = sorted(counts)
    return [(shape, counts[(shape, sel)]) for shape, sel in keys], [bool(sel) for _, sel in keys]


def _fits(shape: Sequence[float], alloc: Sequence[float]) -> bool:
    return all(s <= a for s, a in zip(shape, alloc, strict=True))


def undominated(rows: Sequence[TypeRow]) -> list[TypeRow]:
    """Drop a type when another holds every pod it holds (at least its allocatable in every resource)
    and gives at least as much of every resource per dollar: any node of the first can be swapped for
    price-equal fractional nodes of the second, so the LP's optimum is unchanged."""
    keep = []
    for i, r in enumerate(rows):
        dominated = False
        for j, o in enumerate(rows):
            if i == j:
                continue
            better = all(a >= b for a, b in zip(o.alloc, r.alloc, strict=True)) and all(
                a / o.price >= b / r.price for a, b in zip(o.alloc, r.alloc, strict=True)
            )
            # Two equal types: the first of them stays.
            if better and (o.alloc != r.alloc or o.price != r.price or j < i):
                dominated = True
                break
        if not dominated:
            keep.append(r)
    return keep


def lp_bound(groups: Sequence[tuple[Sequence[int], int]], rows: Sequence[TypeRow],
             one_per_node: Sequence[bool] = ()) -> float:
    """The linear relaxation's optimum, in price per hour; ``inf`` when some group fits no type.

    A group flagged in ``one_per_node`` (hostname spread with maxSkew 1 or hostname anti-affinity, alone
    in its selector) puts at most one pod on a node: on each type, at most as many pods as nodes."""
    import highspy
    import numpy as np

    if not any(one_per_node):
        # (With one-per-node groups a dominated type may still be the cheapest node per such pod.)
        rows = undominated(rows)
    scaled_alloc = [tuple(a * s for a, s in zip(r.alloc, _SCALE, strict=True)) for r in rows]
    n_types, n_groups = len(rows), len(groups)
    # Columns: n_t for each type, then x_gt for each (group, type) the group's pods fit on.
    cost: list[float] = [r.price for r in rows]
    starts: list[int] = []
    index: list[int] = []
    value: list[float] = []
    # Row layout: group rows 0..G-1 (== count), then 3 rows per type (placed - alloc * n_t <= 0), then
    # one row per (one-per-node group, type) (placed - n_t <= 0).
    exclusive = [g for g, flag in enumerate(one_per_node) if flag]
    host_row = {g: n_groups + 3 * n_types + i * n_types for i, g in enumerate(exclusive)}
    for t in range(n_types):
        starts.append(len(index))
        for d in range(3):
            index.append(n_groups + 3 * t + d)
            value.append(-scaled_alloc[t][d])
        for g in exclusive:
            index.append(host_row[g] + t)
            value.append(-1.0)
    for g, (shape, _count) in enumerate(groups):
        scaled = [v * s for v, s in zip(shape, _SCALE, strict=True)]
        placeable = False
        for t in range(n_types):
            if not _fits(shape, rows[t].alloc):
                continue
            placeable = True
            cost.append(0.0)
            starts.append(len(index))
            index.append(g)
            value.append(1.0)
            for d in range(3):
                if scaled[d]:
                    index.append(n_groups + 3 * t + d)
                    value.append(scaled[d])
            if g in host_row:
                index.append(host_row[g] + t)
                value.append(1.0)
        if not placeable:
            return float("inf")
    n_cols = len(cost)
    n_rows = n_groups + (3 + len(exclusive)) * n_types
    lower_rows = [float(c) for _, c in groups] + [-highspy.kHighsInf] * (n_rows - n_groups)
    upper_rows = [float(c) for _, c in groups] + [0.0] * (n_rows - n_groups)

    lp = highspy.HighsLp()
    lp.num_col_ = n_cols
    lp.num_row_ = n_rows
    lp.col_cost_ = np.array(cost, dtype=np.double)
    lp.col_lower_ = np.zeros(n_cols, dtype=np.double)
    lp.col_upper_ = np.full(n_cols, highspy.kHighsInf, dtype=np.double)
    lp.row_lower_ = np.array(lower_rows, dtype=np.double)
    lp.row_upper_ = np.array(upper_rows, dtype=np.double)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array([*starts, len(index)], dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=np.double)
    h = _quiet_highs(highspy)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS did not solve the bound: {h.modelStatusToString(status)}")
    return float(h.getInfo().objective_function_value)


def _quiet_highs(highspy: Any) -> Any:
    """A HiGHS instance without its banner (printed from C to file descriptor 1 when one is made)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    return h


# ------------------------------------------------------------------------------------------- FFD model


@dataclass(frozen=True)
class FfdPod:
    """What the FFD model needs of a pod: its requests, and its topology, if any."""

    shape: tuple[int, int, int]
    kind: str = "plain"  # or one of bench.scheduling's topology kinds
    selector: str = ""  # the label value its topology constraint selects


@dataclass
class Claim:
    types: list[int]  # indices into the rows, cheapest first: the types that can hold every pod so far
    used: list[int]
    zones: frozenset[str] | None = None  # None: not narrowed to a zone
    pods: int = 0
    selectors: set[str] = field(default_factory=set)  # hostname-topology selectors of its pods


@dataclass
class FfdResult:
    claims: list[tuple[str, int]]  # (type launched, pods)
    price: float
    unplaced: int


def ffd_pods(pods: Sequence[Pod]) -> list[FfdPod]:
    out = []
    for p in pods:
        kind = p.labels.get("kind", "plain")
        out.append(FfdPod(pod_shape(p), kind, f"{kind}/{p.labels.get('value', '')}"))
    return out


def ffd(pods: Sequence[FfdPod], rows: Sequence[TypeRow]) -> FfdResult:
    """Pack ``pods`` as the model of Karpenter's scheduler does (see the module's docstring)."""
    order = sorted(pods, key=lambda p: (-p.shape[0], -p.shape[1]))
    allocs = [r.alloc for r in rows]
    all_zones = frozenset().union(*(r.zones for r in rows)) if rows else frozenset()
    claims: list[Claim] = []
    zone_counts: dict[str, Counter] = {}
    affinity_zone: dict[str, str] = {}
    unplaced = 0
    # Identical consecutive pods skip the claims that refused the previous one (nothing in them changed).
    last_key: tuple | None = None
    refused: set[int] = set()
    for pod in order:
        key = (pod.shape, pod.kind, pod.selector)
        if key != last_key:
            refused = set()
            last_key = key
        wanted = _zones_for(pod, all_zones, zone_counts, affinity_zone)
        placed = False
        # Karpenter sorts its new NodeClaims by pod count before each pod (ties keep their order).
        claims.sort(key=lambda c: c.pods)
        for c in claims:
            if id(c) in refused:
                continue
            if _try_add(c, pod, wanted, allocs, rows):
                _record(pod, c, zone_counts, affinity_zone)
                placed = True
                break
            refused.add(id(c))
        if placed:
            continue
        c = Claim(types=list(range(len(rows))), used=[0, 0, 0])
        if _try_add(c, pod, wanted, allocs, rows):
            claims.append(c)
            _record(pod, c, zone_counts, affinity_zone)
        else:
            unplaced += 1
    launched = [(rows[c.types[0]].name, c.pods) for c in claims]
    price = sum(rows[c.types[0]].price for c in claims)
    return FfdResult(launched, price, unplaced)


def _zones_for(pod: FfdPod, all_zones: frozenset[str], counts: dict[str, Counter],
               affinity: dict[str, str]) -> frozenset[str] | None:
    if pod.kind == ZONE_SPREAD:
        seen = counts.get(pod.selector, Counter())
        low = min(seen.get(z, 0) for z in all_zones)
        return frozenset(z for z in all_zones if seen.get(z, 0) == low)
    if pod.kind == ZONE_AFFINITY and pod.selector in affinity:
        return frozenset({affinity[pod.selector]})
    return None


def _try_add(c: Claim, pod: FfdPod, wanted: frozenset[str] | None, allocs: Sequence[tuple[int, int, int]],
             rows: Sequence[TypeRow]) -> bool:
    if pod.kind in (HOST_SPREAD, HOST_ANTI) and pod.selector in c.selectors:
        return False
    zones = c.zones
    if wanted is not None:
        zones = wanted if zones is None else zones & wanted
        if not zones:
            return False
    used = [u + s for u, s in zip(c.used, pod.shape, strict=True)]
    remaining = [
        t for t in c.types
        if allocs[t][0] >= used[0] and allocs[t][1] >= used[1] and allocs[t][2] >= used[2]
        and (zones is None or rows[t].zones & zones)
    ]
    if not remaining:
        return False
    if zones is not None or pod.kind == ZONE_AFFINITY:
        # Narrowed to a zone: the first one the cheapest remaining type is offered in.
        offered = rows[remaining[0]].zones if zones is None else rows[remaining[0]].zones & zones
        zones = frozenset({min(offered)})
        remaining = [t for t in remaining if rows[t].zones & zones]
    c.types = remaining
    c.used = used
    c.zones = zones
    c.pods += 1
    if pod.kind in (HOST_SPREAD, HOST_ANTI):
        c.selectors.add(pod.selector)
    return True


def _record(pod: FfdPod, c: Claim, counts: dict[str, Counter], affinity: dict[str, str]) -> None:
    if c.zones is None or len(c.zones) != 1:
        return
    (zone,) = c.zones
    if pod.kind == ZONE_SPREAD:
        counts.setdefault(pod.selector, Counter())[zone] += 1
    elif pod.kind == ZONE_AFFINITY:
        affinity.setdefault(pod.selector, zone)


# ------------------------------------------------------------------------------------------- workloads


def cmr_pool(name: str = "default", capacity_type: str = "on-demand") -> NodePool:
    """A c/m/r, generation > 2 Linux pool of one capacity type."""
    reqs = Requirements([
        Requirement.create(wk.ARCH, "In", ["amd64", "arm64"]),
        Requirement.create(wk.CAPACITY_TYPE, "In", [capacity_type]),
        Requirement.create(wk.INSTANCE_CATEGORY, "In", ["c", "m", "r"]),
        Requirement.create(wk.INSTANCE_GENERATION, "Gt", ["2"]),
        Requirement.create(wk.OS, "In", ["linux"]),
    ])
    return NodePool(name=name, requirements=reqs, node_class="default")


def on_demand_pool() -> NodePool:
    return cmr_pool()


# (name, cpu m, memory Mi): what EKS clusters commonly run on every node.
DAEMONSETS = (
    ("kube-proxy", 100, 128),
    ("aws-node", 25, 128),
    ("ebs-csi-node", 30, 120),
    ("log-agent", 100, 200),
    ("node-exporter", 50, 64),
)


def daemonsets() -> list[Pod]:
    out = []
    for name, cpu, mem in DAEMONSETS:
        pod = _pod(name, cpu, mem, {"app": name}, {})
        pod.owner_kind = "DaemonSet"
        pod.owner_name = name
        out.append(pod)
    return out


def mixed_deployments(total: int = 50_000, seed: int = 23) -> list[Pod]:
    """50 deployments of equal size, each of its own cpu and memory shape (0.5 to 16 GiB per vCPU)."""
    rnd = random.Random(seed)
    per = total // 50
    pods: list[Pod] = []
    for d in range(50):
        cpu = rnd.choice((100, 200, 250, 300, 500, 750, 1000, 1500, 2000, 3000, 4000))
        mem = max(64, int(cpu * rnd.choice((0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16)) * 1.024))
        template = _pod(f"deploy-{d}", cpu, mem, {"app": f"deploy-{d}"}, {})
        for r in range(per):
            pod = Pod(**{f: getattr(template, f) for f in template.__dataclass_fields__})
            pod.name = f"deploy-{d}-{r}"
            pods.append(pod)
    return pods


@dataclass
class Comparison:
    name: str
    pods: int
    plan: Plan
    seconds: float
    ffd: FfdResult
    bound: float
    bound_seconds: float


def compare(name: str, pods: list[Pod], pool: NodePool, types: list[InstanceType],
            daemons: list[Pod]) -> Comparison:
    started = time.perf_counter()
    plan = solve(pods, [pool], {pool.name: types}, daemonset_pods=daemons)
    seconds = time.perf_counter() - started
    rows = type_rows(pool, types, daemons)
    packed = ffd(ffd_pods(pods), rows)
    started = time.perf_counter()
    bound = lp_bound(groups_of(pods), rows)
    return Comparison(name, len(pods), plan, seconds, packed, bound, time.perf_counter() - started)


def workload_a() -> Comparison:
    pool = on_demand_pool()
    types_by_pool, _labels = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))
    return compare("(a) 50 deployments + 5 DaemonSets, us-east-1 on-demand", mixed_deployments(), pool,
                   types_by_pool[pool.name], daemonsets())


def workload_b(count: int = 5_000) -> Comparison:
    pool = NodePool(name="default", requirements=Requirements(), node_class="default")
    return compare(f"(b) Karpenter's benchmark mix, {count:,} pods", karpenter_mix(count), pool,
                   benchmark_types(400), [])


TARGET = 1.05  # price over bound (issue #16)


def lines(c: Comparison) -> list[str]:
    placed = c.plan.pods - len(c.plan.unschedulable)
    ratio = c.plan.price_per_hour / c.bound
    return [
        f"  {c.name}: bound ${c.bound:,.2f}/h (HiGHS, {c.bound_seconds:.2f} s)",
        f"    nodescale ${c.plan.price_per_hour:,.2f}/h = {ratio:.3f} x bound "
        f"(target <= {TARGET:.2f}: {'met' if ratio <= TARGET else 'MISSED'})  "
        f"({len(c.plan.node_claims)} claims, {placed}/{c.pods} placed, "
        f"{c.pods / c.seconds:,.0f} pods/s)",
        f"    FFD       ${c.ffd.price:,.2f}/h = {c.ffd.price / c.bound:.3f} x bound  "
        f"({len(c.ffd.claims)} claims, {c.pods - c.ffd.unplaced}/{c.pods} placed)",
    ]


def run() -> Iterator[str]:
    yield "bound: price over the LP lower bound (HiGHS), nodescale and a Karpenter-like FFD packing"
    yield from lines(workload_a())
    yield from lines(workload_b())


if __name__ == "__main__":
    print_lines(run)
