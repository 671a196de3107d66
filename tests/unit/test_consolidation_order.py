"""#31.5: consolidation tries its candidates in Karpenter's order, the highest savings ratio first.

Karpenter v1.14+ (kubernetes-sigs/karpenter ``pkg/controllers/disruption/consolidation.go``,
``sortCandidates``) orders candidates by price / (1 + each reschedulable pod's eviction cost, negatives
counting 0), highest first; nodescale used to take the fewest pods first, then the dearest node.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodescale.disruption import consolidation as c
from nodescale.disruption.decisions import Decision
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model.node import ClusterNode
from nodescale.model.pod import Pod

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def pod(name: str, deletion_cost: int | None = None, priority: int | None = None) -> Pod:
    meta: dict = {"name": name, "namespace": "default"}
    if deletion_cost is not None:
        meta["annotations"] = {DELETION_COST: str(deletion_cost)}
    spec: dict = {"containers": [{"name": "c"}]}
    if priority is not None:
        spec["priority"] = priority
    return Pod.from_dict({"metadata": meta, "spec": spec, "status": {"phase": "Running"}})


def view(name: str, price: float, pods: Sequence[Pod]) -> NodeView:
    raw = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": "on-demand"}}}
    return NodeView.from_node(ClusterNode.from_dict(raw), list(pods), price)


def singles_tried(nodes: Sequence[NodeView]) -> list[str]:
    """The order single-node consolidation tries ``nodes`` in, none of them consolidating."""
    def sim(taken: Sequence[NodeView]) -> Simulation:
        return Simulation(unschedulable=[("default/x", "no room")])

    return [r.nodes[0] for r in c.search(nodes, sim).refusals]


def test_candidates_are_sorted_by_savings_ratio_descending() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter pkg/controllers/disruption/balanced_scoring_test.go,
    It "should sort non-Balanced candidates by savings ratio descending": the same price, one pod each, the
    pods' eviction costs 9 and 4 (a deletion cost of 8 and 3 times 2^27) and 1: the cheapest pod first."""
    a = view("a", 4.84, [pod("pa", deletion_cost=8 * 2**27)])  # ratio 4.84 / 10
    b = view("b", 4.84, [pod("pb")])  # 4.84 / 2
    cc = view("c", 4.84, [pod("pc", deletion_cost=3 * 2**27)])  # 4.84 / 5
    assert singles_tried([a, b, cc]) == ["b", "c", "a"]


def test_pod_priority_raises_a_nodes_disruption() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter pkg/controllers/disruption/suite_test.go, Describe
    "Pod Eviction Cost", It "should have a higher disruptionCost for a pod with a higher priority", through
    the ratio sort: a node whose one pod has priority
    4 * 2^25 (cost 5) goes after a node of two ordinary pods (cost 2) at the same price."""
    urgent = view("a", 1.0, [pod("pa", priority=4 * 2**25)])
    plain = view("b", 1.0, [pod("pb1"), pod("pb2")])
    assert singles_tried([urgent, plain]) == ["b", "a"]


def test_the_node_with_the_best_savings_ratio_is_consolidated_first() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter pkg/controllers/disruption/consolidation_test.go, It "should
    consolidate the node with best savings ratio first", and singlenodeconsolidation_test.go, It "should sort
    candidates by savings ratio with different disruption costs": a dear node of two pods (1.0/3) goes
    before a cheap node of one pod (0.1/2), though it has more pods."""
    dear = view("dear", 1.0, [pod("d1"), pod("d2")])
    cheap = view("cheap", 0.1, [pod("c1")])

    def sim(taken: Sequence[NodeView]) -> Simulation:
        return Simulation() if len(taken) == 1 else Simulation(unschedulable=[("default/x", "no room")])

    d = c.search([cheap, dear], sim).decision
    assert isinstance(d, Decision) and d.nodes == ["dear"]


def test_equal_ratios_go_by_node_name() -> None:
    """#31.5. Karpenter's sort is unstable (Go's sort.Slice), so equal ratios fall in any order there;
    nodescale breaks the tie by node name so that a run repeats: a (0.75 / 3) before b (0.5 / 2)."""
    a = view("a", 0.75, [pod("a1"), pod("a2")])
    b = view("b", 0.5, [pod("b1")])
    assert c.savings_ratio(a) == c.savings_ratio(b)
    assert singles_tried([b, a]) == ["a", "b"]


def pooled(name: str, pool: str, price: float) -> NodeView:
    raw = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": "on-demand",
                                                 "karpenter.sh/nodepool": pool}}}
    return NodeView.from_node(ClusterNode.from_dict(raw), [pod(f"p-{name}")], price)


def test_single_node_consolidation_interleaves_nodepools() -> None:
    """#31.5 (issue #31 point 5, single-node order). Restates kubernetes-sigs/karpenter
    pkg/controllers/disruption/singlenodeconsolidation.go ``SortCandidates``/``shuffleCandidates`` as its
    singlenodeconsolidation_test.go, Describe "SingleNodeConsolidation", Context "Candidate Shuffling", checks it
    (It "should sort candidates by savings ratio with different disruption costs": each pool's candidates in
    ratio order, dealt out one pool at a time): pool "big" has three nodes better than pool "small"'s only one,
    and still "small"'s node is tried second, not last (the old order was a1, a2, a3, b1)."""
    nodes = [pooled("a1", "big", 1.0), pooled("a2", "big", 0.9), pooled("a3", "big", 0.8),
             pooled("b1", "small", 0.1)]
    assert singles_tried(nodes) == ["a1", "b1", "a2", "a3"]


def test_interleaving_keeps_each_pools_ratio_order() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter singlenodeconsolidation_test.go, Context "Candidate Shuffling",
    It "should sort candidates by savings ratio with different disruption costs": three pools with one node of each
    ratio come out as the three best, then the three middle, then the three worst."""
    nodes = [pooled(f"{pool}-{rank}", pool, price) for pool in ("p1", "p2", "p3")
             for rank, price in (("lo", 0.05), ("mid", 0.2), ("hi", 1.0))]
    tried = singles_tried(nodes)
    assert [n.split("-")[1] for n in tried] == ["hi"] * 3 + ["mid"] * 3 + ["lo"] * 3
    assert tried[:3] == ["p1-hi", "p2-hi", "p3-hi"]


def test_a_pool_with_room_for_one_has_each_of_its_nodes_tried_alone() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter singlenodeconsolidation.go ``ComputeCommands`` (a pool is skipped
    only when its budget is 0: a single-node command takes one node), as its suite_test.go's budget cases check it:
    with a budget of one the second-best node is still tried when the best does not consolidate (the old code cut
    the single-node list to the budget's first node)."""
    nodes = [pooled("a1", "big", 1.0), pooled("a2", "big", 0.9)]

    def sim(taken: Sequence[NodeView]) -> Simulation:
        ok = [v.name for v in taken] == ["a2"]
        return Simulation() if ok else Simulation(unschedulable=[("default/x", "no room")])

    d = c.search(nodes, sim, cap=lambda ordered: list(ordered[:1])).decision
    assert isinstance(d, Decision) and d.nodes == ["a2"]


def _refusing(taken: Sequence[NodeView]) -> Simulation:
    return Simulation(unschedulable=[("default/x", "no room")])


def test_pools_a_timed_out_pass_did_not_reach_go_first() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter singlenodeconsolidation_test.go, Context "Candidate Shuffling",
    It "should prioritize nodepools that timed out in previous runs": with "small" remembered as unseen, its node
    is tried first though "big"'s are better."""
    nodes = [pooled("a1", "big", 1.0), pooled("a2", "big", 0.9), pooled("b1", "small", 0.1)]
    tried = [r.nodes[0] for r in c.search(nodes, _refusing, first_pools=("small",)).refusals]
    assert tried == ["b1", "a1", "a2"]


def test_a_timeout_remembers_the_pools_not_reached_and_a_full_pass_forgets_them() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter singlenodeconsolidation_test.go, Context "Candidate Shuffling",
    It "should mark nodepools as timed out when timeout occurs" (a timeout before any candidate: every pool is
    unseen) and It "should reset timed out nodepools when all nodepools are evaluated" (none left unseen)."""
    nodes = [pooled("a1", "big", 1.0), pooled("b1", "small", 0.1), pooled("c1", "other", 0.05)]
    times = iter([0.0] + [100.0] * 50)  # the multi-node passes and the first single-node check are past the stop
    out = c.search(nodes, _refusing, max_seconds=10.0, clock=lambda: next(times))
    assert out.timed_out and sorted(out.unseen_pools or []) == ["big", "other", "small"]
    out = c.search(nodes, _refusing, first_pools=("small",))
    assert not out.timed_out and out.unseen_pools == []
