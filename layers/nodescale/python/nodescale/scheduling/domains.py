"""Domains of a topology key: the domain a node or claim is in, the domains the pools' new nodes can be in,
which nodes a topology spread counts (kube-scheduler's nodeAffinityPolicy and nodeTaintsPolicy, Karpenter's
topologynodefilter.go), and the pods of some groups in each domain.

The zone and capacity-type totals kept in `topology.Topology` serve the common case; these scans over
every bin serve the rest: spreads that leave some nodes out, and topology keys other than zone, hostname
and capacity type.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model import labels as wk
from ..model.pod import Pod, TopologySpread
from ..model.requirements import Requirements
from ..model.taints import Taint, tolerates_all
from .existingnode import NodeBin
from .nodeclaim import ClaimBin
from .templates import Fit, daemon_requirements, labels_satisfy
from .topology import Topology, count

# A cordoned node carries this taint (the node lifecycle controller adds it): with nodeTaintsPolicy
# Honor a pod that does not tolerate it does not count the node.
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "NoSchedule")
HONOR = "Honor"


class NodeFilter:
    """Which nodes a topology spread counts, as kube-scheduler decides it for the pod.

    nodeAffinityPolicy Honor (the default) counts only nodes that meet the pod's nodeSelector and required
    node affinity; nodeTaintsPolicy Honor (Ignore is the default) only nodes whose taints it tolerates.
    """

    __slots__ = ("terms", "tolerations")

    def __init__(self, pod: Pod, spread: TopologySpread) -> None:
        terms = daemon_requirements(pod) if spread.node_affinity_policy == HONOR else []
        self.terms: list[Requirements] | None = terms if any(len(t) for t in terms) else None
        self.tolerations = pod.tolerations if spread.node_taints_policy == HONOR else None

    @property
    def everything(self) -> bool:
        return self.terms is None and self.tolerations is None

    def counts_node(self, node: NodeBin) -> bool:
        if self.terms is not None and not any(labels_satisfy(node.node.labels, t) for t in self.terms):
            return False
        if self.tolerations is not None:
            taints: Iterable[Taint] = node.node.taints
            if node.node.unschedulable:
                taints = (*node.node.taints, UNSCHEDULABLE_TAINT)
            return tolerates_all(self.tolerations, taints) is None
        return True

    def counts_claim(self, claim: ClaimBin) -> bool:
        # A claim is a node yet to be made: its requirements stand for its labels, as in Karpenter.
        if self.terms is not None and not any(claim.requirements.compatible(t) for t in self.terms):
            return False
        return self.tolerations is None or tolerates_all(self.tolerations, claim.template.taints) is None


def node_domain(node: NodeBin, key: str) -> str | None:
    if key == wk.ZONE:
        return node.zone
    if key == wk.CAPACITY_TYPE:
        return node.capacity_type
    return node.node.labels.get(key)


def claim_domain(claim: ClaimBin, key: str) -> str | None:
    """The claim's domain once it is pinned to one (None before: its pods are counted when it is)."""
    if key == wk.ZONE:
        return claim.zone
    if key == wk.CAPACITY_TYPE:
        return claim.capacity_type
    label = claim.template.labels.get(key)
    if label is not None:
        return label
    req = claim.requirements.get(key)
    if req is not None and not req.complement and len(req.values) == 1:
        return next(iter(req.values))
    values = {t.it.labels.get(key) for t in claim.options}
    return values.pop() if len(values) == 1 else None


def fit_domains(fit: Fit, key: str) -> set[str]:
    """The domains a new node of the fit can be in: none when its nodes would lack the label."""
    if key == wk.ZONE:
        return set(fit.zones)
    if key == wk.CAPACITY_TYPE:
        return set(fit.capacity_types)
    label = fit.template.labels.get(key)
    req = fit.requirements.get(key)
    if label is not None:
        return {label} if req is None or req.has(label) else set()
    from_types = {v for t in fit.types if (v := t.it.labels.get(key)) is not None}
    if from_types:
        return {v for v in from_types if req is None or req.has(v)}
    if req is not None and not req.complement:
        return set(req.values)  # the pool defines the label's values: a claim picks one
    return set()


def domain_counts(state: Topology, key: str, ids: frozenset[int], node_filter: NodeFilter | None = None,
                  domains: dict[str, int] | None = None) -> dict[str, int]:
    """Pods of the groups ``ids`` per domain of ``key`` over the bins the filter counts; every domain
    of a node the filter counts is present (with 0 when it holds none)."""
    out: dict[str, int] = {} if domains is None else domains
    for node in state.nodes:
        if node_filter is not None and not node_filter.counts_node(node):
            continue
        domain = node_domain(node, key)
        if domain is not None:
            out[domain] = out.get(domain, 0) + count(node.counts, ids)
    for claim in state.claims:
        if not claim.counts or (node_filter is not None and not node_filter.counts_claim(claim)):
            continue
        domain = claim_domain(claim, key)
        if domain is not None:
            out[domain] = out.get(domain, 0) + count(claim.counts, ids)
    return out


def left_out(state: Topology, key: str, ids: frozenset[int], node_filter: NodeFilter) -> dict[str, int]:
    """Pods of the groups ``ids`` per domain on the bins the filter does not count (to take off totals)."""
    out: dict[str, int] = {}
    for node in state.nodes:
        domain = node_domain(node, key)
        if domain is not None and not node_filter.counts_node(node):
            out[domain] = out.get(domain, 0) + count(node.counts, ids)
    for claim in state.claims:
        domain = claim_domain(claim, key) if claim.counts else None
        if domain is not None and not node_filter.counts_claim(claim):
            out[domain] = out.get(domain, 0) + count(claim.counts, ids)
    return out


def counted_node_domains(nodes: Sequence[NodeBin], key: str, node_filter: NodeFilter) -> set[str]:
    """Domains of the existing nodes the spread counts (each is a domain even with no pod in it)."""
    return {d for node in nodes if (d := node_domain(node, key)) is not None and node_filter.counts_node(node)}
