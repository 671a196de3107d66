"""Which pod groups the repack pass may move (#32): those no topology constraint involves move freely;
those only zone-keyed constraints involve move within their zone; the rest stay on their claims."""

from __future__ import annotations

from collections.abc import Iterable

from ..model import labels as wk
from .groups import Group
from .topology import Matcher


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


def zonal_groups(groups: Iterable[Group], matcher: Matcher) -> set[int]:
    """Topology-bound groups whose every constraint, their own and any that selects them, is keyed on the
    zone: a pod of theirs may move to another claim of the same zone and capacity types, every count the
    constraints read unchanged."""
    bound: set[int] = set()
    pinned: set[int] = set()  # bound by some constraint on another key (hostname, capacity type, ...)
    for group in groups:
        sample = group.sample
        own = frozenset([group.namespace])
        for key, hit in [(s.topology_key, matcher.match(s.selector, own)) for s in sample.spread] + [
                (t.topology_key, matcher.match_term(t, group.namespace)) for t in sample.affinity_terms]:
            bound |= hit
            bound.add(group.id)
            if key != wk.ZONE:
                pinned |= hit
                pinned.add(group.id)
    return bound - pinned


def movable_pods(groups: Iterable[Group], matcher: Matcher) -> tuple[set[int], dict[int, int], dict[int, int]]:
    """The topology-bound groups (of ``matcher``'s, existing nodes' included), then each pending pod the
    repack pass may move freely, and each it may move within its zone, by id, with its group's id."""
    bound = topology_bound_groups(matcher.groups, matcher)
    zonal = zonal_groups(matcher.groups, matcher)
    free = {id(p): g.id for g in groups if g.id not in bound for p in g.pods}
    return bound, free, {id(p): g.id for g in groups if g.id in zonal for p in g.pods}
