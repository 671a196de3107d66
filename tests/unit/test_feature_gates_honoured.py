"""The feature gates honoured by the planner and the consolidation search (#31.5), and repair's unhealthy share (#31.5,
issue 31's "Defaults differ": ceil(20%))."""

from __future__ import annotations

import dataclasses

import pytest

from nodescale.disruption import consolidation as c
from nodescale.disruption import planner
from nodescale.disruption.decisions import Blocker, Decision, Refusal
from nodescale.disruption.replacement import Simulation
from nodescale.model.featuregates import ALL_ON, FeatureGates
from nodescale.scheduling import scheduler
from nodescale.scheduling.scheduler import solve
from tests.builders import inputs, itype, node, pod, pool, replacement, scheduling_pool
from tests.builders import pods as many_pods

KARPENTER_DEFAULTS = FeatureGates()


def _sick(name: str) -> object:
    return node(name, [pod(name)], ready=False, ready_for_s=3600)  # past Ready's 30-minute toleration


def test_repair_is_off_without_the_node_repair_gate() -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/controllers.go (the node health controller is
    registered only with FeatureGates.NodeRepair) and DefaultFeatureGates' NodeRepair=false."""
    views = [_sick("a"), node("b", [pod("b")]), node("c", [pod("c")]), node("d", [pod("d")]), node("e", [pod("e")])]
    assert planner.plan(inputs(views, gates=KARPENTER_DEFAULTS)).decisions == []
    on = planner.plan(inputs(views, gates=FeatureGates(node_repair=True))).decisions
    assert [(d.nodes, d.reason) for d in on] == [(["a"], "Unhealthy")]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_a_lone_bad_node_in_a_small_pool_is_repaired(size: int) -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/node/health/suite_test.go, Describe "Node Health",
    It "should consider round up when there is a low number of nodes for a nodepool": up to ceil(20%) of a pool
    may be unhealthy (allowedUnhealthyPercent scaled rounding up), so one bad node of one to five is repaired."""
    views = [_sick("a")] + [node(f"ok{i}", [pod(f"ok{i}")]) for i in range(size - 1)]
    out = planner.plan(inputs(views))
    assert [(d.nodes, d.reason) for d in out.decisions] == [(["a"], "Unhealthy")]


@pytest.mark.parametrize(("unhealthy", "size", "repaired"), [(2, 5, False), (2, 6, True), (2, 10, True),
                                                             (3, 10, False), (3, 11, True)])
def test_past_a_fifth_rounded_up_nothing_is_repaired(unhealthy: int, size: int, repaired: bool) -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/node/health/suite_test.go, It "should ignore unhealthy
    nodes if more then 20% of the nodes are unhealthy in a nodepool": unhealthy <= ceil(20% of the pool) repairs."""
    views = [_sick(f"bad{i}") for i in range(unhealthy)] + [node(f"ok{i}", [pod(f"ok{i}")])
                                                            for i in range(size - unhealthy)]
    out = planner.plan(inputs(views))
    assert len(out.decisions) == (unhealthy if repaired else 0)
    assert ({r.kind for r in out.refusals} == {Blocker.HEALTH}) is not repaired


def test_static_scale_down_is_off_without_the_static_capacity_gate() -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/controllers.go (static deprovisioning is registered
    only with FeatureGates.StaticCapacity) and DefaultFeatureGates' StaticCapacity=false."""
    static = dataclasses.replace(pool(), replicas=1)
    views = [node("a", [pod("a")]), node("b", [pod("b")], age_h=1.0)]
    assert planner.plan(inputs(views, [static], gates=KARPENTER_DEFAULTS)).decisions == []
    on = planner.plan(inputs(views, [static], gates=FeatureGates(static_capacity=True))).decisions
    assert [d.reason for d in on] == ["ScaledDown"]


def test_spot_is_not_replaced_by_spot_without_the_gate() -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/disruption/consolidation_test.go, Describe
    "Consolidation", Context "Replace", It "cannot replace spot with spot if the spotToSpotConsolidation is
    disabled": with the gate off a spot node is never replaced by a spot node, however many cheaper types there
    are; DefaultFeatureGates' SpotToSpotConsolidation=false."""
    spot = [node("a", [pod("a")], price=0.5, capacity_type="spot")]
    options = [(f"t{i}.large", 0.1 + i * 0.0001, "spot") for i in range(20)]
    sim = Simulation(replacements=[replacement("default", 0.1, options, ["spot"])])
    off = c.evaluate(spot, sim)
    assert isinstance(off, Refusal) and "SpotToSpotConsolidation is disabled" in off.why
    assert isinstance(c.evaluate(spot, sim, spot_to_spot=True), Decision)
    # Through the planner: the gate reaches the search.
    search_off = planner.plan(inputs(spot, gates=KARPENTER_DEFAULTS), lambda nodes: sim)
    assert search_off.decisions == []
    assert any("SpotToSpotConsolidation is disabled" in str(r.why) for r in search_off.refusals)
    assert [d.reason for d in planner.plan(inputs(spot, gates=ALL_ON), lambda nodes: sim).decisions] == ["Underutilized"]


def test_the_repack_gate_switches_nodescales_repack_passes_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """#31.5: Repack (nodescale's own gate, not Karpenter's; on by default) switches off both of nodescale's repack
    passes: the repacking consolidation (several nodes onto several cheaper ones) and the scheduler's repack of
    new claims, leaving Karpenter's consolidation and greedy packing."""
    assert FeatureGates().repack
    views = [node(n, [pod(f"{n}-{i}") for i in range(3)], price=0.2) for n in "abcd"]

    def two_new(nodes: object) -> Simulation:
        return Simulation(replacements=[replacement("default", 0.13, [("r5.large", 0.13, "on-demand")], ["on-demand"]),
                                        replacement("default", 0.17, [("c5.xlarge", 0.17, "on-demand")], ["on-demand"])])

    on = planner.plan(inputs(views, gates=ALL_ON), two_new).decisions
    assert [sorted(d.nodes) for d in on] == [["a", "b", "c", "d"]]
    assert planner.plan(inputs(views, gates=dataclasses.replace(ALL_ON, repack=False)), two_new).decisions == []

    calls: list[int] = []
    monkeypatch.setattr(scheduler, "repack", lambda claims, *rest: calls.append(len(claims)) or claims)
    workload = many_pods(3, "cpu", cpu="3") + many_pods(3, "mem", cpu="500m", memory="12Gi")
    types = [itype("c.xlarge", 4, 8, 0.17), itype("r.large", 2, 16, 0.13)]
    solve(workload, [scheduling_pool()], {"default": types}, repack=False)
    assert calls == []
    solve(workload, [scheduling_pool()], {"default": types})
    assert calls and calls[0] >= 2
