"""Topology bookkeeping: which groups a selector matches, pod counts per domain, and spreading quotas."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model.pod import LabelSelector
from .groups import Group


class Matcher:
    """Caches which groups a label selector (within some namespaces) selects."""

    __slots__ = ("groups", "_cache")

    def __init__(self, groups: Iterable[Group]) -> None:
        self.groups = list(groups)
        self._cache: dict[tuple[LabelSelector, frozenset[str]], frozenset[int]] = {}

    def match(self, selector: LabelSelector, namespaces: frozenset[str]) -> frozenset[int]:
        key = (selector, namespaces)
        hit = self._cache.get(key)
        if hit is None:
            hit = frozenset(g.id for g in self.groups if g.namespace in namespaces and selector.matches(g.labels))
            self._cache[key] = hit
        return hit


UNLIMITED = 1 << 62


class HostRules:
    """Per-node limits a level's hostname constraints put on how many of its pods a node takes."""

    __slots__ = ("spreads", "anti", "affinity", "inverse", "bootstrap", "bootstrapped")

    def __init__(self) -> None:
        self.spreads: list[tuple[frozenset[int], int, bool]] = []  # (matching ids, max skew, self match)
        self.anti: list[tuple[frozenset[int], bool]] = []
        self.affinity: list[frozenset[int]] = []
        self.inverse: frozenset[int] = frozenset()  # groups whose anti-affinity excludes ours
        self.bootstrap = False  # self-affinity with no match anywhere yet: one new node may start it
        self.bootstrapped = False

    def cap(self, counts: Mapping[int, int]) -> int:
        cap = UNLIMITED
        if self.inverse and any(counts.get(g) for g in self.inverse):
            return 0
        for ids, skew, self_match in self.spreads:
            n = count(counts, ids)
            if self_match:
                cap = min(cap, skew - n)
            elif n > skew:
                return 0
        for ids, self_match in self.anti:
            if count(counts, ids):
                return 0
            if self_match:
                cap = min(cap, 1)
        for ids in self.affinity:
            if not count(counts, ids) and not (self.bootstrap and not self.bootstrapped and not counts):
                return 0
        return cap if cap > 0 else 0

    def new_node_cap(self) -> int:
        if self.affinity and not (self.bootstrap and not self.bootstrapped):
            return 0
        return self.cap({})


def count(counts: Mapping[int, int], ids: frozenset[int]) -> int:
    if len(counts) < len(ids):
        return sum(n for g, n in counts.items() if g in ids)
    return sum(counts.get(g, 0) for g in ids)


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
