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
    held = node("held", [pod("keep", annotations={"karpenter.sh/do-not-disrupt": "true"})])
    out = planner.plan(inputs([held, node("a", [pod("x"), pod("y")])], [static(1)]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["a"]]
    assert [(r.nodes, r.kind) for r in out.refusals] == [(["held"], Blocker.DO_NOT_DISRUPT)]
