"""A static pool above its spec.replicas gives up the extra nodes (Karpenter's static capacity design: "When a
user scales down a static NodePool, Karpenter will drain nodes and terminate" them; karpenter.sh NodePools,
spec.replicas: scale operations bypass disruption budgets but still respect PodDisruptionBudgets)."""

from __future__ import annotations

import dataclasses

from nodescale.disruption import planner
from nodescale.disruption.decisions import Action, Blocker, Reason
from nodescale.model.nodepool import Budget
from tests.builders import fits_elsewhere, inputs, node, pod, pool


def static(replicas: int):
    # A budget of zero: the scale-down goes ahead all the same.
    return dataclasses.replace(pool(budgets=(Budget(nodes="0"),)), replicas=replicas)


def test_the_emptiest_extra_nodes_go_whatever_the_budget_says() -> None:
    views = [node("busy", [pod("p1"), pod("p2")]), node("one", [pod("q")]), node("empty")]
    out = planner.plan(inputs(views, [static(1)]), fits_elsewhere)
    assert [(d.nodes, d.reason, d.action) for d in out.decisions] == [
        (["empty"], Reason.SCALED_DOWN, Action.DELETE), (["one"], Reason.SCALED_DOWN, Action.DELETE)]
    assert out.decisions[1].pods == ["default/q"] and "has 3 nodes and spec.replicas 1" in out.decisions[0].detail


def test_at_or_below_replicas_nothing_goes_and_nodes_being_drained_count_as_gone() -> None:
    assert planner.plan(inputs([node("a"), node("b")], [static(2)]), fits_elsewhere).decisions == []
    out = planner.plan(inputs([node("a"), node("b"), node("c")], [static(2)], in_progress=frozenset({"c"})),
                       fits_elsewhere)
    assert out.decisions == []


def test_a_node_held_by_do_not_disrupt_is_passed_over_for_the_next() -> None:
    """Since #31.5 a do-not-disrupt node comes last (Karpenter's order), so the pool is scaled to zero here to reach
    it: the other node still goes, the held one is refused."""
    held = node("held", [pod("keep", annotations={"karpenter.sh/do-not-disrupt": "true"})])
    out = planner.plan(inputs([held, node("a", [pod("x"), pod("y")])], [static(0)]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["a"]]
    assert [(r.nodes, r.kind) for r in out.refusals] == [(["held"], Blocker.DO_NOT_DISRUPT)]


def _cost(n: int) -> dict:
    """A pod-deletion-cost annotation adding ``n`` to the pod's eviction cost (Karpenter's cost / 2^27)."""
    return {"controller.kubernetes.io/pod-deletion-cost": str(n * 2**27)}


def test_scale_down_goes_in_karpenters_disruption_cost_order() -> None:
    """#31.5 (issue #31 point 5, static scale-down order). Restates kubernetes-sigs/karpenter
    pkg/controllers/static/deprovisioning/suite_test.go, Describe "Static Deprovisioning Controller", Context
    "Deprovision Candidate Selection", Describe "disruption cost ordering", DescribeTable "scales down in disruption
    cost order" (two nodes each of DaemonSet-only, one pod, two pods, a do-not-disrupt pod; replicas 8 -> 6 -> 4
    -> 2): the DaemonSet-only nodes go first, then the one-pod, then the two-pod; the do-not-disrupt ones last
    (nodescale then holds them, a deliberate difference). Plus the case that tells Karpenter's cost from a pod
    count: a node of one pod with a deletion cost (eviction cost 3) stays while one of two plain pods (2) goes."""
    views = []
    for i in range(2):
        views.append(node(f"low-{i}", [pod(f"l{i}")]))
        views.append(node(f"high-{i}", [pod(f"h{i}a"), pod(f"h{i}b")]))
        views.append(node(f"dnd-{i}", [pod(f"d{i}", annotations={"karpenter.sh/do-not-disrupt": "true"})]))
        only_ds = node(f"ds-{i}")
        only_ds.daemon_pods = [pod(f"ds{i}")]
        views.append(only_ds)

    def gone(replicas: int) -> set[str]:
        out = planner.plan(inputs(views, [static(replicas)]), fits_elsewhere)
        return {n for d in out.decisions for n in d.nodes}

    assert gone(6) == {"ds-0", "ds-1"}
    assert gone(4) == {"ds-0", "ds-1", "low-0", "low-1"}
    assert gone(2) == {"ds-0", "ds-1", "low-0", "low-1", "high-0", "high-1"}
    costly = node("costly", [pod("c", annotations=_cost(2))])  # 3
    plain = node("plain", [pod("p1"), pod("p2")])  # 2
    out = planner.plan(inputs([costly, plain], [static(1)]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["plain"]]


def test_scale_down_weighs_the_cost_by_the_nodes_remaining_lifetime() -> None:
    """#31.5. Restates kubernetes-sigs/karpenter pkg/controllers/static/deprovisioning/controller.go
    ``resolvedDeprovisioningCandidates`` (rescheduling cost times ``LifetimeRemaining``, pkg/utils/disruption), as
    the suite_test.go DescribeTable "scales down in disruption cost order" checks the cost half: under an
    expireAfter of 100h a node of two pods 90h old (2 x 0.1) goes before a node of one pod 2h old (1 x 0.98),
    where the old code took the fewest pods first."""
    p = dataclasses.replace(static(1), disruption=dataclasses.replace(static(1).disruption,
                                                                      expire_after_seconds=100 * 3600.0))
    old = node("old", [pod("o1"), pod("o2")], age_h=90)
    young = node("young", [pod("y")], age_h=2)
    out = planner.plan(inputs([old, young], [p]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["old"]]
