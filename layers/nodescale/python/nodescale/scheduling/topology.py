"""Topology bookkeeping: which groups a selector matches, pod counts per zone and capacity type, the
per-node caps hostname constraints impose, and how spreading shares pods out over domains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from ..model import labels as wk
from ..model.pod import LabelSelector, Pod, PodAffinityTerm
from .groups import Group
from .templates import UNLIMITED

# Every namespace carries this label (the API server sets it), so a namespace whose labels the solve was
# not given can still be selected by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Matcher:
    """Caches which groups a label selector (within some namespaces) selects."""

    __slots__ = ("groups", "namespace_labels", "_cache", "_term_cache")

    def __init__(self, groups: Iterable[Group], namespace_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.groups = list(groups)
        self.namespace_labels = namespace_labels or {}
        self._cache: dict[tuple[LabelSelector, frozenset[str]], frozenset[int]] = {}
        self._term_cache: dict[tuple[PodAffinityTerm, str], frozenset[int]] = {}

    def match(self, selector: LabelSelector, namespaces: frozenset[str]) -> frozenset[int]:
        key = (selector, namespaces)
        hit = self._cache.get(key)
        if hit is None:
            hit = frozenset(g.id for g in self.groups if g.namespace in namespaces and selector.matches(g.labels))
            self._cache[key] = hit
        return hit

    def match_term(self, term: PodAffinityTerm, own: str) -> frozenset[int]:
        """The groups a pod (anti-)affinity term of a pod in namespace ``own`` selects: its namespaces,
        those its namespaceSelector matches, or with neither the pod's own namespace."""
        if term.namespace_selector is None:
            return self.match(term.selector, term.namespaces or frozenset([own]))
        key = (term, own)
        hit = self._term_cache.get(key)
        if hit is None:
            hit = frozenset(
                g.id for g in self.groups
                if term.selects_namespace(g.namespace, own, self.labels_of(g.namespace))
                and term.selector.matches(g.labels)
            )
            self._term_cache[key] = hit
        return hit

    def labels_of(self, namespace: str) -> Mapping[str, str]:
        return self.namespace_labels.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}


class HostSpread(NamedTuple):
    matching: frozenset[int]  # ids of the groups the selector matches
    max_skew: int
    self_match: bool  # the selector matches the group's own pods


class HostAnti(NamedTuple):
    matching: frozenset[int]
    self_match: bool


class HostRules:
    """Per-node limits a level's hostname constraints put on how many of its pods a node takes."""

    __slots__ = ("spreads", "anti", "affinity", "inverse", "bootstrap", "bootstrapped")

    def __init__(self) -> None:
        self.spreads: list[HostSpread] = []
        self.anti: list[HostAnti] = []
        self.affinity: list[frozenset[int]] = []
        self.inverse: frozenset[int] = frozenset()  # groups whose anti-affinity excludes ours
        self.bootstrap = False  # self-affinity with no match anywhere yet: one new node may start it
        self.bootstrapped = False

    def cap(self, counts: Mapping[int, int]) -> int:
        cap = UNLIMITED
        inverse = self.inverse
        # Plain loops, no generators or min(): this runs for every claim a constrained pod considers.
        if inverse and not inverse.isdisjoint(counts):
            for g in inverse:
                if counts.get(g):
                    return 0
        for ids, skew, self_match in self.spreads:
            n = count(counts, ids)
            if self_match:
                if skew - n < cap:
                    cap = skew - n
            elif n > skew:
                return 0
        for ids, self_match in self.anti:
            if count(counts, ids):
                return 0
            if self_match and cap > 1:
                cap = 1
        for ids in self.affinity:
            if not count(counts, ids) and not (self.bootstrap and not self.bootstrapped and not counts):
                return 0
        return cap if cap > 0 else 0

    def new_node_cap(self) -> int:
        if self.affinity and not (self.bootstrap and not self.bootstrapped):
            return 0
        return self.cap({})

    @property
    def constrained(self) -> bool:
        return bool(self.spreads or self.anti or self.affinity or self.inverse)


class AntiAffinityOwner(NamedTuple):
    """A group with a required pod anti-affinity term, which keeps matching pods off its domains."""

    group_id: int
    term: PodAffinityTerm
    namespace: str


class InverseAnti(NamedTuple):
    """What other groups' required anti-affinity denies a group."""

    host_groups: frozenset[int]  # no node holding pods of these groups may take the group's pods
    zones: set[str]  # nor may these zones
    # Other topology keys: no domain of the key holding pods of these groups.
    other: dict[str, frozenset[int]]


class Topology:
    """Pods of each group per zone and capacity type, and the groups placed anywhere, across one solve."""

    __slots__ = ("matcher", "zone_counts", "capacity_type_counts", "anti_owners", "placed_groups", "nodes", "claims",
                 "other_anti")

    def __init__(self, groups: list[Group], namespace_labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.matcher = Matcher(groups, namespace_labels)
        # Every bin of the solve (existing nodes, claims opened), for counts the totals above do not keep:
        # per node for spreads that leave some nodes out, and per domain of other topology keys.
        self.nodes: list = []
        self.claims: list = []
        self.zone_counts: dict[str, dict[int, int]] = {}
        self.capacity_type_counts: dict[str, dict[int, int]] = {}
        self.placed_groups: set[int] = set()
        self.anti_owners = [
            AntiAffinityOwner(group.id, term, group.namespace)
            for group in groups
            for term in group.sample.affinity_terms
            if term.anti and not term.weight
        ]
        # Whether some required anti-affinity is on a key other than hostname and zone (see otherkeys).
        self.other_anti = any(o.term.topology_key not in (wk.HOSTNAME, wk.ZONE) for o in self.anti_owners)

    def record(self, counts: dict[int, int], zone: str | None, capacity_type: str | None, group_id: int,
               added: int) -> None:
        """``added`` more pods of the group on a node (whose per-group ``counts`` this updates)."""
        counts[group_id] = counts.get(group_id, 0) + added
        if added:
            self.placed_groups.add(group_id)
        self.count_domains(zone, capacity_type, group_id, added)

    def record_node(self, counts: Mapping[int, int], zone: str | None, capacity_type: str | None) -> None:
        """An existing node's pods, counted once when the solve starts."""
        for group_id, pods in counts.items():
            self.placed_groups.add(group_id)
            self.count_domains(zone, capacity_type, group_id, pods)

    def count_domains(self, zone: str | None, capacity_type: str | None, group_id: int, added: int) -> None:
        if zone:
            in_zone = self.zone_counts.setdefault(zone, {})
            in_zone[group_id] = in_zone.get(group_id, 0) + added
        if capacity_type:
            in_type = self.capacity_type_counts.setdefault(capacity_type, {})
            in_type[group_id] = in_type.get(group_id, 0) + added

    def present_anywhere(self, ids: frozenset[int]) -> bool:
        return not self.placed_groups.isdisjoint(ids)

    def zone_count(self, zone: str, ids: frozenset[int]) -> int:
        return count(self.zone_counts.get(zone, {}), ids)

    def capacity_type_count(self, capacity_type: str, ids: frozenset[int]) -> int:
        return count(self.capacity_type_counts.get(capacity_type, {}), ids)

    def inverse_anti(self, group: Group) -> InverseAnti:
        """Groups already placed whose required anti-affinity selects this group, and zones they hold."""
        host: set[int] = set()
        zones: set[str] = set()
        other: dict[str, set[int]] = {}
        for owner in self.anti_owners:
            term = owner.term
            ids = self.matcher.match_term(term, owner.namespace)
            if group.id not in ids:
                continue
            if term.topology_key == wk.HOSTNAME:
                host.add(owner.group_id)
            elif term.topology_key == wk.ZONE:
                zones.update(zone for zone, counts in self.zone_counts.items() if counts.get(owner.group_id))
            elif term.topology_key:
                other.setdefault(term.topology_key, set()).add(owner.group_id)
        return InverseAnti(frozenset(host), zones, {k: frozenset(v) for k, v in other.items()})


def count(counts: Mapping[int, int], ids: frozenset[int]) -> int:
    if ids.isdisjoint(counts):
        return 0  # the common case on a node, and a set operation in C
    total = 0
    if len(counts) < len(ids):
        for g, n in counts.items():
            if g in ids:
                total += n
    else:
        for g in ids:
            total += counts.get(g, 0)
    return total


def spread_quota(
    counts: Mapping[str, int], domains: Iterable[str], n: int, max_skew: int, min_domains: int | None,
    self_match: bool, cap: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """How many of ``n`` new pods each domain takes so no placement breaks ``max_skew``.

    Pods go one by one to the least loaded domain, as the kube-scheduler would place them. With fewer
    eligible domains than ``min_domains`` the global minimum counts as 0, which caps every domain.
    """
    doms = sorted(domains)
    if not doms:
        return {}
    out = dict.fromkeys(doms, 0)
    current = {d: counts.get(d, 0) for d in doms}
    if not self_match:
        # The pods do not count themselves: a domain is open when it is already within the skew.
        floor = 0 if min_domains and len(doms) < min_domains else min(current.values())
        open_doms = [d for d in doms if current[d] - floor <= max_skew]
        for i in range(n):
            if not open_doms:
                break
            d = open_doms[i % len(open_doms)]
            out[d] += 1
        return out
    zero_floor = bool(min_domains and len(doms) < min_domains)
    for _ in range(n):
        floor = 0 if zero_floor else min(current.values())
        best = None
        for d in doms:
            if cap is not None and out[d] >= cap.get(d, n):
                continue
            if best is None or current[d] < current[best]:
                best = d
        if best is None or current[best] + 1 - floor > max_skew:
            break  # the least loaded open domain is full, so is every other
        current[best] += 1
        out[best] += 1
    return out


class Share(NamedTuple):
    """The pods dealt to one domain."""

    pods: list[Pod]
    domain: str


def deal(pods: list[Pod], quota: Mapping[str, int], leftover: list[Pod]) -> list[Share]:
    """Split pods (largest first) across domains by quota, dealing round-robin so sizes mix evenly; pods
    no domain has room for go to ``leftover``."""
    domains = [d for d in sorted(quota) if quota[d] > 0]
    if not domains:
        leftover.extend(pods)
        return []
    left = {d: quota[d] for d in domains}
    dealt: dict[str, list[Pod]] = {d: [] for d in domains}
    turn = 0
    for pod in pods:
        placed = False
        for _ in range(len(domains)):
            domain = domains[turn % len(domains)]
            turn += 1
            if left[domain]:
                left[domain] -= 1
                dealt[domain].append(pod)
                placed = True
                break
        if not placed:
            leftover.append(pod)
    return [Share(dealt[d], d) for d in domains if dealt[d]]
