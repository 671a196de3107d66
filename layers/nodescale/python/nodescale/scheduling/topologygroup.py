"""A relaxation level's topology constraints, compiled against where pods are now: the per-node rules its
hostname constraints make, which zones its pods may use and how many each takes, and its capacity-type
spread.

Pods counted for a zone are those on nodes or claims already pinned to one zone. A spread counts the
zones of every node its nodeAffinityPolicy and nodeTaintsPolicy let in (cordoned and tainted nodes too,
by default), not only those of the pools, as kube-scheduler does; a zone where nothing can take the pods
still holds the global minimum down. Other topology keys are split off first, in `otherkeys`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..model import labels as wk
from ..model.pod import PodAffinityTerm, TopologySpread
from .domains import NodeFilter, counted_node_domains, left_out
from .existingnode import NodeBin, NodeRoom
from .groups import Group, Level
from .reasons import Refusal, topology_refusal
from .templates import Fit
from .topology import HostAnti, HostRules, HostSpread, Topology, spread_quota


class ZoneTerm(NamedTuple):
    """A required pod (anti-)affinity term on zones, and the groups it selects."""

    term: PodAffinityTerm
    matching: frozenset[int]


class ZonePlan(NamedTuple):
    """Where in zones a level's pods may go."""

    quota: dict[str, int] | None  # pods each zone takes, when they must be dealt out
    only: frozenset[str] | None  # the zones allowed, when any share will do; None: any zone
    refusal: Refusal | None  # why pods get no zone

    @property
    def blocked(self) -> bool:
        if self.quota is not None:
            return not any(self.quota.values())
        return self.only is not None and not self.only


class LevelTopology(NamedTuple):
    host: HostRules
    zones: ZonePlan
    capacity_type_spread: TopologySpread | None


class _AllowedZones(NamedTuple):
    zones: set[str]
    per_zone_cap: dict[str, int]  # a zone's cap when anti-affinity to the group's own pods allows one each
    refusal: Refusal | None


def compile_level(group: Group, level: Level, pods: int, viable: Sequence[Fit], room: NodeRoom,
                  state: Topology) -> LevelTopology:
    """The constraints ``pods`` pods of the group meet at this level, given what is placed so far."""
    host, zone_terms = _host_rules(group, level, state)
    inverse = state.inverse_anti(group)
    host.inverse = inverse.host_groups
    zones = _plan_zones(group, level, pods, viable, room, zone_terms, inverse.zones, state)
    spread = next((s for s in level.spreads if s.topology_key == wk.CAPACITY_TYPE), None)
    return LevelTopology(host, zones, spread)


def capacity_type_quota(group: Group, spread: TopologySpread, pods: int, viable: Sequence[Fit],
                        state: Topology) -> dict[str, int]:
    """How many of ``pods`` each capacity type the level's pools offer takes under the spread."""
    ids = state.matcher.match(spread.selector, frozenset([group.namespace]))
    universe: set[str] = set()
    for fit in viable:
        universe |= fit.capacity_types
    placeable = set(universe)
    counts = _spread_counts(group, spread, wk.CAPACITY_TYPE, ids, universe, state)
    cap = {d: (pods if d in placeable else 0) for d in universe}
    return spread_quota(counts, universe, pods, spread.max_skew, spread.min_domains, group.id in ids, cap)


def _spread_counts(group: Group, spread: TopologySpread, key: str, ids: frozenset[int], universe: set[str],
                   state: Topology) -> dict[str, int]:
    """Matching pods per domain of a zone or capacity-type spread, on the nodes its policies count; adds
    the domains of those nodes to ``universe``."""
    node_filter = NodeFilter(group.sample, spread)
    universe |= counted_node_domains(state.nodes, key, node_filter)
    total = state.zone_count if key == wk.ZONE else state.capacity_type_count
    counts = {d: total(d, ids) for d in universe}
    if not node_filter.everything:
        for domain, pods in left_out(state, key, ids, node_filter).items():
            if domain in counts:
                counts[domain] -= pods
    return counts


def _host_rules(group: Group, level: Level, state: Topology) -> tuple[HostRules, list[ZoneTerm]]:
    """The level's hostname rules, and its pod (anti-)affinity terms on zones."""
    namespaces = frozenset([group.namespace])
    host = HostRules()
    for spread in level.spreads:
        if spread.topology_key == wk.HOSTNAME:
            ids = state.matcher.match(spread.selector, namespaces)
            host.spreads.append(HostSpread(ids, spread.max_skew, group.id in ids))
    zone_terms = []
    for term in level.affinity:
        ids = state.matcher.match_term(term, group.namespace)
        if term.topology_key == wk.HOSTNAME:
            if term.anti:
                host.anti.append(HostAnti(ids, group.id in ids))
            else:
                host.affinity.append(ids)
                if group.id in ids and not state.present_anywhere(ids):
                    host.bootstrap = True
        elif term.topology_key == wk.ZONE:
            zone_terms.append(ZoneTerm(term, ids))
    return host, zone_terms


def _plan_zones(group: Group, level: Level, pods: int, viable: Sequence[Fit], room: NodeRoom,
                zone_terms: list[ZoneTerm], inverse_zones: set[str], state: Topology) -> ZonePlan:
    nodes = room.nodes
    placeable: set[str] = set()  # zones where the pods can go: the pools' and the accepting nodes'
    for fit in viable:
        placeable |= fit.zones
    node_room = room.per_domain(wk.ZONE)
    pool_zones = set(placeable)
    placeable.update(node_room)
    allowed = _allowed_zones(group, placeable, zone_terms, inverse_zones, viable, nodes, state)
    spreads = [s for s in level.spreads if s.topology_key == wk.ZONE]
    if spreads:
        # Zones excluded by affinity, or where nothing takes the pods, still count toward the global
        # minimum, as in kube-scheduler.
        loose = {z: (allowed.per_zone_cap.get(z, pods) if z in allowed.zones else 0) for z in placeable}
        cap = dict(loose)
        for zone in placeable - pool_zones:
            cap[zone] = min(cap[zone], node_room[zone])
        quota = _zone_quota(group, spreads, placeable, cap, pods, state)
        if cap != loose:
            # Pods the spread would send where only full nodes are go there all the same and fail for that
            # (no offering), rather than piling into the other zones beyond the skew.
            unbounded = _zone_quota(group, spreads, placeable, loose, pods, state)
            for zone in placeable - pool_zones:
                quota[zone] = max(quota[zone], unbounded[zone])
        why = topology_refusal(f"topology spread on {wk.ZONE} (maxSkew {spreads[0].max_skew}) cannot be met")
        return ZonePlan(quota, None, why)
    if allowed.per_zone_cap:
        return ZonePlan({z: allowed.per_zone_cap[z] for z in allowed.zones}, None, allowed.refusal)
    if zone_terms or inverse_zones:
        return ZonePlan(None, frozenset(allowed.zones), allowed.refusal)
    return ZonePlan(None, None, allowed.refusal)


def _zone_quota(group: Group, spreads: list[TopologySpread], placeable: set[str], cap: dict[str, int], pods: int,
                state: Topology) -> dict[str, int]:
    """Pods per zone under every zone spread: each one's quota caps the others (the last one decides)."""
    cap = dict(cap)
    for spread in reversed(spreads):
        ids = state.matcher.match(spread.selector, frozenset([group.namespace]))
        universe = set(placeable)
        counts = _spread_counts(group, spread, wk.ZONE, ids, universe, state)
        for zone in universe - cap.keys():
            cap[zone] = 0
        quota = spread_quota(counts, universe, pods, spread.max_skew, spread.min_domains, group.id in ids, cap)
        cap = {z: quota.get(z, 0) for z in cap}
    return cap


def _allowed_zones(group: Group, universe: set[str], zone_terms: list[ZoneTerm], inverse_zones: set[str],
                   viable: Sequence[Fit], nodes: Sequence[NodeBin], state: Topology) -> _AllowedZones:
    """The zones pod (anti-)affinity leaves the group, and why none may be left."""
    allowed = set(universe) - inverse_zones
    per_zone_cap: dict[str, int] = {}
    why = ""
    if inverse_zones:
        why = f"{wk.ZONE}: the zones are taken by pods with anti-affinity to these pods"
    for term, ids in zone_terms:
        present = {z for z in universe if state.zone_count(z, ids)}
        if term.anti:
            allowed -= present
            if group.id in ids:
                for zone in allowed:
                    per_zone_cap[zone] = 1
            why = why or f"pod anti-affinity on {wk.ZONE}: every allowed zone already has a matching pod"
        else:
            if present:
                allowed &= present
            elif group.id in ids:
                chosen = _cheapest_zone(viable, allowed, nodes)
                allowed = {chosen} if chosen else set()
            else:
                allowed = set()
            why = why or f"pod affinity on {wk.ZONE}: no allowed zone has a matching pod"
    return _AllowedZones(allowed, per_zone_cap, topology_refusal(why) if why else None)


def _cheapest_zone(viable: Sequence[Fit], allowed: set[str], nodes: Sequence[NodeBin]) -> str | None:
    """Where a group with affinity to itself starts: the zone of the cheapest offering, else a node's."""
    best: tuple[float, str] | None = None
    for fit in viable:
        for option in fit.types[:5]:
            for zone, capacity_type, price in option.offers:
                if zone in allowed and capacity_type in fit.capacity_types and (best is None or (price, zone) < best):
                    best = (price, zone)
    if best is not None:
        return best[1]
    zones = sorted(node.zone for node in nodes if node.zone in allowed)
    return zones[0] if zones else None
