"""The bin-packer: pending pods onto existing nodes first, then onto the cheapest new NodeClaims.

Pods are handled in groups of identical scheduling spec, largest requests first. For each group and
relaxation level the zone (and capacity-type) constraints are turned into per-domain quotas, then each
quota is packed: existing nodes and in-flight capacity, then claims opened earlier in this solve (only
when that is no dearer than a new node), then new claims of the instance type with the lowest price
per packed pod. A claim keeps every instance type that still holds its pods, cheapest first, so adding
pods narrows its options the way Karpenter narrows a NodeClaim's.

Topology keys other than zone, hostname and capacity type are not modelled (such constraints are
ignored), and pods counted for a zone are those on nodes or claims already pinned to one zone.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod, PodAffinityTerm
from ..model.requirements import Requirement, Requirements
from ..model.taints import tolerates_all
from .groups import Group, Level, group_pods
from .plan import MAX_INSTANCE_TYPES, ExistingNode, ExistingPlacement, NodeClaim, Plan, Unschedulable
from .templates import (
    Fit,
    PoolTemplate,
    TypeOption,
    build_template,
    fit_level,
    labels_satisfy,
    min_values_met,
    min_values_of,
    truncate,
)
from .topology import HostRules, Matcher, count, spread_quota

_INF = 1 << 62
_ZERO = (0,) * 64


def solve(
    pods: Iterable[Pod],
    nodepools: Iterable[NodePool],
    instance_types_by_pool: Mapping[str, Sequence[InstanceType]],
    existing_nodes: Iterable[ExistingNode] = (),
    daemonset_pods: Iterable[Pod] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    limits_usage: Mapping[str, Mapping[str, int]] | None = None,
    node_labels_by_pool: Mapping[str, Mapping[str, str]] | None = None,
) -> Plan:
    """Plan where every pod goes. Pure: reads its arguments, returns a Plan.

    ``instance_types_by_pool`` maps a NodePool name to the types it may launch (the kubelet settings of
    its node class already applied). ``unavailable`` holds (type, zone, capacity type) offerings known to
    be out of capacity. ``limits_usage`` adds usage per pool beyond the existing nodes (e.g. claims not
    yet registered). ``node_labels_by_pool`` holds labels a pool's nodes get from the node class, such as
    the Windows build.
    """
    started = time.perf_counter()
    solver = _Solver(
        list(pods),
        list(nodepools),
        instance_types_by_pool,
        list(existing_nodes),
        list(daemonset_pods),
        frozenset(unavailable),
        limits_usage or {},
        node_labels_by_pool or {},
    )
    plan = solver.run()
    plan.solve_seconds = time.perf_counter() - started
    return plan


class _Bin:
    """An existing node or a claim being filled."""

    __slots__ = ("id", "node", "tpl", "reqs", "zones", "cts", "opts", "used", "counts", "pods", "price",
                 "reserved", "alloc", "narrow_cache", "open", "room", "next_price")

    def __init__(self, bid: int) -> None:
        self.id = bid
        self.node: ExistingNode | None = None
        self.tpl: PoolTemplate | None = None
        self.reqs: Requirements | None = None
        self.zones: frozenset[str] = frozenset()
        self.cts: frozenset[str] = frozenset()
        self.opts: list[TypeOption] = []
        self.used: list[int] = []
        self.counts: dict[int, int] = {}
        self.pods: list[Pod] = []
        self.price = 0.0
        self.next_price = 0.0  # of the second-cheapest option: the least any upgrade costs
        self.reserved: tuple[int, ...] = ()
        self.alloc: tuple[int, ...] = ()  # an existing node's allocatable
        self.narrow_cache: dict[tuple, tuple | None] = {}
        self.open = True
        self.room: tuple[int, ...] = ()  # the most any option has left, per resource

    @property
    def zone(self) -> str | None:
        return next(iter(self.zones)) if len(self.zones) == 1 else None

    @property
    def ct(self) -> str | None:
        return next(iter(self.cts)) if len(self.cts) == 1 else None


def _fit_count(alloc: Sequence[int], used: Sequence[int], req: Sequence[int]) -> int:
    k = _INF
    for a, u, r in zip(alloc, used, req, strict=True):
        if r:
            q = (a - u) // r
            if q < k:
                k = q
    return k if k > 0 else 0


def _fits(alloc: Sequence[int], used: Sequence[int]) -> bool:
    # A plain loop: all() over a generator costs twice as much in this hot path.
    for a, u in zip(alloc, used, strict=True):  # noqa: SIM110
        if u > a:
            return False
    return True


class _Solver:
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
    ) -> None:
        self.pods = pods
        dims = {res.CPU, res.MEMORY, res.PODS}
        for p in pods:
            dims.update(p.requests)
        self.dims: tuple[str, ...] = (res.CPU, res.MEMORY, res.PODS) + tuple(
            sorted(dims - {res.CPU, res.MEMORY, res.PODS})
        )
        self.groups = group_pods(pods)
        self.min_req = tuple(min((p.requests.get(d, 0) for p in pods), default=0) for d in self.dims)
        bound = [p for n in nodes for p in n.pods]
        self.bound_groups = group_pods(bound, first_id=len(self.groups))
        self.matcher = Matcher(self.groups + self.bound_groups)
        self.zone_counts: dict[str, dict[int, int]] = {}
        self.ct_counts: dict[str, dict[int, int]] = {}
        self.bins: list[_Bin] = []
        self.claims: list[_Bin] = []
        self.open_claims: list[_Bin] = []
        self.anti_owners: list[tuple[int, PodAffinityTerm, str]] = []  # (group, term, namespace)
        self.unschedulable: list[Unschedulable] = []
        self._candidate_cache: dict[tuple, tuple] = {}
        self._intersect_cache: dict[tuple[int, int], tuple] = {}
        self._offered_cache: dict[tuple, tuple[list[str], list[str]]] = {}
        self._mins: dict[int, tuple] = {}
        self._limits_version = 0
        self._best_memo: tuple | None = None

        usage: dict[str, dict[str, int]] = {}
        for pool_name, extra in limits_usage.items():
            usage[pool_name] = dict(extra)
        for n in nodes:
            if n.nodepool:
                u = usage.setdefault(n.nodepool, {})
                for k, v in (n.capacity or n.allocatable).items():
                    u[k] = u.get(k, 0) + v
                u["nodes"] = u.get("nodes", 0) + 1
        pools = sorted(nodepools, key=lambda p: (-p.weight, p.name))
        self.templates = [
            build_template(
                i, p, types_by_pool.get(p.name, ()), self.dims, daemons,
                node_labels.get(p.name, {}), unavailable, usage.get(p.name, {}),
            )
            for i, p in enumerate(pools)
        ]
        self._index_bound(nodes)

    # -- setup ---------------------------------------------------------------------------------------------

    def _vec(self, requests: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(requests.get(d, 0) for d in self.dims)

    def _index_bound(self, nodes: list[ExistingNode]) -> None:
        group_of = {id(p): g for g in self.bound_groups for p in g.pods}
        for g in self.groups + self.bound_groups:
            for t in g.sample.affinity_terms:
                if t.anti and not t.weight:
                    self.anti_owners.append((g.id, t, g.namespace))
        for n in nodes:
            b = _Bin(len(self.bins))
            b.node = n
            b.alloc = self._vec(n.allocatable)
            used = [0] * len(self.dims)
            for p in n.pods:
                if p.finished:
                    continue
                for j, v in enumerate(self._vec(p.requests)):
                    used[j] += v
                gid = group_of[id(p)].id
                b.counts[gid] = b.counts.get(gid, 0) + 1
            b.used = used
            zone = n.labels.get(wk.ZONE)
            ct = n.labels.get(wk.CAPACITY_TYPE)
            b.zones = frozenset([zone]) if zone else frozenset()
            b.cts = frozenset([ct]) if ct else frozenset()
            b.open = not n.unschedulable
            self.bins.append(b)
            for gid, k in b.counts.items():
                self._count_domains(zone, ct, gid, k)

    # -- main loop -----------------------------------------------------------------------------------------

    def run(self) -> Plan:
        order = sorted(
            self.groups,
            key=lambda g: (g.depends, -g.pods[0].requests.get(res.CPU, 0), -g.pods[0].requests.get(res.MEMORY, 0)),
        )
        for group in order:
            pending = group.pods
            reason = ""
            for level in group.levels:
                pending, reason = self._place_level(group, level, pending)
                if not pending:
                    break
            for pod in pending:
                self.unschedulable.append(Unschedulable(pod, reason))
        return self._plan()

    def _fits_for(self, group: Group, level: Level) -> list[Fit | str]:
        # Groups with the same node requirements share one Fit, so claims they fill need no narrowing.
        key = (level.requirements, group.tolerations)
        out = []
        for tpl in self.templates:
            fit = tpl.fits.get(key)
            if fit is None:
                fit = tpl.fits[key] = fit_level(tpl, level.requirements, group.tolerations)
            out.append(fit)
        return out

    def _place_level(self, group: Group, level: Level, pods: list[Pod]) -> tuple[list[Pod], str]:
        fits = self._fits_for(group, level)
        viable = [f for f in fits if isinstance(f, Fit)]
        node_bins = [b for b in self.bins if b.open and self._node_ok(b, group, level)]
        if not viable and not node_bins:
            return pods, self._incompatibility(fits)
        ns = frozenset([group.namespace])
        zone_spreads = [s for s in level.spreads if s.topology_key == wk.ZONE]
        ct_spreads = [s for s in level.spreads if s.topology_key == wk.CAPACITY_TYPE]
        host = HostRules()
        for s in level.spreads:
            if s.topology_key == wk.HOSTNAME:
                ids = self.matcher.match(s.selector, ns)
                host.spreads.append((ids, s.max_skew, group.id in ids))
        zone_terms = []
        for t in level.affinity:
            ids = self.matcher.match(t.selector, t.namespaces or ns)
            if t.topology_key == wk.HOSTNAME:
                if t.anti:
                    host.anti.append((ids, group.id in ids))
                else:
                    host.affinity.append(ids)
                    if group.id in ids and not self._present_anywhere(ids):
                        host.bootstrap = True
            elif t.topology_key == wk.ZONE:
                zone_terms.append((t, ids))
        inverse_host, inverse_zone = self._inverse_anti(group)
        host.inverse = inverse_host

        # Zone quotas: which zones the level may use, and how many pods each takes.
        zone_universe = set()
        for f in viable:
            zone_universe |= f.zones
        zone_universe.update(b.zone for b in node_bins if b.zone)
        zone_quota: dict[str, int] | None = None
        zone_only: frozenset[str] | None = None
        allowed = set(zone_universe) - inverse_zone
        per_zone_cap: dict[str, int] = {}
        why = f"{wk.ZONE}: the zones are taken by pods with anti-affinity to these pods" if inverse_zone else ""
        for t, ids in zone_terms:
            present = {z for z in zone_universe if count(self.zone_counts.get(z, {}), ids)}
            if t.anti:
                allowed -= present
                if group.id in ids:
                    for z in allowed:
                        per_zone_cap[z] = 1
                why = why or f"pod anti-affinity on {wk.ZONE}: every allowed zone already has a matching pod"
            else:
                if present:
                    allowed &= present
                elif group.id in ids:
                    chosen = self._cheapest_zone(viable, allowed, node_bins)
                    allowed = {chosen} if chosen else set()
                else:
                    allowed = set()
                why = why or f"pod affinity on {wk.ZONE}: no allowed zone has a matching pod"
        if zone_spreads:
            # Zones excluded by affinity still count toward the global minimum, as in kube-scheduler.
            cap = {z: (per_zone_cap.get(z, len(pods)) if z in allowed else 0) for z in zone_universe}
            # Several zone spreads: each one's quota caps the others (the last one decides within the caps).
            for s in reversed(zone_spreads):
                ids = self.matcher.match(s.selector, ns)
                counts = {z: count(self.zone_counts.get(z, {}), ids) for z in zone_universe}
                zone_quota = spread_quota(
                    counts, zone_universe, len(pods), s.max_skew, s.min_domains, group.id in ids, cap
                )
                cap = zone_quota
            why = f"topology spread on {wk.ZONE} (maxSkew {zone_spreads[0].max_skew}) cannot be met"
        elif per_zone_cap:
            zone_quota = {z: per_zone_cap[z] for z in allowed}
        elif zone_terms or inverse_zone:
            zone_only = frozenset(allowed)
            if not zone_only:
                return pods, why
        if zone_quota is not None and not any(zone_quota.values()):
            return pods, why

        chunks: list[tuple[list[Pod], str | None]] = []
        leftover: list[Pod] = []
        if zone_quota is None:
            chunks.append((pods, None))
        else:
            chunks.extend(_deal(pods, zone_quota, leftover))
        failed: list[Pod] = list(leftover)
        reason = why if leftover else ""
        for chunk_pods, zone in chunks:
            zones = frozenset([zone]) if zone else zone_only
            if ct_spreads:
                s = ct_spreads[0]
                ids = self.matcher.match(s.selector, ns)
                ct_universe = set()
                for f in viable:
                    ct_universe |= f.cts
                counts = {c: count(self.ct_counts.get(c, {}), ids) for c in ct_universe}
                quota = spread_quota(counts, ct_universe, len(chunk_pods), s.max_skew, s.min_domains, group.id in ids)
                ct_left: list[Pod] = []
                for sub, ct in _deal(chunk_pods, quota, ct_left):
                    f, r = self._pack(group, fits, node_bins, sub, zones, frozenset([ct]), host)
                    failed += f
                    reason = r or reason
                if ct_left:
                    failed += ct_left
                    reason = f"topology spread on {wk.CAPACITY_TYPE} (maxSkew {s.max_skew}) cannot be met"
            else:
                f, r = self._pack(group, fits, node_bins, chunk_pods, zones, None, host)
                failed += f
                reason = r or reason
        return failed, reason

    # -- constraints ---------------------------------------------------------------------------------------

    def _node_ok(self, b: _Bin, group: Group, level: Level) -> bool:
        n = b.node
        if n is None:
            return False
        if tolerates_all(group.tolerations, n.taints) is not None:
            return False
        return labels_satisfy(n.labels, level.requirements)

    def _present_anywhere(self, ids: frozenset[int]) -> bool:
        return any(count(b.counts, ids) for b in self.bins)

    def _inverse_anti(self, group: Group) -> tuple[frozenset[int], set[str]]:
        """Groups already placed whose required anti-affinity selects this group, and zones they hold."""
        host: set[int] = set()
        zones: set[str] = set()
        for gid, term, ns in self.anti_owners:
            ids = self.matcher.match(term.selector, term.namespaces or frozenset([ns]))
            if group.id not in ids:
                continue
            if term.topology_key == wk.HOSTNAME:
                host.add(gid)
            elif term.topology_key == wk.ZONE:
                zones.update(z for z, c in self.zone_counts.items() if c.get(gid))
        return frozenset(host), zones

    def _cheapest_zone(self, viable: list[Fit], allowed: set[str], node_bins: list[_Bin]) -> str | None:
        best: tuple[float, str] | None = None
        for f in viable:
            for t in f.types[:5]:
                for z, c, p in t.offers:
                    if z in allowed and c in f.cts and (best is None or (p, z) < best):
                        best = (p, z)
        if best is not None:
            return best[1]
        zones = sorted(b.zone for b in node_bins if b.zone in allowed)
        return zones[0] if zones else None

    # -- packing -------------------------------------------------------------------------------------------

    def _pack(
        self, group: Group, fits: list[Fit | str], node_bins: list[_Bin], pods: list[Pod], zones: frozenset[str] | None, cts: frozenset[str] | None, host: HostRules,
    ) -> tuple[list[Pod], str]:
        failed: list[Pod] = []
        reason = ""
        fit_by_pool = {f.tpl.index: f for f in fits if isinstance(f, Fit)}
        bins = [b for b in node_bins if (zones is None or b.zone in zones) and (cts is None or b.ct in cts)]
        i = 0
        n = len(pods)
        while i < n:
            req_map = pods[i].requests
            j = i + 1
            while j < n and pods[j].requests == req_map:
                j += 1
            run = pods[i:j]
            i = j
            left, why = self._pack_run(group, fits, fit_by_pool, bins, run, self._vec(req_map), zones, cts, host)
            if left:
                failed += left
                reason = why
        return failed, reason

    def _pack_run(
        self, group: Group, fits: list[Fit | str], fit_by_pool: dict[int, Fit], node_bins: list[_Bin],
        run: list[Pod], req: tuple[int, ...], zones: frozenset[str] | None, cts: frozenset[str] | None,
        host: HostRules,
    ) -> tuple[list[Pod], str]:
        pos = 0
        c = len(run)
        extended = len(req) > 3
        r0, r1 = req[0], req[1]
        constrained = bool(host.spreads or host.anti or host.affinity or host.inverse)
        # 1. existing nodes and in-flight capacity
        for b in node_bins:
            k = _fit_count(b.alloc, b.used, req)
            if k and constrained:
                k = min(k, host.cap(b.counts))
            if k:
                k = min(k, c)
                self._commit_node(b, group, run[pos : pos + k], req, k)
                if host.bootstrap:
                    host.bootstrapped = True  # the group's first pods went here; the rest must follow them
                pos += k
                c -= k
                if not c:
                    return [], ""
        # 2. claims opened earlier in this solve, when that is no dearer than new capacity
        best_pp: float | None = None
        if fit_by_pool and self.open_claims:
            claims = self.open_claims
            for b in claims:
                if not c:
                    break
                if not b.open:
                    continue
                fit = fit_by_pool.get(b.tpl.index)
                if fit is None:
                    continue
                room = b.room
                if room[0] < r0 or room[1] < r1 or room[2] < 1 or (extended and not _fits(room, req)):
                    continue
                used = b.used
                first = b.opts[0].alloc
                if first[0] - used[0] < r0 or first[1] - used[1] < r1 or first[2] <= used[2]:
                    # Only a dearer option has room. Narrowing never lowers prices, so if even the next
                    # option's price spread over every pod that could fit beats new capacity, skip early.
                    if best_pp is None:
                        best_pp = self._best_pp(fits, req, c, zones, cts, host)
                    most = min(c, _fit_count(room, _ZERO[: len(req)], req))
                    if (b.next_price - b.price) / most > best_pp + 1e-9:
                        continue
                narrowed = self._narrow(b, fit, zones, cts)
                if narrowed is None:
                    continue
                nreqs, nzones, ncts, opts, base = narrowed
                cap = host.cap(b.counts) if constrained else _INF
                if not cap:
                    continue
                # The cheapest option with room for one more pod (options keep price order unless narrowed).
                u0, u1, u2 = used[0], used[1], used[2]
                best_t = None
                best_price = 0.0
                for i, t in enumerate(opts):
                    if base is not None and best_t is not None and base[i] >= best_price:
                        break  # narrowing only raises prices: nothing further on is cheaper
                    a = t.alloc
                    if a[0] - u0 < r0 or a[1] - u1 < r1 or a[2] <= u2:
                        continue
                    if extended and not _fit_count(a, used, req):
                        continue
                    price = t.price(nzones, ncts)
                    if best_t is None or price < best_price:
                        best_t, best_price = t, price
                        if base is None:
                            break
                if best_t is None:
                    continue
                k = min(_fit_count(best_t.alloc, used, req), c, cap)
                chosen = None
                if best_price <= b.price + 1e-9:
                    chosen = k
                else:
                    if best_pp is None:
                        best_pp = self._best_pp(fits, req, c, zones, cts, host)
                    # Growing this claim must cost no more per pod than new capacity; a tie goes to the
                    # claim already open (fewer nodes, less daemon overhead).
                    if (best_price - b.price) / k <= best_pp + 1e-9:
                        chosen = k
                if chosen is None:
                    continue
                k = chosen
                if not self._commit_claim(
                    b, group, run[pos : pos + k], req, k, nreqs, nzones, ncts, opts, base is None
                ):
                    continue
                if host.bootstrap:
                    host.bootstrapped = True
                pos += k
                c -= k
            if len(claims) > 64 and sum(1 for b in claims if not b.open) * 4 > len(claims):
                self.open_claims = [b for b in claims if b.open]  # drop closed ones now and then, not every run
            if not c:
                return [], ""
        # 3. new claims
        while c:
            choice = self._best_new(fits, req, c, zones, cts, host)
            if isinstance(choice, str):
                return run[pos:], choice
            fit, k, opts, nzones, ncts = choice
            full = c // k  # k never exceeds c, so at least one
            opts = opts[:MAX_INSTANCE_TYPES]
            tpl = fit.tpl
            reserve = None
            if tpl.remaining is not None:
                reserve = tuple(max(v) for v in zip(*(t.limit_vec for t in opts), strict=True))
                for r, left in zip(reserve, tpl.remaining, strict=True):
                    if r:
                        full = min(full, left // r)
            if full <= 0:
                return run[pos:], f"incompatible with nodepool {tpl.name}: it would exceed the nodepool's limits"
            if host.affinity:
                full = 1
                host.bootstrapped = True
            for _ in range(full):
                b = self._new_claim(fit, nzones, ncts, opts, reserve)
                self._commit_claim(b, group, run[pos : pos + k], req, k, b.reqs, b.zones, b.cts, b.opts)
                pos += k
                c -= k
            if host.affinity and c:
                return run[pos:], "pod affinity on kubernetes.io/hostname: the pods do not fit on one node"
        return [], ""

    def _narrow(self, b: _Bin, fit: Fit, zones: frozenset[str] | None, cts: frozenset[str] | None):
        """The claim's requirements, zones, capacity types and options if it also took pods of ``fit``,
        and, when narrowing may have changed their order, their prices before it; None when the claim
        cannot take them at all."""
        nzones = b.zones & fit.zones if zones is None else b.zones & fit.zones & zones
        ncts = b.cts & fit.cts if cts is None else b.cts & fit.cts & cts
        same_reqs = b.reqs is fit.requirements
        if same_reqs and nzones == b.zones and ncts == b.cts:
            return b.reqs, nzones, ncts, b.opts, None
        if not nzones or not ncts:
            return None
        key = (id(fit), nzones, ncts)
        hit = b.narrow_cache.get(key, False)
        if hit is not False:
            return hit
        out = None
        nreqs = b.reqs if same_reqs else self._intersect(b.reqs, fit.requirements)
        if nreqs is not None:
            names = None if same_reqs else fit.type_names
            opts = [
                t for t in b.opts
                if (names is None or t.name in names) and t.price(nzones, ncts) is not None
            ]
            if opts:
                # Prices before narrowing, ascending: a floor under each option's narrowed price.
                base = [t.price(b.zones, b.cts) for t in opts]
                out = (nreqs, nzones, ncts, opts, base)
        b.narrow_cache[key] = out
        return out

    def _intersect(self, a: Requirements, b: Requirements) -> Requirements | None:
        """``a`` and ``b`` together, or None when nothing meets both; many claims share both objects."""
        key = (id(a), id(b))
        hit = self._intersect_cache.get(key)
        if hit is None:
            both = a.intersect(b)
            hit = self._intersect_cache[key] = (a, b, None if both.empty_keys() else both)
        return hit[2]

    def _candidates(self, fit: Fit, zones: frozenset[str] | None, cts: frozenset[str] | None):
        nzones = fit.zones if zones is None else fit.zones & zones
        ncts = fit.cts if cts is None else fit.cts & cts
        if not nzones or not ncts:
            return None
        if nzones == fit.zones and ncts == fit.cts:
            return fit.types, nzones, ncts
        key = (id(fit), nzones, ncts)
        hit = self._candidate_cache.get(key)
        if hit is None:
            priced = [(p, t.name, t) for t in fit.types if (p := t.price(nzones, ncts)) is not None]
            priced.sort(key=lambda x: (x[0], x[1]))
            hit = self._candidate_cache[key] = ([t for _, _, t in priced], nzones, ncts)
        return hit

    def _best_new(self, fits: list[Fit | str], req: tuple[int, ...], c: int, zones, cts, host: HostRules):
        """The pool (highest weight first) and instance type with the lowest price per packed pod."""
        # A run asks twice with the same question (to price upgrades, then to launch): answer once.
        key = (id(fits), req, c, zones, cts, self._limits_version, host.new_node_cap())
        memo = self._best_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        choice = self._best_new_uncached(fits, req, c, zones, cts, host)
        self._best_memo = (key, choice, fits)  # holding fits keeps its id unique
        return choice

    def _best_new_uncached(self, fits: list[Fit | str], req: tuple[int, ...], c: int, zones, cts, host: HostRules):
        cap = host.new_node_cap()
        if not cap:
            if host.affinity:
                return "pod affinity on kubernetes.io/hostname: no node has a matching pod"
            return "topology constraints on kubernetes.io/hostname cannot be met"
        want = min(c, cap)
        clauses: list[str] = []
        best = None
        best_weight = None
        zero = (0,) * len(req)
        for f in fits:
            if isinstance(f, str):
                continue
            tpl = f.tpl
            if best is not None and tpl.weight < best_weight:
                break
            cand = self._candidates(f, zones, cts)
            if cand is None:
                clauses.append(f"incompatible with nodepool {tpl.name}: no offering in the zones and capacity "
                               f"types the pods need")
                continue
            types, nzones, ncts = cand
            remaining = tpl.remaining
            pool_best = None
            rest_memo: dict[int, float] = {}

            def rest_cost(n: int, types=types, nzones=nzones, ncts=ncts, remaining=remaining,
                          memo=rest_memo) -> float:
                if n not in memo:
                    memo[n] = next(
                        (
                            t.price(nzones, ncts)
                            for t in types
                            if _fit_count(t.alloc, zero, req) >= n
                            and (remaining is None or all(lv <= r for lv, r in zip(t.limit_vec, remaining, strict=True)))
                        ),
                        float("inf"),
                    )
                return memo[n]

            limited = False
            # No type holds more pods than the largest of each resource would: a bound for stopping early.
            most = min(want, _fit_count(f.max_alloc, zero, req)) or 1
            for t in types:
                price = t.price(nzones, ncts)
                if pool_best is not None and price > pool_best[0] * most + 1e-9:
                    break  # types come cheapest first: none further on can beat (or tie) the best per pod
                if remaining is not None and any(lv > r for lv, r in zip(t.limit_vec, remaining, strict=True)):
                    limited = True
                    continue
                k = _fit_count(t.alloc, zero, req)
                if not k:
                    continue
                k = min(k, want)
                # What covering the whole group costs, per pod: full nodes of this type, and the rest on
                # the cheapest type that holds the rest. A type that would leave most of a last node empty
                # pays for that here, so 5 pods take one node that holds 5 rather than 3 + 2 for the same
                # money, while 6 still take a node of 5 plus a small one when that is cheaper.
                rest = want % k
                score = ((want // k) * price + (rest_cost(rest) if rest else 0.0)) / want
                if host.affinity and k < want:
                    score *= want  # the group must share one node: a type that holds it all comes first
                # On a tie the type holding more pods wins: fewer nodes for the same price.
                if pool_best is None or score < pool_best[0] - 1e-12 or (
                    score <= pool_best[0] + 1e-12 and k > pool_best[1]
                ):
                    pool_best = (score, k, t)
            if pool_best is None:
                if limited:
                    clauses.append(f"incompatible with nodepool {tpl.name}: it would exceed the nodepool's limits")
                else:
                    clauses.append(f"incompatible with nodepool {tpl.name}: no instance type has room for "
                                   f"{self._describe_request(req)}")
                continue
            if best is None or pool_best[0] < best[0]:
                k = pool_best[1]
                mins = f.min_values
                fitting = _fitting(types, req, k, remaining, None if mins else MAX_INSTANCE_TYPES)
                # minValues: fewer pods per node leaves more types, until enough distinct values remain.
                while mins and k > 1 and not min_values_met(fitting, mins):
                    k -= 1
                    fitting = _fitting(types, req, k, remaining, None)
                if mins and not min_values_met(fitting, mins):
                    clauses.append(f"incompatible with nodepool {tpl.name}: too few instance types fit to meet "
                                   f"minValues ({', '.join(f'{key} {n}' for key, n in mins)})")
                    continue
                if remaining is not None:
                    # Limits count a claim's largest option: keep none larger than the chosen type, so the
                    # claim reserves no more than it needs.
                    chosen = pool_best[2].limit_vec
                    fitting = [t for t in fitting if all(a <= b for a, b in zip(t.limit_vec, chosen, strict=True))]
                fitting = truncate(fitting, mins, MAX_INSTANCE_TYPES)
                best = (pool_best[0] * pool_best[1] / k, f, k, fitting, nzones, ncts)
                best_weight = tpl.weight
        if best is None:
            return self._incompatibility(fits, clauses)
        return best[1], best[2], best[3], best[4], best[5]

    def _best_pp(self, fits, req, c, zones, cts, host) -> float:
        choice = self._best_new(fits, req, c, zones, cts, host)
        if isinstance(choice, str):
            return float("inf")
        fit, k, opts, nzones, ncts = choice
        return opts[0].price(nzones, ncts) / k

    def _describe_request(self, req: tuple[int, ...]) -> str:
        shown = {d: v for d, v in zip(self.dims, req, strict=True) if v and d != res.PODS}
        return ", ".join(f"{k}={v}" for k, v in res.format_resources(shown).items()) or "one more pod"

    def _incompatibility(self, fits: list[Fit | str], extra: list[str] | None = None) -> str:
        clauses = [
            f"incompatible with nodepool {tpl.name}: {f}"
            for tpl, f in zip(self.templates, fits, strict=True)
            if isinstance(f, str)
        ]
        clauses += [c for c in extra or [] if c]
        if not self.templates:
            return "no nodepool is defined and no existing node can take it"
        return "; ".join(clauses) or "no node can take it"

    # -- bookkeeping ---------------------------------------------------------------------------------------

    def _new_claim(self, fit: Fit, zones: frozenset[str], cts: frozenset[str], opts: list[TypeOption],
                   reserve: tuple[int, ...] | None) -> _Bin:
        b = _Bin(len(self.bins))
        b.tpl = fit.tpl
        b.reqs = fit.requirements
        b.zones = zones
        b.cts = cts
        b.opts = opts
        b.used = [0] * len(self.dims)
        b.price = opts[0].price(zones, cts)
        if reserve is not None:
            b.reserved = reserve
            tpl = fit.tpl
            tpl.remaining = [r - v for r, v in zip(tpl.remaining, reserve, strict=True)]
            self._limits_version += 1
        self.bins.append(b)
        self.claims.append(b)
        self.open_claims.append(b)
        return b

    def _count(self, b: _Bin, gid: int, k: int) -> None:
        b.counts[gid] = b.counts.get(gid, 0) + k
        self._count_domains(b.zone, b.ct, gid, k)

    def _count_domains(self, zone: str | None, ct: str | None, gid: int, k: int) -> None:
        """`k` more pods of group `gid` in the zone and capacity type (for topology spread)."""
        if zone:
            zc = self.zone_counts.setdefault(zone, {})
            zc[gid] = zc.get(gid, 0) + k
        if ct:
            cc = self.ct_counts.setdefault(ct, {})
            cc[gid] = cc.get(gid, 0) + k

    def _commit_node(self, b: _Bin, group: Group, pods: list[Pod], req: tuple[int, ...], k: int) -> None:
        used = b.used
        for j, r in enumerate(req):
            used[j] += r * k
        b.pods.extend(pods)
        self._count(b, group.id, k)

    def _mins_of(self, reqs: Requirements) -> tuple[tuple[str, int], ...]:
        hit = self._mins.get(id(reqs))
        if hit is None:
            hit = self._mins[id(reqs)] = (reqs, min_values_of(reqs))  # holding reqs keeps its id unique
        return hit[1]

    def _commit_claim(self, b: _Bin, group: Group, pods: list[Pod], req: tuple[int, ...], k: int,
                      reqs: Requirements, zones: frozenset[str], cts: frozenset[str], opts: list[TypeOption],
                      ordered: bool = True) -> bool:
        """Put ``k`` pods on the claim, narrowing its options; False (and no change) if minValues forbids it."""
        used = [u + r * k for u, r in zip(b.used, req, strict=True)]
        opts = [t for t in opts if _fits(t.alloc, used)]
        if not ordered:
            opts.sort(key=lambda t: (t.price(zones, cts), t.name))
        if not opts:
            return False
        mins = self._mins_of(reqs)
        if mins and not min_values_met(opts, mins):
            return False
        b.used = used
        was_zone, was_ct = b.zone, b.ct
        b.reqs = reqs
        b.zones = zones
        b.cts = cts
        if (was_zone is None and b.zone) or (was_ct is None and b.ct):
            # Newly pinned: the pods already on it now count in that domain.
            new_zone = b.zone if was_zone is None else None
            new_ct = b.ct if was_ct is None else None
            for gid, n in b.counts.items():
                self._count_domains(new_zone, new_ct, gid, n)
        b.opts = opts
        b.price = opts[0].price(zones, cts)
        b.next_price = opts[1].price(zones, cts) if len(opts) > 1 else float("inf")
        b.narrow_cache.clear()
        b.pods.extend(pods)
        self._count(b, group.id, k)
        tpl = b.tpl
        if tpl.remaining is not None and b.reserved:
            reserve = tuple(max(v) for v in zip(*(t.limit_vec for t in opts), strict=True))
            if reserve != b.reserved:
                tpl.remaining = [r + old - new for r, old, new in zip(tpl.remaining, b.reserved, reserve, strict=True)]
                self._limits_version += 1
                b.reserved = reserve
        # A claim none of whose options has room for the smallest pending pod is closed for good.
        room = tuple(max(t.alloc[j] for t in opts) - u for j, u in enumerate(used))
        b.room = room
        for have, smallest in zip(room, self.min_req, strict=True):
            if have < smallest:
                b.open = False
                break
        return True

    def _offered(self, opts: list[TypeOption], zones: frozenset[str], cts: frozenset[str]):
        """Zones and capacity types where one of the options is actually offered."""
        key = (tuple(id(t) for t in opts), zones, cts)
        hit = self._offered_cache.get(key)
        if hit is None:
            pairs = {(z, c) for t in opts for z, c, _ in t.offers if z in zones and c in cts}
            hit = self._offered_cache[key] = (sorted({z for z, _ in pairs}), sorted({c for _, c in pairs}))
        return hit

    # -- result --------------------------------------------------------------------------------------------

    def _plan(self) -> Plan:
        claims = []
        for b in self.claims:
            opts = b.opts
            zones, cts = b.zones, b.cts
            offered_z, offered_c = self._offered(opts[:MAX_INSTANCE_TYPES], zones, cts)
            # Zones and capacity types were tracked as sets while packing; they join the requirements here.
            reqs = b.reqs.with_requirement(Requirement.exactly(wk.ZONE, *offered_z))
            reqs = reqs.with_requirement(Requirement.exactly(wk.CAPACITY_TYPE, *offered_c))
            labels = dict(b.tpl.labels)
            for key, value in reqs.labels().items():
                if key not in labels and key != wk.HOSTNAME:
                    labels[key] = value
            if len(offered_z) == 1:
                labels[wk.ZONE] = offered_z[0]
            if len(offered_c) == 1:
                labels[wk.CAPACITY_TYPE] = offered_c[0]
            requests = {d: v for d, v in zip(self.dims, b.used, strict=True) if v}
            for d, v in zip(self.dims, opts[0].daemon, strict=True):
                if v:
                    requests[d] = requests.get(d, 0) + v
            claims.append(
                NodeClaim(
                    nodepool=b.tpl.name,
                    instance_types=[t.name for t in opts[:MAX_INSTANCE_TYPES]],
                    capacity_types=offered_c,
                    zones=offered_z,
                    labels=labels,
                    taints=b.tpl.pool.taints,
                    startup_taints=b.tpl.pool.startup_taints,
                    requirements=reqs,
                    pods=b.pods,
                    price=b.price,
                    requests=requests,
                )
            )
        existing = [
            ExistingPlacement(b.node.name, b.node.in_flight, b.pods)
            for b in self.bins
            if b.node is not None and b.pods
        ]
        return Plan(claims, existing, self.unschedulable, len(self.pods))


def _fitting(types: list[TypeOption], req: tuple[int, ...], k: int, remaining: list[int] | None,
             limit: int | None) -> list[TypeOption]:
    """Types (cheapest first) that hold ``k`` pods of ``req`` and stay within the pool's remaining limits."""
    zero = (0,) * len(req)
    out = []
    for t in types:
        if _fit_count(t.alloc, zero, req) >= k and (
            remaining is None or all(lv <= r for lv, r in zip(t.limit_vec, remaining, strict=True))
        ):
            out.append(t)
            if limit is not None and len(out) == limit:
                break
    return out


def _by_price(entry: tuple) -> tuple:
    return entry[0], entry[1]


def _deal(pods: list[Pod], quota: Mapping[str, int], leftover: list[Pod]) -> list[tuple[list[Pod], str]]:
    """Split pods (largest first) across domains by quota, dealing round-robin so sizes mix evenly."""
    doms = [d for d in sorted(quota) if quota[d] > 0]
    if not doms:
        leftover.extend(pods)
        return []
    left = {d: quota[d] for d in doms}
    out: dict[str, list[Pod]] = {d: [] for d in doms}
    i = 0
    for pod in pods:
        placed = False
        for _ in range(len(doms)):
            d = doms[i % len(doms)]
            i += 1
            if left[d]:
                left[d] -= 1
                out[d].append(pod)
                placed = True
                break
        if not placed:
            leftover.append(pod)
    return [(out[d], d) for d in doms if out[d]]



