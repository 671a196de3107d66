"""The bin-packer's orchestration: pending pods onto existing nodes first, then onto claims already
opened in this solve, then onto the cheapest new NodeClaims (Karpenter's scheduler.go order).

Pods are handled in groups of identical scheduling spec and priority, highest priority first (kube-scheduler's
queue order, so a limit or a capacity error leaves the important pods placed; preemption stays
kube-scheduler's), then largest requests first (Karpenter's queue.go); a group with required pod
affinity to other pods comes after those it may follow. For each group and
relaxation level the zone (and capacity-type) constraints are turned into per-domain quotas, then each
quota is packed: existing nodes and in-flight capacity, then claims opened earlier in this solve (only
when that is no dearer than a new node), then new claims of the instance type with the lowest price
per packed pod. A claim keeps every instance type that still holds its pods, cheapest first, so adding
pods narrows its options the way Karpenter narrows a NodeClaim's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod, TopologySpread
from ..model.requirements import Requirements
from . import otherkeys, reservations
from .boundgroups import movable_pods
from .capacity_split import keep_split
from .existingnode import NodeBin, NodeRoom, existing_bins
from .groups import Group, Level, group_pods
from .instance_selection import InstanceSelector, price_floor
from .nodeclaim import ClaimBin, Intersections, Narrowed, build_node_claims, cheapest_with_room
from .plan import MAX_INSTANCE_TYPES, ExistingNode, ExistingPlacement, Plan, Unschedulable, UnschedulableKind
from .reasons import Kind, Refusal, from_clauses, incompatibility, over_limits, topology_refusal
from .repack import repack
from .templates import (
    UNLIMITED,
    Fit,
    PoolTemplate,
    TypeOption,
    build_template,
    fit_count,
    fit_level,
    holds,
    largest_limits,
    min_values_of,
    nodes_within,
    pool_usage,
)
from .topology import HostRules, Topology, deal
from .topologygroup import capacity_type_quota, compile_level

_EPSILON = 1e-9
DRA_REASON = (
    "the pod has Dynamic Resource Allocation claims (spec.resourceClaims), which nodescale does not plan for; "
    "no node is launched for it (IGNORE_DRA_REQUESTS=true, Karpenter's default)"
)
_NO_PODS = (0,) * 64
# Pods not placed, each with why (None: the caller's fallback); a list, as one batch mixes requests.
Refused = list[tuple[Pod, Refusal | None]]


def solve(
    pods: Iterable[Pod],
    nodepools: Iterable[NodePool],
    instance_types_by_pool: Mapping[str, Sequence[InstanceType]],
    existing_nodes: Iterable[ExistingNode] = (),
    daemonset_pods: Iterable[Pod] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    limits_usage: Mapping[str, Mapping[str, int]] | None = None,
    node_labels_by_pool: Mapping[str, Mapping[str, str]] | None = None,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    repack: bool = True,
) -> Plan:
    """Plan where every pod goes. Pure: reads its arguments, returns a Plan.

    ``instance_types_by_pool`` maps a NodePool name to the types it may launch (the kubelet settings of
    its node class already applied). ``unavailable`` holds (type, zone, capacity type) offerings known to
    be out of capacity. ``limits_usage`` adds usage per pool beyond the existing nodes (e.g. claims not
    yet registered). ``node_labels_by_pool`` holds labels a pool's nodes get from the node class, such as
    the Windows build. ``namespace_labels`` holds each namespace's labels, for the namespaceSelector of
    pod (anti-)affinity terms; a namespace not in it is taken to have only its name label
    (``kubernetes.io/metadata.name``). ``repack`` runs nodescale's repack pass (repack.py) after the greedy
    packing: its Repack feature gate.
    """
    started = time.perf_counter()
    pools, nodes = list(nodepools), list(existing_nodes)
    # As Karpenter with IGNORE_DRA_REQUESTS (its default): a DaemonSet pod with resource claims adds no
    # overhead, and a pod with them is neither placed nor launched for, and never relaxed.
    daemons = [d for d in daemonset_pods if not d.has_dra_requirements]
    pods = list(pods)
    claiming = _with_dra(pods)
    if claiming:
        pods = [p for p in pods if not p.has_dra_requirements]
    ruled_out, labels = frozenset(unavailable), node_labels_by_pool or {}

    def schedule(pods: list[Pod], nodes: list[ExistingNode], types: Mapping[str, Sequence[InstanceType]]) -> Plan:
        return Scheduler(pods, pools, types, nodes, daemons, ruled_out, limits_usage or {}, labels,
                         namespace_labels or {}).run(repack)

    # Reserved capacity is shared out last: a claim past a reservation's free count falls back to
    # spot/on-demand, its pods planned again while other reservations still have room.
    plan = schedule(pods, nodes, instance_types_by_pool)
    plan.unschedulable.extend(Unschedulable(p, DRA_REASON, UnschedulableKind.DRA) for p in claiming)
    plan.pods += len(claiming)
    plan = reservations.share(plan, instance_types_by_pool, nodes, labels, schedule)
    # A pool's on-demand minimum (nodescale.io/on-demand-min-percent) narrows some of its new claims.
    plan.node_claims = keep_split(plan.node_claims, pools, nodes, instance_types_by_pool, ruled_out)
    plan.solve_seconds = time.perf_counter() - started
    return plan


class _Target(NamedTuple):
    """What a share of a group's pods is packed against at one level."""

    group: Group
    fits: list[Fit | str]  # one per pool template, in template order
    fit_by_pool: dict[int, Fit]  # the viable ones, by template index
    zones: frozenset[str] | None  # None: any zone
    capacity_types: frozenset[str] | None
    host: HostRules


class Scheduler:
    """One solve's state: the pool templates, the bins (existing nodes and new claims), topology counts."""

    def __init__(
        self,
        pods: list[Pod],
        nodepools: list[NodePool],
        types_by_pool: Mapping[str, Sequence[InstanceType]],
        nodes: list[ExistingNode],
        daemons: list[Pod],
        unavailable: frozenset[tuple[str, str, str]],
        limits_usage: Mapping[str, Mapping[str, int]],
        node_labels: Mapping[str, Mapping[str, str]],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.pods = pods
        self.dims = _dimensions(pods)
        self._zeros = (0,) * len(self.dims)
        self.groups = group_pods(pods)
        # The smallest request of each resource: a claim with less room than this is closed.
        self.smallest = tuple(min((p.requests.get(d, 0) for p in pods), default=0) for d in self.dims)
        bound_groups = group_pods([p for n in nodes for p in n.pods], first_id=len(self.groups))
        self.topology = Topology(self.groups + bound_groups, namespace_labels)
        pools = sorted(nodepools, key=lambda p: (-p.weight, p.name))
        usage = pool_usage(nodes, limits_usage)
        self.templates: list[PoolTemplate] = [
            build_template(
                i, pool, types_by_pool.get(pool.name, ()), self.dims, daemons,
                node_labels.get(pool.name, {}), unavailable, usage.get(pool.name, {}),
            )
            for i, pool in enumerate(pools)
        ]
        group_of = {id(p): g.id for g in bound_groups for p in g.pods}
        self.nodes: list[NodeBin] = existing_bins(nodes, self._vector, group_of, self.topology, self._room)
        self.claims: list[ClaimBin] = []
        self.topology.nodes = self.nodes
        self.topology.claims = self.claims
        self.open_claims: list[ClaimBin] = []
        # Closed claims in open_claims scanned since it was last pruned (see _add_to_claims).
        self._skipped = 0
        # Per set of hostname rules with no affinity: the open claims their cap has not ruled out yet.
        self._alive: dict[tuple, _Alive] = {}
        self.selector = InstanceSelector(self.dims, self.templates)
        # Whether a pool has limits: fixed for the solve (a pool without is never given any), so not
        # asked again for each run (#32 throughput).
        self._limited = any(t.remaining is not None for t in self.templates)
        self.unschedulable: list[Unschedulable] = []
        self._intersections = Intersections()
        self._min_values: dict[int, tuple[Requirements, tuple[tuple[str, int], ...]]] = {}

    def _vector(self, requests: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(map(requests.get, self.dims, self._zeros))  # requests.get(d, 0) for each, no generator

    def _room(self, allocatable: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(res.node_holds(allocatable, d) for d in self.dims)

    def run(self, repack: bool = True) -> Plan:
        order = sorted(
            self.groups,
            key=lambda g: (
                g.depends, -g.priority, -g.pods[0].requests.get(res.CPU, 0), -g.pods[0].requests.get(res.MEMORY, 0)
            ),
        )
        for group in order:
            pending = group.pods
            refused: Refused = []
            for level in group.levels:
                refused = self._place_level(group, level, pending)
                pending = [pod for pod, _ in refused]
                if not pending:
                    break
            self._refuse(refused)
        if repack:
            self._repack()
        existing = [ExistingPlacement(n.node.name, n.node.in_flight, n.pods) for n in self.nodes if n.pods]
        return Plan(build_node_claims(self.claims, self.dims), existing, self.unschedulable, len(self.pods))

    def _refuse(self, refused: Refused) -> None:
        """Each pod left with its own reason (pods of one group may differ in requests); a pod refused
        without one takes the group's last reason, and every level that fails says why."""
        last = next((why for _, why in reversed(refused) if why is not None), None)
        fallback = last or Refusal("", Kind.INCOMPATIBLE)
        for pod, why in refused:
            why = why or fallback
            self.unschedulable.append(Unschedulable(pod, why.text, why.kind, why.limited_pools))

    def _repack(self) -> None:
        """Pack the claims of each pool class again, pods mixed, where that is cheaper (repack.py)."""
        if len(self.claims) < 2:
            return
        bound, group_of, zonal = movable_pods(self.groups, self.topology.matcher)
        self.claims = repack(self.claims, bound, group_of, self.dims, zonal)

    # -- one group at one relaxation level -----------------------------------------------------------------

    def _fits_for(self, group: Group, level: Level) -> list[Fit | str]:
        # Groups with the same node requirements share one Fit, so claims they fill need no narrowing.
        key = (level.requirements, group.tolerations)
        out = []
        for template in self.templates:
            fit = template.fits.get(key)
            if fit is None:
                fit = template.fits[key] = fit_level(template, level.requirements, group.tolerations)
            out.append(fit)
        return out

    def _place_level(self, group: Group, level: Level, pods: list[Pod]) -> Refused:
        """Place what it can of ``pods``; the rest, and why, go back for the next level."""
        fits = self._fits_for(group, level)
        viable = [fit for fit in fits if isinstance(fit, Fit)]
        nodes = [node for node in self.nodes if node.open and node.accepts(group, level)]
        if not viable and not nodes:
            return _refused(pods, incompatibility(self.templates, fits))
        room = NodeRoom(nodes, self._vector(pods[0].requests))
        split = otherkeys.split(group, level, len(pods), viable, room, self.topology)
        if split is not None:
            return self._place_split(group, split, pods)
        constraints = compile_level(group, level, len(pods), viable, room, self.topology)
        zone_plan = constraints.zones
        if zone_plan.blocked:
            return _refused(pods, zone_plan.refusal)
        fit_by_pool = {fit.template.index: fit for fit in viable}
        if zone_plan.quota is None:
            target = _Target(group, fits, fit_by_pool, zone_plan.only, None, constraints.host)
            return self._place_in_zones(target, viable, nodes, pods, constraints.capacity_type_spread)
        left_over: list[Pod] = []
        shares = deal(pods, zone_plan.quota, left_over)
        failed = _refused(left_over, zone_plan.refusal)
        for share in shares:
            target = _Target(group, fits, fit_by_pool, frozenset([share.domain]), None, constraints.host)
            failed += self._place_in_zones(target, viable, nodes, share.pods, constraints.capacity_type_spread)
        return failed

    def _place_split(self, group: Group, split: otherkeys.Split, pods: list[Pod]) -> Refused:
        """Place a level split over the domains of another topology key: each share at its sub-level."""
        if split.quota is None:
            if split.only is None:
                return _refused(pods, split.refusal)
            return self._place_level(group, split.only, pods)
        left_over: list[Pod] = []
        shares = deal(pods, split.quota, left_over)
        failed = _refused(left_over, split.refusal)
        for share in shares:
            failed += self._place_level(group, split.levels[share.domain], share.pods)
        return failed

    def _place_in_zones(self, target: _Target, viable: list[Fit], nodes: list[NodeBin], pods: list[Pod],
                        spread: TopologySpread | None) -> Refused:
        """Pack pods in the target's zones, shared out over capacity types when a spread asks for that."""
        if spread is None:
            return self._pack(target, nodes, pods)
        quota = capacity_type_quota(target.group, spread, len(pods), viable, self.topology)
        failed: Refused = []
        left_over: list[Pod] = []
        for share in deal(pods, quota, left_over):
            failed += self._pack(target._replace(capacity_types=frozenset([share.domain])), nodes, share.pods)
        if left_over:
            why = f"topology spread on {wk.CAPACITY_TYPE} (maxSkew {spread.max_skew}) cannot be met"
            failed += _refused(left_over, topology_refusal(why))
        return failed

    def _pack(self, target: _Target, nodes: list[NodeBin], pods: list[Pod]) -> Refused:
        """Pack pods, a run of equal requests at a time, onto nodes in the target's domains and claims."""
        zones, capacity_types = target.zones, target.capacity_types
        nodes = [
            node for node in nodes
            if (zones is None or node.zone in zones) and (capacity_types is None or node.capacity_type in capacity_types)
        ]
        failed: Refused = []
        start = 0
        total = len(pods)
        while start < total:
            requests = pods[start].requests
            end = start + 1
            while end < total and pods[end].requests == requests:
                end += 1
            left, why = self._pack_run(target, nodes, pods[start:end], self._vector(requests))
            start = end
            if left:
                failed += _refused(left, why)  # a run's reason names its own requests
        return failed

    def _pack_run(self, target: _Target, nodes: list[NodeBin], run: list[Pod],
                  req: tuple[int, ...]) -> tuple[list[Pod], Refusal | None]:
        """Pods with equal requests: existing nodes, then claims already open, then new claims."""
        placed = self._add_to_existing(target, nodes, run, req) if nodes else 0
        if placed < len(run) and target.fit_by_pool and self.open_claims:
            placed = self._add_to_claims(target, run, placed, req)
        if placed == len(run):
            return [], None
        return self._add_to_new_claims(target, run, placed, req)

    # -- the three places a run of pods goes, in order -----------------------------------------------------

    def _add_to_existing(self, target: _Target, nodes: list[NodeBin], run: list[Pod], req: tuple[int, ...]) -> int:
        """Existing nodes and in-flight capacity take what they can; returns how many they took."""
        host = target.host
        constrained = host.constrained
        group_id = target.group.id
        record = self.topology.record
        placed = 0
        remaining = len(run)
        for node in nodes:
            taken = fit_count(node.alloc, node.used, req)
            if taken and constrained:
                taken = min(taken, host.cap(node.counts))
            if not taken:
                continue
            taken = min(taken, remaining)
            if node.volumes is not None:
                taken = node.volumes.take(run[placed : placed + taken])
                if not taken:
                    continue
            node.add(run[placed : placed + taken], req, taken)
            record(node.counts, node.zone, node.capacity_type, group_id, taken)
            if host.bootstrap:
                host.bootstrapped = True  # the group's first pods went here; the rest must follow them
            placed += taken
            remaining -= taken
            if not remaining:
                break
        return placed

    def _add_to_claims(self, target: _Target, run: list[Pod], placed: int, req: tuple[int, ...]) -> int:
        """Claims opened earlier in this solve take pods when that is no dearer than new capacity; returns
        how many of the run are placed."""
        group, fits, fit_by_pool, zones, capacity_types, host = target
        intersections = self._intersections
        remaining = len(run) - placed
        extended = len(req) > 3
        cpu, memory = req[0], req[1]
        constrained = host.constrained
        new_price: _NewPrice | None = None  # per pod on new capacity, asked for only when needed
        alive = self._alive_for(host) if constrained and not host.affinity else None
        claims = self.open_claims if alive is None else alive.claims
        skipped = 0
        for claim in claims:
            if not remaining:
                break
            if not claim.open:
                if alive is not None:
                    alive.dead.add(id(claim))
                skipped += 1
                continue
            fit = fit_by_pool.get(claim.template.index)
            if fit is None:
                continue
            room = claim.room
            if room[0] < cpu or room[1] < memory or room[2] < 1 or (extended and not holds(room, req)):
                continue
            # The checks below are pure; the cheapest come first. Room for one pod (above) means a
            # fit_count of at least one, so a single pod needs none.
            cap = host.cap(claim.counts) if constrained else UNLIMITED
            if not cap:
                if alive is not None:
                    alive.dead.add(id(claim))
                continue
            used = claim.used
            first = claim.options[0].alloc
            if first[0] - used[0] < cpu or first[1] - used[1] < memory or first[2] <= used[2]:
                # Only a dearer option has room. Narrowing never lowers prices, so if even the next
                # option's price spread over every pod that could fit beats new capacity, skip early.
                most = 1 if remaining == 1 else min(remaining, fit_count(room, _NO_PODS[: len(req)], req))
                new_price = new_price or self._new_price(target, req)
                if new_price.beaten_by((claim.next_price - claim.price) / most, remaining):
                    continue
            narrowed = claim.narrow(fit, zones, capacity_types, intersections)
            if narrowed is None:
                continue
            cheapest = cheapest_with_room(narrowed, used, req, extended)
            if cheapest is None:
                continue
            option, price = cheapest
            if remaining == 1:
                taken = 1
            else:
                taken = min(fit_count(option.alloc, used, req), remaining, cap)
                if claim.floor > 1:  # what keeps it spot-flexible
                    taken = min(taken, fit_count(room, _NO_PODS[: len(req)], req)) or 1
            # Growing this claim must cost no more per pod than new capacity; a tie goes to the claim
            # already open (fewer nodes, less daemon overhead).
            if price > claim.price + _EPSILON:
                new_price = new_price or self._new_price(target, req)
                if new_price.beaten_by((price - claim.price) / taken, remaining):
                    continue
            if not self._commit(claim, group, run[placed : placed + taken], req, taken, narrowed):
                continue
            if host.bootstrap:
                host.bootstrapped = True
            placed += taken
            remaining -= taken
        if alive is not None:
            alive.prune()
        elif skipped:
            # Closed claims are dropped once scanning them has cost as much as dropping them (#32
            # throughput: before, up to a quarter of the list stayed closed, and on Karpenter's mix 40,000
            # of the 55,000 claims scanned were closed ones). Dropping them changes no answer.
            self._skipped += skipped
            if self._skipped >= len(claims):
                self.open_claims = [claim for claim in claims if claim.open]
                self._skipped = 0
        return placed

    def _new_price(self, target: _Target, req: tuple[int, ...]) -> _NewPrice:
        _, fits, _, zones, capacity_types, host = target

        def ask(count: int) -> float:
            return self.selector.price_per_pod(fits, req, count, zones, capacity_types, host)

        # The answer may be put off only while nothing it reads can change in the meantime: no pool
        # limits (a commit changes what is left) and no hostname affinity (a commit bootstraps it).
        pure = not host.affinity and not self._limited
        return _NewPrice(ask, price_floor(fits, req) if pure else None)

    def _alive_for(self, host: HostRules) -> _Alive:
        """The open claims not yet ruled out for these hostname rules, claims opened since last asked
        added at the end (creation order, as ``open_claims`` keeps them)."""
        key = (tuple(host.spreads), tuple(host.anti), host.inverse)
        alive = self._alive.get(key)
        if alive is None:
            alive = self._alive[key] = _Alive()
        claims = self.claims
        if alive.seen < len(claims):
            alive.claims.extend(claim for claim in claims[alive.seen:] if claim.open)
            alive.seen = len(claims)
        return alive

    def _add_to_new_claims(self, target: _Target, run: list[Pod], placed: int,
                           req: tuple[int, ...]) -> tuple[list[Pod], Refusal | None]:
        """New claims for the rest of the run, as many as its pods need; returns what is left, and why."""
        host = target.host
        remaining = len(run) - placed
        while remaining:
            choice = self.selector.best_new(target.fits, req, remaining, target.zones, target.capacity_types, host)
            if isinstance(choice, Refusal):
                return run[placed:], choice
            per_node = choice.pods_per_node
            count = remaining // per_node  # the choice never takes more pods than asked, so at least one
            options = choice.options[:MAX_INSTANCE_TYPES]
            template = choice.fit.template
            reserve = None
            if template.remaining is not None:
                reserve = largest_limits(options)
                count = min(count, nodes_within(reserve, template.remaining))
            if count <= 0:
                return run[placed:], from_clauses([over_limits(template.name)])
            if host.affinity:
                count = 1
                host.bootstrapped = True
            for _ in range(count):
                claim = self._open_claim(choice.fit, choice.zones, choice.capacity_types, options, reserve)
                self._commit(claim, target.group, run[placed : placed + per_node], req, per_node, claim.as_is)
                placed += per_node
                remaining -= per_node
            if host.affinity and remaining:
                why = "pod affinity on kubernetes.io/hostname: the pods do not fit on one node"
                return run[placed:], topology_refusal(why)
        return [], None

    # -- bookkeeping ---------------------------------------------------------------------------------------

    def _open_claim(self, fit: Fit, zones: frozenset[str], capacity_types: frozenset[str],
                    options: list[TypeOption], reserve: tuple[int, ...] | None) -> ClaimBin:
        claim = ClaimBin(fit, zones, capacity_types, options, len(self.dims))
        if reserve is not None:
            claim.reserve(reserve)
            self.selector.forget()
        self.claims.append(claim)
        self.open_claims.append(claim)
        return claim

    def _commit(self, claim: ClaimBin, group: Group, pods: list[Pod], req: tuple[int, ...], added: int,
                narrowed: Narrowed) -> bool:
        """Put pods on a claim (False, and no change, when it cannot take them as ``narrowed``)."""
        min_values = self._min_values_of(narrowed.requirements)
        if not claim.commit(group.id, pods, req, added, narrowed, min_values, self.smallest, self.topology):
            return False
        if claim.template.remaining is not None and claim.update_reservation():
            self.selector.forget()
        return True

    def _min_values_of(self, requirements: Requirements) -> tuple[tuple[str, int], ...]:
        hit = self._min_values.get(id(requirements))
        if hit is None:
            # Holding the requirements keeps their id unique for the solve.
            hit = self._min_values[id(requirements)] = (requirements, min_values_of(requirements))
        return hit[1]


class _NewPrice:
    """What a pod of a run costs on new capacity, asked of the selector at most once per run.

    Before, it was asked the first time a claim's growth had to be compared with it, for the pods of
    the run left then; most runs of Karpenter's mix ask it (#32 throughput: a fifth of the solve).
    Now a floor no new claim can beat (``price_floor``) settles a comparison the growth wins outright;
    the selector is asked only when the floor cannot, still for the pods left at the first comparison."""

    __slots__ = ("ask", "floor", "price", "count")

    def __init__(self, ask: Callable[[int], float], floor: float | None) -> None:
        self.ask = ask
        self.floor = floor  # None: no putting off (see Scheduler._new_price)
        self.price: float | None = None
        self.count = 0

    def beaten_by(self, per_pod: float, remaining: int) -> bool:
        """Whether ``per_pod`` is dearer than a pod on new capacity."""
        if not self.count:
            self.count = remaining  # the question as first put, as when it was asked there and then
        if self.price is None:
            if self.floor is not None and per_pod <= self.floor:
                return False
            self.price = self.ask(self.count)
        return per_pod > self.price + _EPSILON


class _Alive:
    """Open claims some hostname rules may still put pods on, in creation order.

    Without pod affinity, a claim's cap under hostname rules only falls as pods join it (a spread's
    count or an anti-affinity match only grows), and a closed claim stays closed: a claim once ruled
    out is never scanned again for the same rules. Before, every pod scanned every open claim, most of
    them full of its own group (#32 throughput)."""

    __slots__ = ("claims", "seen", "dead")

    def __init__(self) -> None:
        self.claims: list[ClaimBin] = []
        self.seen = 0  # how many of the solve's claims have been looked at
        self.dead: set[int] = set()  # ids of claims found ruled out in the last scan

    def prune(self) -> None:
        if self.dead:
            dead = self.dead
            claims = self.claims
            # The scan that found them ran from the front, and the claims it rules out are nearly all the
            # first few (the oldest, fullest): only the claims up to the last of them are filtered (#32
            # throughput: about 2 of 51 on average on Karpenter's mix).
            left = len(dead)
            end = len(claims) - 1
            for at, claim in enumerate(claims):
                if id(claim) in dead:
                    left -= 1
                    if not left:
                        end = at
                        break
            self.claims = [claim for claim in claims[: end + 1] if id(claim) not in dead] + claims[end + 1 :]
            dead.clear()


def _with_dra(pods: list[Pod]) -> list[Pod]:
    """The pods with Dynamic Resource Allocation claims. Replicas built from one template share their
    manifest: each manifest is read once (#32 throughput: 50,000 reads were a twentieth of the solve)."""
    seen: dict[int, bool] = {}  # by id of the manifest, which the pods hold for the whole solve
    out = []
    for pod in pods:
        claims = seen.get(id(pod.raw))
        if claims is None:
            claims = seen[id(pod.raw)] = pod.has_dra_requirements
        if claims:
            out.append(pod)
    return out


def _refused(pods: Sequence[Pod], why: Refusal | None) -> Refused:
    return [(pod, why) for pod in pods]


def _dimensions(pods: Sequence[Pod]) -> tuple[str, ...]:
    """The resources the solve compares: cpu, memory and pods first, then any other a pod requests."""
    first = (res.CPU, res.MEMORY, res.PODS)
    requested = set(first)
    for pod in pods:
        requested.update(pod.requests)
    return first + tuple(sorted(requested - set(first)))
