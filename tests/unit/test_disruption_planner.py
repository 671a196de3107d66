"""The disruption decisions of one run: order, guards, budgets and the reasons given."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

from nodescale.disruption import planner
from nodescale.disruption.decisions import Blocker
from nodescale.disruption.drift import Drifted, DriftKind
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model.currency import USD, render
from nodescale.model.nodepool import Budget
from nodescale.model.pdb import PodDisruptionBudget
from tests.builders import NOW, fits_elsewhere, inputs, node, nowhere, pod, pool, replacement, since

V1BETA1 = "karpenter.sh/v1beta1"

# -- emptiness ------------------------------------------------------------------------------------------------


def test_an_empty_node_is_first_marked_then_removed_once_consolidate_after_has_passed() -> None:
    first = planner.plan(inputs([node("a")]))
    assert first.mark_empty == ["a"] and first.decisions == []
    early = planner.plan(inputs([node("a", annotations=since(29))]))
    assert early.decisions == [] and early.mark_empty == []
    late = planner.plan(inputs([node("a", annotations=since(31), price=0.2)]))
    [d] = late.decisions
    assert (d.nodes, d.reason, d.action) == (["a"], "Empty", "delete")
    assert d.saving_per_hour == 0.2 and "consolidateAfter 30s" in d.detail


def test_a_node_with_pods_again_loses_its_empty_mark() -> None:
    out = planner.plan(inputs([node("a", [pod("p")], annotations=since(100))]), None)
    assert out.clear_empty == ["a"] and out.decisions == []


def test_consolidate_after_never_keeps_empty_nodes() -> None:
    out = planner.plan(inputs([node("a", annotations=since(10_000))], [pool(consolidate_after_seconds=None)]))
    assert out.decisions == [] and out.mark_empty == []


def test_node_do_not_disrupt_and_legacy_do_not_consolidate_hold_an_empty_node() -> None:
    # #31.3: do-not-consolidate on a v1beta1 pool's node (Karpenter v1 ignores it: test_legacy_annotations).
    for key in ("karpenter.sh/do-not-disrupt", "karpenter.sh/do-not-consolidate"):
        out = planner.plan(inputs([node("a", annotations={**since(100), key: "true"})], [pool(api=V1BETA1)]))
        [r] = out.refusals
        assert out.decisions == [] and r.kind == Blocker.DO_NOT_DISRUPT
        assert r.message == f"not removed (empty): node a has {key}"


# -- budgets --------------------------------------------------------------------------------------------------


def test_budget_caps_emptiness_per_run_and_says_why() -> None:
    views = [node(n, annotations=since(100)) for n in "abcd"]
    out = planner.plan(inputs(views, [pool(budgets=(Budget(nodes="50%"),))]))
    assert [d.nodes for d in out.decisions] == [["a"], ["b"]]
    assert [r.nodes for r in out.refusals] == [["c"], ["d"]]
    assert all(r.kind == Blocker.BUDGET and "budget nodes=50%" in r.why for r in out.refusals)


def test_nodes_already_disrupting_use_up_the_budget() -> None:
    views = [node("busy", [pod("p")]), node("a", annotations=since(100))]
    out = planner.plan(inputs(views, [pool(budgets=(Budget(nodes="1"),))], in_progress=frozenset({"busy"})))
    assert out.decisions == [] and out.refusals[0].nodes == ["a"]


def test_zero_budget_in_its_cron_window_blocks_drift_but_not_outside() -> None:
    window = (Budget(nodes="0", schedule="0 9 * * mon-fri", duration_seconds=8 * 3600, reasons=("Drifted",)),
              Budget(nodes="100%"))
    drifted = node("a", [pod("p")], labels={"team": "b"})
    inside = planner.plan(inputs([drifted], [pool(budgets=window)]))
    [r] = inside.refusals
    assert inside.decisions == [] and r.reason == "Drifted" and r.kind == Blocker.BUDGET
    assert r.message.startswith("not replaced (drifted): budget nodes=0 (schedule '0 9 * * mon-fri' for 8h)")
    outside = planner.plan(dataclasses.replace(inputs([drifted], [pool(budgets=window)]), now=NOW + timedelta(hours=8)))
    assert [d.reason for d in outside.decisions] == ["Drifted"]


# -- expiry ---------------------------------------------------------------------------------------------------


def test_v1_expiry_is_forceful_past_budgets_and_do_not_disrupt() -> None:
    held = pod("p", {"karpenter.sh/do-not-disrupt": "true"})
    p = pool(expire_after_seconds=3600.0, budgets=(Budget(nodes="0"),))
    out = planner.plan(inputs([node("a", [held], age_h=2)], [p]))
    [d] = out.decisions
    assert (d.reason, d.action, d.pods) == ("Expired", "replace", ["default/p"])


def test_older_api_expiry_is_held_by_budgets_and_do_not_disrupt() -> None:
    p = pool(api="karpenter.sh/v1beta1", expire_after_seconds=3600.0)
    out = planner.plan(inputs([node("a", [pod("p", {"karpenter.sh/do-not-disrupt": "true"})])], [p]))
    assert out.decisions == [] and out.refusals[0].message == "not replaced (expired): pod default/p has " \
                                                               "karpenter.sh/do-not-disrupt"
    p = pool(api="karpenter.sh/v1beta1", expire_after_seconds=3600.0, budgets=(Budget(nodes="0"),))
    out = planner.plan(inputs([node("a", [pod("p")])], [p]))
    assert out.decisions == [] and out.refusals[0].kind == Blocker.BUDGET


# -- repair ---------------------------------------------------------------------------------------------------


def test_a_node_not_ready_past_its_toleration_is_replaced() -> None:
    # #31.5: Ready=False is tolerated 30 minutes (karpenter-provider-aws's RepairPolicies), whatever
    # NODESCALE_REPAIR_THRESHOLD_SECONDS says (it holds for EC2 status checks only).
    views = [node("sick", [pod("p")], ready=False, ready_for_s=1900)] + [node(f"ok{i}", [pod(f"q{i}")]) for i in range(5)]
    out = planner.plan(inputs(views, repair_threshold_seconds=600))
    [d] = out.decisions
    assert (d.nodes, d.reason, d.action) == (["sick"], "Unhealthy", "replace")
    assert d.detail == "NotReady for 1900s"
    fresh = [node("sick", [pod("p")], ready=False, ready_for_s=1700)] + views[1:]
    assert planner.plan(inputs(fresh, repair_threshold_seconds=600)).decisions == []


def test_failing_status_checks_past_the_threshold_count_as_unhealthy() -> None:
    views = [node("a", [pod("p")])] + [node(f"ok{i}", [pod(f"q{i}")]) for i in range(5)]
    out = planner.plan(inputs(views, impaired_since={"a": NOW - timedelta(minutes=11)}))
    assert [d.detail for d in out.decisions] == ["failing EC2 status checks for 660s"]


def test_more_than_a_fifth_of_a_pool_unhealthy_repairs_nothing_and_says_why() -> None:
    views = [node(n, [pod(n)], ready=False, ready_for_s=3600) for n in ("a", "b")] + [node("c", [pod("c")])]
    out = planner.plan(inputs(views))
    assert out.decisions == []
    assert {r.kind for r in out.refusals} == {Blocker.HEALTH}
    assert "2 of 3 nodes of NodePool default are unhealthy (more than 20%)" in out.notes[0]


# -- drift ----------------------------------------------------------------------------------------------------


def test_cloud_drift_and_template_drift_replace_nodes_with_pods_and_delete_empty_ones() -> None:
    views = [node("ami", [pod("p")]), node("label", labels={"team": "b"}, annotations=since(1))]
    out = planner.plan(inputs(views, cloud_drift={"ami": Drifted(DriftKind.AMI, "image ami-1 is no longer selected")}))
    by = {d.nodes[0]: d for d in out.decisions}
    assert by["ami"].action == "replace" and "image ami-1 is no longer selected" in by["ami"].detail
    assert by["ami"].drift == DriftKind.AMI and by["label"].drift == DriftKind.NODE_POOL
    assert by["label"].action == "delete" and "NodePool label team='a' is 'b' on the node" in by["label"].detail


def test_a_pdb_with_no_disruptions_left_holds_drift() -> None:
    pdb = PodDisruptionBudget.from_dict({"metadata": {"name": "web", "namespace": "default"},
                                         "spec": {"selector": {"matchLabels": {"app": "web"}}},
                                         "status": {"disruptionsAllowed": 0}})
    views = [node("a", [pod("p", labels={"app": "web"})])]
    out = planner.plan(inputs(views, cloud_drift={"a": Drifted(DriftKind.NODE_CLASS, "changed")}, pdbs=[pdb]))
    assert out.decisions == [] and out.refusals[0].kind == Blocker.PDB
    assert "PodDisruptionBudget default/web (0 disruptions allowed)" in out.refusals[0].why


def test_nodes_in_progress_and_replacements_are_never_candidates() -> None:
    views = [node("a", annotations=since(100)), node("b", annotations=since(100))]
    out = planner.plan(inputs(views, in_progress=frozenset({"a"}), protected=frozenset({"b"})))
    assert out.decisions == [] and out.refusals == []


# -- consolidation --------------------------------------------------------------------------------------------


def test_underutilized_nodes_whose_pods_fit_elsewhere_are_consolidated() -> None:
    views = [node(n, [pod(n)]) for n in "abc"]
    out = planner.plan(inputs(views, [pool(budgets=(Budget(nodes="2"),))]), fits_elsewhere)
    [d] = out.decisions
    assert d.reason == "Underutilized" and len(d.nodes) == 2 and d.action == "delete"


def test_a_do_not_disrupt_pod_keeps_its_node_with_the_exact_reason() -> None:
    views = [node("a", [pod("x", {"karpenter.sh/do-not-disrupt": "true"})]), node("b", [pod("y")])]
    out = planner.plan(inputs(views), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["b"]]
    [r] = out.refusals
    assert r.message == "not consolidated: pod default/x has karpenter.sh/do-not-disrupt"


def test_do_not_disrupt_with_a_duration_protects_only_for_that_long() -> None:
    views = [node("a", [pod("x", {"karpenter.sh/do-not-disrupt": "30m"})])]
    out = planner.plan(inputs(views), fits_elsewhere)  # the pod started an hour ago
    assert [d.nodes for d in out.decisions] == [["a"]]
    views = [node("a", [pod("x", {"karpenter.sh/do-not-disrupt": "2h"})])]
    assert planner.plan(inputs(views), fits_elsewhere).decisions == []


def test_a_tenants_out_of_range_do_not_disrupt_neither_stops_the_pass_nor_holds_its_node() -> None:
    """#27.1: "99999999999999999h" used to raise OverflowError from every pass; now it is ignored, as
    Karpenter ignores an invalid value, and the node consolidates like any other (a non-duration such as
    "yes" used to count as "true")."""
    for value in ("99999999999999999h", "9" * 401 + "s", "yes"):
        views = [node("a", [pod("x", {"karpenter.sh/do-not-disrupt": value})]), node("b", [pod("y")])]
        out = planner.plan(inputs(views), fits_elsewhere)
        assert sorted(n for d in out.decisions for n in d.nodes) == ["a", "b"], value
        assert out.refusals == []


def test_legacy_do_not_evict_blocks_consolidation() -> None:
    # #31.3: on a v1beta1 pool's node (Karpenter v1 ignores it: test_legacy_annotations).
    out = planner.plan(inputs([node("a", [pod("x", {"karpenter.sh/do-not-evict": "true"})])], [pool(api=V1BETA1)]),
                       fits_elsewhere)
    assert out.decisions == [] and "karpenter.sh/do-not-evict" in out.refusals[0].why


def test_when_empty_pools_are_not_consolidated_and_recent_pods_wait_for_consolidate_after() -> None:
    views = [node("a", [pod("x")])]
    assert planner.plan(inputs(views, [pool(consolidation_policy="WhenEmpty")]), fits_elsewhere).decisions == []
    young = node("b", [pod("y")], ready_for_s=10)
    assert planner.plan(inputs([young]), fits_elsewhere).decisions == []


def test_pods_with_nowhere_to_go_block_consolidation() -> None:
    out = planner.plan(inputs([node("a", [pod("x")])]), nowhere)
    assert out.decisions == []
    assert out.refusals[0].message == "not consolidated: pod default/x would have nowhere to go: no node has room"


def test_zero_underutilized_budget_holds_consolidation_and_notes_it() -> None:
    p = pool(budgets=(Budget(nodes="0", reasons=("Underutilized",)),))
    out = planner.plan(inputs([node("a", [pod("x")])], [p]), fits_elsewhere)
    assert out.decisions == [] and out.refusals[0].kind == Blocker.BUDGET
    assert out.notes == ["consolidation of NodePool default held: budget nodes=0 allows 0 of 1 node(s), "
                         "0 already disrupting"]


def test_replacement_must_be_cheaper() -> None:
    def dearer(nodes: Sequence[NodeView]) -> Simulation:
        return Simulation(replacements=[replacement("default", 0.3, [("m5.xlarge", 0.3, "on-demand")], ["on-demand"])])

    out = planner.plan(inputs([node("a", [pod("x")], price=0.2)]), dearer)
    assert out.decisions == [] and "is not cheaper than $0.2000/h" in render(out.refusals[0].why, USD)
