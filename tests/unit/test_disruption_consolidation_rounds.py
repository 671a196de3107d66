"""Several consolidations in one pass: each after the first simulated with the earlier ones' nodes gone.

Karpenter's disruption loop takes one command per reconcile and reconciles again at once, so in a minute
it takes many, each with the nodes of the commands before it no longer destinations, all within the
NodePool's budget. Restated from kubernetes-sigs/karpenter pkg/controllers/disruption/consolidation_test.go,
Context "Budgets": "should only allow 3 nodes to be deleted in multi node consolidation delete" (the budget
bounds the pass, however many decisions it takes) and "should allow 2 nodes from each nodePool to be
deleted"; Context "Delete": "won't delete nodes if it would make a non-pending pod go pending" (what the
earlier decisions' pods take is gone for the later ones').
"""

from __future__ import annotations

from collections.abc import Sequence

from nodescale.disruption import planner
from nodescale.disruption.consolidation import MAX_MULTI_NODE
from nodescale.disruption.decisions import Blocker
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model.nodepool import Budget
from tests.builders import fits_elsewhere, inputs, node, pod, pool, replacement, since


def spare_room(slots: int):  # noqa: ANN201 - a simulator factory
    """What stays has room for ``slots`` pods in all: more than that taken away at once leaves some nowhere."""

    def simulate(nodes: Sequence[NodeView]) -> Simulation:
        pods = [p.key for n in nodes for p in n.pods]
        return Simulation(unschedulable=[(k, "no room left") for k in pods[slots:]])

    return simulate


def busy(count: int, pool_name: str = "default", prefix: str = "n") -> list[NodeView]:
    return [node(f"{prefix}{i:03d}", [pod(f"{prefix}{i:03d}-p")], nodepool=pool_name) for i in range(count)]


def test_a_pass_takes_consolidations_of_at_most_100_nodes_each_until_the_budget_is_spent() -> None:
    out = planner.plan(inputs(busy(250)), fits_elsewhere)
    assert [len(d.nodes) for d in out.decisions] == [MAX_MULTI_NODE, MAX_MULTI_NODE, 50]
    assert all(d.action == "delete" and d.reason == "Underutilized" for d in out.decisions)
    assert len({n for d in out.decisions for n in d.nodes}) == 250
    # A 30% budget bounds the whole pass, not each decision.
    out = planner.plan(inputs(busy(250), [pool(budgets=(Budget(nodes="30%"),))]), fits_elsewhere)
    assert [len(d.nodes) for d in out.decisions] == [75]


def test_each_pool_spends_its_own_budget_across_the_pass() -> None:
    views = busy(150, "a", "a") + busy(150, "b", "b")
    pools = [pool("a", budgets=(Budget(nodes="40%"),)), pool("b", budgets=(Budget(nodes="20%"),))]
    out = planner.plan(inputs(views, pools), fits_elsewhere)
    taken = [n for d in out.decisions for n in d.nodes]
    assert sum(n.startswith("a") for n in taken) == 60 and sum(n.startswith("b") for n in taken) == 30
    assert all(len(d.nodes) <= MAX_MULTI_NODE for d in out.decisions)


def test_a_later_consolidation_counts_the_room_the_earlier_ones_took() -> None:
    # Room for 150 pods elsewhere: the first decision takes 100 nodes' pods, the second only 50 more, and no
    # node alone is consolidated after that, though each alone would fit on what stays.
    out = planner.plan(inputs(busy(250)), spare_room(150))
    assert [len(d.nodes) for d in out.decisions] == [MAX_MULTI_NODE, 50]
    assert len({n for d in out.decisions for n in d.nodes}) == 150
    assert not any(r.kind == Blocker.NOT_CONSOLIDATABLE for r in out.refusals)


def test_a_replacement_ends_the_pass_s_consolidations() -> None:
    # The next simulation could not place pods on the node being launched: the next pass sees it.
    def cheaper_node(nodes: Sequence[NodeView]) -> Simulation:
        return Simulation(replacements=[replacement("default", 0.05, [("m5.large", 0.05, "on-demand")],
                                                    ["on-demand"])])

    out = planner.plan(inputs(busy(250)), cheaper_node)
    [d] = out.decisions
    assert d.action == "replace" and len(d.nodes) == MAX_MULTI_NODE


def test_an_empty_node_removed_this_pass_is_no_destination_for_consolidated_pods() -> None:
    empty = node("e", [], annotations=since(600))
    full = node("a", [pod("x")])

    def only_on_e(nodes: Sequence[NodeView]) -> Simulation:
        if any(n.name == "e" for n in nodes):
            return Simulation(unschedulable=[(p.key, "no room left") for n in nodes for p in n.pods])
        return Simulation()

    out = planner.plan(inputs([empty, full]), only_on_e)
    assert [(d.reason, d.nodes) for d in out.decisions] == [("Empty", ["e"])]
    [r] = [r for r in out.refusals if r.kind == Blocker.NOT_CONSOLIDATABLE]
    assert r.nodes == ["a"] and "default/x would have nowhere to go: no room left" in r.why


def test_a_v1alpha5_pool_still_consolidates_once_a_pass() -> None:
    p = pool(api="karpenter.sh/v1alpha5", one_at_a_time=True)
    out = planner.plan(inputs(busy(250), [p]), fits_elsewhere)
    assert [len(d.nodes) for d in out.decisions] == [MAX_MULTI_NODE]
