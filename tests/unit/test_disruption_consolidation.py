"""The consolidation search: multi-node first, single nodes next, cheaper or not at all, the spot rule."""

from __future__ import annotations

from collections.abc import Sequence

from nodescale.disruption import consolidation as c
from nodescale.disruption.decisions import Decision, Refusal
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model.currency import USD, render
from nodescale.model.node import ClusterNode
from nodescale.model.pod import Pod
from tests.builders import replacement


def pod(name: str) -> Pod:
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default"},
                          "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}})


def view(name: str, pods: int = 1, price: float = 0.1, capacity_type: str = "on-demand") -> NodeView:
    raw = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": capacity_type}}}
    return NodeView.from_node(ClusterNode.from_dict(raw), [pod(f"{name}-{i}") for i in range(pods)], price)


def options(n: int, price: float, ct: str = "spot") -> list[tuple[str, float, str]]:
    return [(f"t{i}.large", price + i * 0.0001, ct) for i in range(n)]


def test_multi_node_takes_the_longest_prefix_that_fits() -> None:
    nodes = [view(n, pods=i + 1) for i, n in enumerate("abcde")]
    # Up to three nodes' pods fit on what stays; more need a node as dear as what they free.
    def sim(taken: Sequence[NodeView]) -> Simulation:
        if len(taken) <= 3:
            return Simulation()
        return Simulation(replacements=[replacement("p", 1.0, options(1, 1.0, "on-demand"), ["on-demand"])])

    result = c.search(nodes, sim)
    assert isinstance(result.decision, Decision)
    assert result.decision.nodes == ["a", "b", "c"] and result.decision.action == "delete"
    assert abs(result.decision.saving_per_hour - 0.3) < 1e-9


def test_falls_back_to_single_nodes_and_keeps_each_refusal() -> None:
    nodes = [view("a", 1), view("b", 2), view("c", 3)]

    def sim(taken: Sequence[NodeView]) -> Simulation:
        if [n.name for n in taken] == ["c"]:
            return Simulation()
        return Simulation(unschedulable=[("default/x", "too big")])

    result = c.search(nodes, sim)
    assert result.decision is not None and result.decision.nodes == ["c"]
    assert [r.nodes for r in result.refusals] == [["a"], ["b"]]
    assert all("would have nowhere to go: too big" in r.why for r in result.refusals)


def test_several_nodes_replaced_by_one_cheaper_node() -> None:
    nodes = [view("a", price=0.2), view("b", price=0.2)]
    new = replacement("p", 0.15, options(3, 0.15, "on-demand"), ["on-demand"])
    out = c.evaluate(nodes, Simulation(replacements=[new]))
    assert isinstance(out, Decision) and out.action == "replace" and out.replacements == [new] and out.replacements[0] is new
    assert abs(out.saving_per_hour - 0.25) < 1e-9 and "replaced by one t0.large" in render(out.detail, USD)


def test_two_new_nodes_are_not_a_consolidation() -> None:
    new = replacement("p", 0.01, options(1, 0.01), ["spot"])
    out = c.evaluate([view("a")], Simulation(replacements=[new, new]))
    assert isinstance(out, Refusal) and "2 new nodes" in out.why


def test_spot_is_replaced_by_spot_only_with_fifteen_cheaper_types() -> None:
    # #31.5: with the SpotToSpotConsolidation gate on (off, spot is never replaced by spot: test_feature_gates).
    spot = [view("a", price=0.5, capacity_type="spot")]
    few = c.evaluate(spot, Simulation(replacements=[replacement("p", 0.1, options(14, 0.1), ["spot"])]), spot_to_spot=True)
    assert isinstance(few, Refusal) and "only 14 cheaper instance type(s)" in few.why
    enough = c.evaluate(spot, Simulation(replacements=[replacement("p", 0.1, options(15, 0.1), ["spot"])]),
                        spot_to_spot=True)
    assert isinstance(enough, Decision)
    # Types dearer than the node do not count towards the fifteen.
    mixed = options(10, 0.1) + options(10, 0.9)
    out = c.evaluate(spot, Simulation(replacements=[replacement("p", 0.1, mixed, ["spot"])]), spot_to_spot=True)
    assert isinstance(out, Refusal)
    # On-demand nodes have no such rule.
    od = c.evaluate([view("a", price=0.5)], Simulation(replacements=[replacement("p", 0.1, options(1, 0.1), ["spot"])]))
    assert isinstance(od, Decision)


def test_search_stops_when_its_time_is_up() -> None:
    ticks = iter(range(100))
    result = c.search([view("a"), view("b")], lambda taken: Simulation(unschedulable=[("x", "y")]),
                      max_seconds=2, clock=lambda: float(next(ticks)))
    assert result.decision is None and result.simulations <= 2
