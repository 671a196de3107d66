"""v1alpha5 Provisioners disrupt as Karpenter v0.2x (v0.27-v0.31) did: no budgets, one action at a time.

Each test restates the behaviour of an upstream test of kubernetes-sigs/karpenter at v0.31.x,
``pkg/controllers/deprovisioning/``, named in its docstring. There, every node without pods that a
deprovisioner picked went in one command, a node with pods was replaced (or consolidated) one command
at a time, and the next command waited until the last one's nodes were gone. The pools here come
from the real converter, so these also pin what ``ttlSecondsAfterEmpty``, ``ttlSecondsUntilExpired``
and ``consolidation.enabled`` turn into.
"""

from __future__ import annotations

import dataclasses

from nodescale.config.nodepools import convert_nodepool, convert_provisioner
from nodescale.disruption import planner
from nodescale.disruption.decisions import Blocker
from nodescale.model.nodepool import NodePool
from tests.builders import fits_elsewhere, inputs, node, pod, pool, since

TWENTY = range(20)


def legacy(name: str = "legacy", **spec: object) -> NodePool:
    """A v1alpha5 Provisioner's disruption settings, as converted, on the planner tests' pool template."""
    converted, errors = convert_provisioner(
        {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name},
         "spec": {"providerRef": {"name": "default"}, **spec}},
        "test",
    )
    assert errors == [] and converted is not None
    return dataclasses.replace(pool(name), disruption=converted.disruption, api_version=converted.api_version)


def current(name: str = "current", **disruption: object) -> NodePool:
    """A karpenter.sh/v1 NodePool with Karpenter's defaults (budget 10%) and the given disruption block."""
    converted, errors = convert_nodepool(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
         "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
             "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                  "disruption": disruption}},
        "test",
    )
    assert errors == [] and converted is not None
    return dataclasses.replace(pool(name), disruption=converted.disruption, api_version=converted.api_version)


def names(decisions: list) -> list[str]:
    return sorted(n for d in decisions for n in d.nodes)


def test_a_provisioner_converts_to_no_budget_and_one_action_at_a_time_while_nodepools_keep_theirs() -> None:
    """Karpenter v0.31's Provisioner had no budget field (pkg/apis/v1alpha5/provisioner.go); v1beta1 added them."""
    d = legacy(ttlSecondsAfterEmpty=30, ttlSecondsUntilExpired=3600).disruption
    assert d.one_at_a_time and [b.nodes for b in d.budgets] == ["100%"]
    assert (d.consolidation_policy, d.consolidate_after_seconds, d.expire_after_seconds) == ("WhenEmpty", 30, 3600)
    v1 = current(consolidateAfter="30s").disruption
    assert not v1.one_at_a_time and [b.nodes for b in v1.budgets] == ["10%"]


# -- emptiness (ttlSecondsAfterEmpty) -------------------------------------------------------------------------


def test_every_empty_node_past_ttl_seconds_after_empty_goes_in_one_run_while_a_v1_pool_keeps_its_budget() -> None:
    """Restates v0.31 suite_test.go "should deprovision all empty Machine and NodeClaims in parallel (Emptiness)"
    and machine_emptiness_test.go "TTLSecondsAfterEmpty" / "can delete empty nodes with TTLSecondsAfterEmpty"."""
    views = [node(f"old{i}", annotations=since(31), nodepool="legacy") for i in TWENTY]
    views += [node(f"new{i}", annotations=since(31), nodepool="current") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(ttlSecondsAfterEmpty=30), current(consolidationPolicy="WhenEmpty",
                                                                               consolidateAfter="30s")]))
    legacy_taken = [d for d in out.decisions if d.nodes[0].startswith("old")]
    assert names(legacy_taken) == sorted(f"old{i}" for i in TWENTY)
    assert {d.reason for d in legacy_taken} == {"Empty"}
    # The v1 pool still goes 10% (2 of 20) a run, the rest held by its budget.
    assert len([d for d in out.decisions if d.nodes[0].startswith("new")]) == 2
    assert {r.kind for r in out.refusals} == {Blocker.BUDGET} and len(out.refusals) == 18
    # Not before the TTL: empty for 29 s of 30, nothing goes.
    early = planner.plan(inputs([node(f"old{i}", annotations=since(29), nodepool="legacy") for i in TWENTY],
                                [legacy(ttlSecondsAfterEmpty=30)]))
    assert early.decisions == []


# -- expiration (ttlSecondsUntilExpired) ----------------------------------------------------------------------


def test_every_empty_expired_node_goes_at_once() -> None:
    """Restates v0.31 machine_expiration_test.go "should deprovision all empty expired nodes in parallel"."""
    views = [node(f"n{i}", age_h=2, nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(ttlSecondsUntilExpired=3600)]))
    assert names(out.decisions) == sorted(f"n{i}" for i in TWENTY)
    assert {(d.reason, d.action) for d in out.decisions} == {("Expired", "delete")}


def test_expired_nodes_with_pods_are_replaced_one_at_a_time_the_longest_expired_first() -> None:
    """Restates v0.31 machine_expiration_test.go "should expire one non-empty node at a time, starting with most
    expired" and "can replace node for expiration" (the replacement is launched first: action replace)."""
    views = [node(f"n{i:02}", [pod(f"p{i}")], age_h=2 + i / 10, nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(ttlSecondsUntilExpired=3600)]))
    [d] = out.decisions
    assert (d.nodes, d.reason, d.action, d.pods) == (["n19"], "Expired", "replace", ["default/p19"])
    assert len(out.refusals) == 19 and {r.kind for r in out.refusals} == {Blocker.ONE_AT_A_TIME}
    assert "one at a time, as Karpenter v0.2x did" in out.refusals[0].message


def test_a_do_not_evict_pod_holds_its_expired_node_and_the_next_oldest_takes_the_turn() -> None:
    """Restates v0.31 machine_expiration_test.go "should continue to the next expired node if the first cannot
    reschedule all pods", with the blocker v0.31's filterCandidates applied first: a do-not-evict pod."""
    held = node("oldest", [pod("pinned", {"karpenter.sh/do-not-evict": "true"})], age_h=9, nodepool="legacy")
    views = [held] + [node(f"n{i:02}", [pod(f"p{i}")], age_h=2 + i / 10, nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(ttlSecondsUntilExpired=3600)]))
    assert [d.nodes for d in out.decisions] == [["n19"]]
    assert [r.kind for r in out.refusals if r.nodes == ["oldest"]] == [Blocker.DO_NOT_DISRUPT]


def test_an_expired_node_with_pods_waits_while_a_node_of_its_pool_is_being_disrupted_but_empty_ones_go() -> None:
    """Restates v0.31 machine_consolidation_test.go "waits for node deletion to finish": the deprovisioning
    loop started no command before the last one's nodes were gone (controller.go executeCommand)."""
    busy = node("busy", [pod("moving")], nodepool="legacy")
    views = [busy, node("empty", age_h=2, nodepool="legacy")]
    views += [node(f"n{i:02}", [pod(f"p{i}")], age_h=2, nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(ttlSecondsUntilExpired=3600)], in_progress=frozenset({"busy"})))
    assert [d.nodes for d in out.decisions] == [["empty"]]
    assert len(out.refusals) == 20 and {r.kind for r in out.refusals} == {Blocker.ONE_AT_A_TIME}


# -- consolidation (consolidation.enabled) ---------------------------------------------------------------------


def test_consolidation_removes_every_empty_node_at_once() -> None:
    """Restates v0.31 suite_test.go "should deprovision all empty Machine and NodeClaims in parallel
    (Consolidation)" and machine_emptiness_test.go "Consolidation" / "can delete multiple empty nodes with
    consolidation"."""
    views = [node(f"n{i}", annotations=since(1), nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(consolidation={"enabled": True})]), fits_elsewhere)
    assert names(out.decisions) == sorted(f"n{i}" for i in TWENTY) and out.refusals == []


def test_consolidation_takes_as_many_underused_nodes_as_fit_elsewhere_in_one_action() -> None:
    """Restates v0.31 machine_consolidation_test.go "Multi-NodeClaim" / "can merge 3 nodes into 1": one
    multi-node command of up to 100 nodes (multimachineconsolidation.go), held by no budget."""
    views = [node(f"n{i:02}", [pod(f"p{i}")], nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(consolidation={"enabled": True})]), fits_elsewhere)
    [d] = out.decisions
    assert d.reason == "Underutilized" and sorted(d.nodes) == [f"n{i:02}" for i in TWENTY]


def test_consolidation_waits_while_a_node_of_its_pool_is_being_disrupted() -> None:
    """Restates v0.31 machine_consolidation_test.go "waits for node deletion to finish"."""
    busy = node("busy", [pod("moving")], nodepool="legacy")
    views = [busy] + [node(f"n{i:02}", [pod(f"p{i}")], nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy(consolidation={"enabled": True})], in_progress=frozenset({"busy"})),
                       fits_elsewhere)
    assert out.decisions == []
    assert len(out.refusals) == 20 and {r.kind for r in out.refusals} == {Blocker.ONE_AT_A_TIME}
    assert out.refusals[0].message.startswith("not consolidated: Provisioner legacy (v1alpha5) disrupts nodes")


# -- drift, at the same pace --------------------------------------------------------------------------------


def test_drifted_nodes_go_at_the_same_pace_empty_ones_at_once_those_with_pods_one_at_a_time() -> None:
    """Restates v0.31 suite_test.go "should deprovision all empty Machine and NodeClaims in parallel (Drift)"
    and drift.go's one replacement per command (v0.31 had drift behind a feature gate; nodescale drifts
    v1alpha5 pools, so at v0.2x's pace rather than all at once)."""
    views = [node(f"e{i:02}", labels={"team": "b"}, nodepool="legacy") for i in TWENTY]
    views += [node(f"p{i:02}", [pod(f"q{i}")], labels={"team": "b"}, nodepool="legacy") for i in TWENTY]
    out = planner.plan(inputs(views, [legacy()]))
    replaced = [d for d in out.decisions if d.action == "replace"]
    deleted = [d for d in out.decisions if d.action == "delete"]
    assert names(deleted) == sorted(f"e{i:02}" for i in TWENTY) and len(replaced) == 1
    assert {d.reason for d in out.decisions} == {"Drifted"}
    assert len(out.refusals) == 19 and {r.kind for r in out.refusals} == {Blocker.ONE_AT_A_TIME}
