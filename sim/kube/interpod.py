"""Inter-pod affinity, anti-affinity and topology spread: kube-scheduler's InterPodAffinity and PodTopologySpread
filters, for the sim scheduler.

kube-scheduler leaves a pod Pending when no node passes these filters; a scheduler that skipped them would
run pods a real cluster keeps Pending (two pods of a hostname anti-affinity group on one node, a zone spread
skewed past its maxSkew), and every decision built on that cluster would be built on a lie. What is modelled:

- the pod's own ``requiredDuringSchedulingIgnoredDuringExecution`` pod affinity and anti-affinity terms
  (labelSelector, namespaces, namespaceSelector, topologyKey, matchLabelKeys, mismatchLabelKeys), with
  kube-scheduler's exception for the first pod of a group that selects itself;
- the required anti-affinity of pods already placed, which keeps a matching pod out of their domain;
- ``topologySpreadConstraints`` with ``whenUnsatisfiable: DoNotSchedule`` (maxSkew, minDomains,
  nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys); ``ScheduleAnyway`` only scores, as do preferred
  terms, and the sim scheduler does not score.

As kube-scheduler counts them, terminating pods still count for affinity (they are on the node until they
are gone) and do not count for spread. Pods are indexed by their label set, so a pass looks at the few
distinct label sets of a namespace, not at every pod.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .objects import meta
from .placement import matches_node_selection, untolerated_taint
from .selectors import LabelMatcher, compile_label_selector_object

HOSTNAME = "kubernetes.io/hostname"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

Labels = frozenset[tuple[str, str]]


def _required(pod: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _hard_spread(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
            if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]


def constrained(pod: Mapping[str, Any]) -> bool:
    """Whether the pod carries any term these filters read (then its group is placed pod by pod)."""
    return bool(_required(pod, "podAffinity") or _required(pod, "podAntiAffinity") or _hard_spread(pod))


def signature(pod: Mapping[str, Any]) -> list[Any]:
    """What these filters read of a pending pod: pods equal in it (and in requests) are placed alike."""
    return [meta(pod).get("namespace"), sorted((meta(pod).get("labels") or {}).items()),
            _required(pod, "podAffinity"), _required(pod, "podAntiAffinity"), _hard_spread(pod)]


def _with_label_keys(selector: dict[str, Any] | None, labels: Mapping[str, str], match: Iterable[str],
                     mismatch: Iterable[str] = ()) -> dict[str, Any] | None:
    """matchLabelKeys / mismatchLabelKeys: the owner pod's values for those keys added to the selector."""
    extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in match if k in labels]
    extra += [{"key": k, "operator": "NotIn", "values": [labels[k]]} for k in mismatch if k in labels]
    if not extra or selector is None:
        return selector
    return {"matchLabels": dict(selector.get("matchLabels") or {}),
            "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}


@dataclass(frozen=True)
class Term:
    """A pod (anti-)affinity term of one pod, resolved: which pods it selects and over what domain."""

    topology_key: str
    matches: LabelMatcher
    namespaces: frozenset[str] | None  # None: every namespace

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return (self.namespaces is None or namespace in self.namespaces) and self.matches(labels)


def resolve_term(term: Mapping[str, Any], owner: Mapping[str, Any], namespace_labels: Mapping[str, Mapping[str, str]]
                 ) -> Term:
    """A term of ``owner`` as kube-scheduler reads it: a missing labelSelector selects no pod; no namespaces and
    no namespaceSelector means the owner's namespace; an empty namespaceSelector means every namespace."""
    labels = meta(owner).get("labels") or {}
    selector = _with_label_keys(term.get("labelSelector"), labels, term.get("matchLabelKeys") or (),
                                term.get("mismatchLabelKeys") or ())
    # A missing selector selects no pod; an empty one every pod (metav1.LabelSelectorAsSelector).
    matches = compile_label_selector_object(selector) if selector is not None else (lambda _labels: False)
    listed = set(term.get("namespaces") or ())
    ns_selector = term.get("namespaceSelector")
    namespaces: frozenset[str] | None
    if ns_selector is not None and not (ns_selector.get("matchLabels") or ns_selector.get("matchExpressions")):
        namespaces = None
    else:
        if ns_selector is not None:
            pick = compile_label_selector_object(ns_selector)
            listed |= {name for name, ns_labels in namespace_labels.items() if pick(ns_labels)}
        elif not listed:
            listed = {meta(owner).get("namespace") or "default"}
        namespaces = frozenset(listed)
    return Term(str(term.get("topologyKey") or ""), matches, namespaces)


@dataclass
class _Entry:
    node: str
    namespace: str
    labels: Labels
    terminating: bool
    anti_key: str | None  # its required anti-affinity terms, as JSON (with namespace): an index key


class PlacedPods:
    """The pods bound to nodes, indexed for these filters and kept current from pod events (``update``)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        # (namespace, labels) -> node -> pods; the same for pods not terminating (spread counts only those)
        self._all: dict[tuple[str, Labels], Counter[str]] = defaultdict(Counter)
        self._live: dict[tuple[str, Labels], Counter[str]] = defaultdict(Counter)
        # pods with required anti-affinity, by their terms: anti key -> node -> pods, and one owner to read terms of
        self._anti: dict[str, Counter[str]] = defaultdict(Counter)
        self._anti_owner: dict[str, dict[str, Any]] = {}

    def update(self, uid: str, pod: Mapping[str, Any] | None) -> None:
        """The pod as it is now (None, or not on a node: no longer placed)."""
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        labels = frozenset((meta(pod).get("labels") or {}).items()) if pod is not None else frozenset()
        terminating = bool(meta(pod).get("deletionTimestamp")) if pod is not None else False
        current = self._entries.get(uid)
        if pod is not None and node and current is not None and \
                (current.node, current.labels, current.terminating) == (node, labels, terminating):
            return  # a status change: nothing these filters read has moved (a pod's namespace and affinity never do)
        old = self._entries.pop(uid, None)
        if old is not None:
            self._count(old, -1)
        if pod is None or not node:
            return
        terms = _required(pod, "podAntiAffinity")
        anti_key = None
        if terms:
            anti_key = json.dumps([meta(pod).get("namespace"), sorted((meta(pod).get("labels") or {}).items()), terms],
                                  sort_keys=True)
            self._anti_owner.setdefault(anti_key, {"metadata": {"namespace": meta(pod).get("namespace"),
                                                               "labels": dict(meta(pod).get("labels") or {})},
                                                  "spec": {"affinity": {"podAntiAffinity": {
                                                      "requiredDuringSchedulingIgnoredDuringExecution": terms}}}})
        entry = _Entry(node, meta(pod).get("namespace") or "", labels, terminating, anti_key)
        self._entries[uid] = entry
        self._count(entry, 1)

    def _count(self, entry: _Entry, sign: int) -> None:
        key = (entry.namespace, entry.labels)
        for index, counted in ((self._all, True), (self._live, not entry.terminating)):
            if not counted:
                continue
            counter = index[key]
            counter[entry.node] += sign
            if counter[entry.node] <= 0:
                del counter[entry.node]
            if not counter:
                del index[key]
        if entry.anti_key is not None:
            counter = self._anti[entry.anti_key]
            counter[entry.node] += sign
            if counter[entry.node] <= 0:
                del counter[entry.node]
            if not counter:
                del self._anti[entry.anti_key]
                self._anti_owner.pop(entry.anti_key, None)

    def nodes_with(self, term: Term, live_only: bool = False, namespace: str | None = None) -> Counter[str]:
        """node -> pods the term selects (in ``namespace`` only, when given)."""
        out: Counter[str] = Counter()
        for (ns, labels), counter in (self._live if live_only else self._all).items():
            if namespace is not None and ns != namespace:
                continue
            if term.selects(ns, dict(labels)):
                out.update(counter)
        return out

    def any_anti_affinity(self) -> bool:
        """Whether any placed pod carries required anti-affinity (then every group must be checked against it)."""
        return bool(self._anti)

    def anti_affinity_owners(self) -> list[tuple[dict[str, Any], Counter[str]]]:
        """(a pod standing for a group of placed pods with the same required anti-affinity, node -> pods)."""
        return [(self._anti_owner[key], counter) for key, counter in self._anti.items()]


@dataclass
class _Spread:
    key: str
    max_skew: int
    term: Term
    self_match: bool
    eligible: set[str]  # nodes whose domains count
    counts: dict[str, int]  # domain -> matching pods
    min_domains: int

    def global_min(self) -> int:
        if len(self.counts) < self.min_domains:
            return 0
        return min(self.counts.values(), default=0)


@dataclass
class Rules:
    """The inter-pod filters of one pending group against the nodes of a pass, updated as pods are placed."""

    labels_of: dict[str, Mapping[str, str]]  # node -> labels
    namespace: str
    labels: Mapping[str, str]
    affinity: list[tuple[Term, set[str] | None]] = field(default_factory=list)  # term, domains with a match (None: any)
    anti: list[tuple[Term, set[str]]] = field(default_factory=list)  # own term, domains it is kept out of
    existing: dict[str, set[str]] = field(default_factory=dict)  # topology key -> domains existing pods keep it out of
    spread: list[_Spread] = field(default_factory=list)

    @classmethod
    def for_group(cls, pod: Mapping[str, Any], nodes: list[dict[str, Any]], placed: PlacedPods,
                  namespace_labels: Mapping[str, Mapping[str, str]]) -> Rules:
        namespace = meta(pod).get("namespace") or "default"
        labels = meta(pod).get("labels") or {}
        rules = cls({meta(n)["name"]: meta(n).get("labels") or {} for n in nodes}, namespace, labels)
        for raw in _required(pod, "podAffinity"):
            term = resolve_term(raw, pod, namespace_labels)
            domains = rules._domains(term.topology_key, placed.nodes_with(term))
            if not domains and term.selects(namespace, labels):
                rules.affinity.append((term, None))  # the first of a group that selects itself may go anywhere
            else:
                rules.affinity.append((term, domains))
        for raw in _required(pod, "podAntiAffinity"):
            term = resolve_term(raw, pod, namespace_labels)
            rules.anti.append((term, rules._domains(term.topology_key, placed.nodes_with(term))))
        for owner, on_nodes in placed.anti_affinity_owners():
            for raw in _required(owner, "podAntiAffinity"):
                term = resolve_term(raw, owner, namespace_labels)
                if term.selects(namespace, labels):
                    rules.existing.setdefault(term.topology_key, set()).update(
                        rules._domains(term.topology_key, on_nodes))
        for raw in _hard_spread(pod):
            rules.spread.append(rules._spread(raw, pod, nodes, placed))
        return rules

    def _domains(self, key: str, on_nodes: Mapping[str, int]) -> set[str]:
        out = set()
        for node in on_nodes:
            value = self.labels_of.get(node, {}).get(key)
            if value is not None:
                out.add(value)
        return out

    def _spread(self, raw: Mapping[str, Any], pod: Mapping[str, Any], nodes: list[dict[str, Any]],
                placed: PlacedPods) -> _Spread:
        spec = pod.get("spec") or {}
        keys = {c.get("topologyKey") for c in _hard_spread(pod)}
        honour_affinity = raw.get("nodeAffinityPolicy", "Honor") == "Honor"
        honour_taints = raw.get("nodeTaintsPolicy", "Ignore") == "Honor"
        eligible = set()
        for node in nodes:
            node_labels = meta(node).get("labels") or {}
            if not all(k in node_labels for k in keys):
                continue
            if honour_affinity and not matches_node_selection(spec, node):
                continue
            if honour_taints and untolerated_taint(node, spec.get("tolerations") or []) is not None:
                continue
            eligible.add(meta(node)["name"])
        labels = meta(pod).get("labels") or {}
        selector = _with_label_keys(raw.get("labelSelector"), labels, raw.get("matchLabelKeys") or ())
        matches = compile_label_selector_object(selector) if selector is not None else (lambda _labels: False)
        term = Term(str(raw.get("topologyKey") or ""), matches, frozenset({self.namespace}))
        counts = {self.labels_of[name][term.topology_key]: 0 for name in eligible}
        for node, pods in placed.nodes_with(term, live_only=True, namespace=self.namespace).items():
            if node in eligible:
                counts[self.labels_of[node][term.topology_key]] += pods
        return _Spread(term.topology_key, int(raw.get("maxSkew") or 1), term, term.matches(labels), eligible, counts,
                       int(raw.get("minDomains") or 1))

    def blocked_for_good(self, node: str) -> bool:
        """Kept out by anti-affinity: placing more pods of the group never lets it back in."""
        return self._anti_reason(self.labels_of.get(node, {})) is not None

    def _anti_reason(self, labels: Mapping[str, str]) -> str | None:
        for term, domains in self.anti:
            value = labels.get(term.topology_key)
            if value is not None and value in domains:
                return REASON_ANTI_AFFINITY
        for key, domains in self.existing.items():
            value = labels.get(key)
            if value is not None and value in domains:
                return REASON_EXISTING_ANTI_AFFINITY
        return None

    def reason(self, node: str) -> str | None:
        """Why the group's next pod may not go to ``node``, in kube-scheduler's filter order, or None."""
        labels = self.labels_of.get(node, {})
        for spread in self.spread:
            value = labels.get(spread.key)
            if value is None:
                return REASON_SPREAD_LABEL
            if spread.counts.get(value, 0) + spread.self_match - spread.global_min() > spread.max_skew:
                return REASON_SPREAD
        for term, domains in self.affinity:
            value = labels.get(term.topology_key)
            if value is None or (domains is not None and value not in domains):
                return REASON_AFFINITY
        return self._anti_reason(labels)

    def placed(self, node: str) -> None:
        """One pod of the group went to ``node``: the next one sees it."""
        labels = self.labels_of.get(node, {})
        for spread in self.spread:
            if spread.self_match and node in spread.eligible:
                value = labels[spread.key]
                spread.counts[value] = spread.counts.get(value, 0) + 1
        for index, (term, domains) in enumerate(self.affinity):
            value = labels.get(term.topology_key)
            if value is not None and term.selects(self.namespace, self.labels):
                self.affinity[index] = (term, (domains or set()) | {value})
        for term, domains in self.anti:
            value = labels.get(term.topology_key)
            if value is not None and term.selects(self.namespace, self.labels):
                domains.add(value)
        # The placed pod's own anti-affinity terms are the group's: they keep its next pods out as ``anti`` does.
