"""Topology spread and pod (anti-)affinity over keys other than zone and hostname (capacity type too for
affinity): any label a NodePool defines or an instance type carries, or existing nodes have.

Such a constraint is met by splitting the level: each domain of the key gets its share of the pods (by
the spread's quota, or what affinity allows) and the share is placed at the level with ``key In
[domain]`` added to its requirements and the constraint taken off, so new claims are pinned to the domain
the way Karpenter pins a NodeClaim's requirements. One constraint is split at a time; the sub-levels
split on the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..model import labels as wk
from ..model.pod import PodAffinityTerm, TopologySpread
from ..model.requirements import Requirement, Requirements
from .domains import NodeFilter, counted_node_domains, domain_counts, fit_domains
from .existingnode import NodeRoom
from .groups import Group, Level
from .reasons import Refusal, topology_refusal
from .templates import Fit
from .topology import Topology, spread_quota

# Keys the packer handles on its own: zone by quotas, hostname by per-node caps, capacity-type spread by
# quotas within each zone share.
_SPREAD_KEYS = frozenset({wk.ZONE, wk.HOSTNAME, wk.CAPACITY_TYPE})
_AFFINITY_KEYS = frozenset({wk.ZONE, wk.HOSTNAME})


class Split(NamedTuple):
    """A level split over the domains of one key."""

    quota: dict[str, int] | None  # pods per domain, each placed at ``levels[domain]``; None: all at ``only``
    levels: dict[str, Level]
    only: Level | None
    refusal: Refusal | None  # why pods left over (or all of them, when nothing is allowed) find no place


def split(group: Group, level: Level, pods: int, viable: Sequence[Fit], room: NodeRoom,
          state: Topology) -> Split | None:
    """The split for the level's first constraint on another key, or None when it has none."""
    for spread in level.spreads:
        if spread.topology_key and spread.topology_key not in _SPREAD_KEYS:
            return _split_spread(group, level, spread, pods, viable, room, state)
    for term in level.affinity:
        if term.topology_key and term.topology_key not in _AFFINITY_KEYS:
            return _split_term(group, level, term, viable, room, state)
    if state.other_anti:
        return _inverse(group, level, state)
    return None


def _placeable(key: str, viable: Sequence[Fit], room: NodeRoom) -> set[str]:
    """Domains where the pods could go: those of the pools' new nodes and of the nodes that accept them."""
    out: set[str] = set()
    for fit in viable:
        out |= fit_domains(fit, key)
    out.update(room.per_domain(key))
    return out


def _without(level: Level, spread: TopologySpread | None = None, term: PodAffinityTerm | None = None) -> Level:
    spreads = tuple(s for s in level.spreads if s is not spread)
    affinity = tuple(t for t in level.affinity if t is not term)
    return Level(level.requirements, spreads, affinity, level.relaxed)


def _within(level: Level, key: str, domains: set[str] | frozenset[str]) -> Level:
    reqs = level.requirements.intersect(Requirements([Requirement.exactly(key, *sorted(domains))]))
    return Level(reqs, level.spreads, level.affinity, level.relaxed)


def _split_spread(group: Group, level: Level, spread: TopologySpread, pods: int, viable: Sequence[Fit],
                  room: NodeRoom, state: Topology) -> Split:
    key = spread.topology_key
    node_filter = NodeFilter(group.sample, spread)
    ids = state.matcher.match(spread.selector, frozenset([group.namespace]))
    domains: set[str] = set()
    for fit in viable:
        domains |= fit_domains(fit, key)
    node_room = room.per_domain(key)
    # A domain only existing nodes offer takes what they have room for.
    cap = {d: pods if d in domains else node_room.get(d, 0) for d in domains | counted_node_domains(state.nodes, key, node_filter)}
    domains = set(cap)
    counts = domain_counts(state, key, ids, node_filter)
    quota = spread_quota(counts, domains, pods, spread.max_skew, spread.min_domains, group.id in ids, cap)
    rest = _without(level, spread=spread)
    levels = {d: _within(rest, key, {d}) for d, n in quota.items() if n}
    why = topology_refusal(f"topology spread on {key} (maxSkew {spread.max_skew}) cannot be met")
    return Split(quota, levels, None, why)


def _split_term(group: Group, level: Level, term: PodAffinityTerm, viable: Sequence[Fit],
                room: NodeRoom, state: Topology) -> Split:
    key = term.topology_key
    ids = state.matcher.match_term(term, group.namespace)
    present = {d for d, n in domain_counts(state, key, ids).items() if n}
    rest = _without(level, term=term)
    if term.anti:
        allowed = _placeable(key, viable, room) - present
        why = topology_refusal(f"pod anti-affinity on {key}: every allowed domain already has a matching pod")
        if group.id in ids:
            # Anti-affinity to its own pods: one pod per free domain.
            return Split(dict.fromkeys(allowed, 1), {d: _within(rest, key, {d}) for d in allowed}, None, why)
        if not present:
            return Split(None, {}, rest, why)
        excluded = Requirements([Requirement.create(key, "NotIn", sorted(present))])
        return Split(None, {}, Level(rest.requirements.intersect(excluded), rest.spreads, rest.affinity,
                                     rest.relaxed), why)
    why = topology_refusal(f"pod affinity on {key}: no domain has a matching pod")
    if not present and group.id in ids:
        # Affinity to its own pods with none placed yet: the first domain starts them, the rest follow.
        placeable = sorted(_placeable(key, viable, room))
        present = set(placeable[:1])
    if not present:
        return Split(None, {}, None, why)
    return Split(None, {}, _within(rest, key, present), why)


def _inverse(group: Group, level: Level, state: Topology) -> Split | None:
    """Keep the group out of domains where placed pods' anti-affinity (on other keys) forbids it."""
    for key, owners in state.inverse_anti(group).other.items():
        taken = sorted(d for d, n in domain_counts(state, key, owners).items() if n)
        held = level.requirements.get(key)
        if not taken or (held is not None and not any(held.has(d) for d in taken)):
            continue  # nothing taken, or already kept out of what is
        excluded = Requirements([Requirement.create(key, "NotIn", taken)])
        why = topology_refusal(f"{key}: the domains are taken by pods with anti-affinity to these pods")
        return Split(None, {}, Level(level.requirements.intersect(excluded), level.spreads, level.affinity,
                                     level.relaxed), why)
    return None
