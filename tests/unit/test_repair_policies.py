"""#31.5: repair with Karpenter's per-policy tolerations, and its unhealthy share counted Karpenter's way.

Restates kubernetes-sigs/karpenter pkg/controllers/node/health/suite_test.go, Describe "Node Health", with
aws/karpenter-provider-aws pkg/cloudprovider/cloudprovider.go ``RepairPolicies`` (Ready False/Unknown 30m,
AcceleratedHardwareReady False 10m, StorageReady/NetworkingReady/KernelReady/ContainerRuntimeReady False 30m).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from nodescale.disruption import planner
from nodescale.disruption.decisions import Blocker
from nodescale.disruption.methods.repair import REPAIR_POLICIES
from nodescale.disruption.nodes import NodeView
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import Budget
from nodescale.model.timestamps import format_timestamp
from tests.builders import NOW, inputs, node, pod, pool


def with_condition(name: str, kind: str, status: str, held_s: float, annotations: dict | None = None) -> NodeView:
    """A Ready node of the default pool with one pod, also showing ``kind=status`` for ``held_s`` seconds."""
    view = node(name, [pod(name)], annotations=annotations)
    raw = {"metadata": {"name": name, "labels": dict(view.labels), "annotations": dict(view.annotations)},
           "spec": {"providerID": f"aws:///us-east-1a/i-{name}", "taints": list(view.taints)},
           "status": {"conditions": [
               {"type": "Ready", "status": "True", "lastTransitionTime": format_timestamp(NOW - timedelta(hours=2))},
               {"type": kind, "status": status, "lastTransitionTime": format_timestamp(NOW - timedelta(seconds=held_s))},
           ] if kind != "Ready" else [
               {"type": "Ready", "status": status, "lastTransitionTime": format_timestamp(NOW - timedelta(seconds=held_s))},
           ]}}
    return NodeView.from_node(ClusterNode.from_dict(raw), view.pods)


def healthy(n: int) -> list[NodeView]:
    return [node(f"ok{i}", [pod(f"ok{i}")]) for i in range(n)]


def repaired(views: list[NodeView], **kw: object) -> list[list[str]]:
    return [d.nodes for d in planner.plan(inputs(views, **kw)).decisions if d.reason == "Unhealthy"]


def test_the_policies_are_karpenter_provider_aws_s() -> None:
    """karpenter-provider-aws ``CloudProvider.RepairPolicies``: the conditions, statuses and tolerations."""
    assert [(p.condition, p.status, p.toleration_seconds) for p in REPAIR_POLICIES] == [
        ("Ready", "False", 1800.0), ("Ready", "Unknown", 1800.0), ("AcceleratedHardwareReady", "False", 600.0),
        ("StorageReady", "False", 1800.0), ("NetworkingReady", "False", 1800.0), ("KernelReady", "False", 1800.0),
        ("ContainerRuntimeReady", "False", 1800.0)]


@pytest.mark.parametrize("policy", REPAIR_POLICIES, ids=lambda p: f"{p.condition}-{p.status}")
def test_should_delete_an_unhealthy_node(policy: object) -> None:
    """It "should delete an unhealthy node and record metrics": a node showing a policy's condition past its
    toleration is replaced; one second short of it, it is not ("should not delete node when health duration is
    not reached")."""
    cond, status, tol = policy.condition, policy.status, policy.toleration_seconds  # type: ignore[attr-defined]
    assert repaired([with_condition("bad", cond, status, tol + 1)] + healthy(4)) == [["bad"]]
    assert repaired([with_condition("bad", cond, status, tol - 1)] + healthy(4)) == []


def test_should_not_delete_node_when_health_duration_is_not_reached() -> None:
    """It "should not delete node when health duration is not reached": NotReady 20 minutes, under Ready's 30,
    is kept however low NODESCALE_REPAIR_THRESHOLD_SECONDS is (it holds for EC2 status checks only)."""
    assert repaired([with_condition("bad", "Ready", "False", 1200)] + healthy(4), repair_threshold_seconds=600) == []


def test_should_not_delete_node_when_unhealthy_type_does_not_match_cloud_provider_passed_in_value() -> None:
    """It "should not delete node when unhealthy type does not match cloud provider passed in value"."""
    assert repaired([with_condition("bad", "FakeHealthyNode", "False", 3600)] + healthy(4)) == []


def test_should_not_delete_node_when_health_status_does_not_match_cloud_provider_passed_in_value() -> None:
    """It "should not delete node when health status does not match cloud provider passed in value"."""
    assert repaired([with_condition("bad", "KernelReady", "True", 3600)] + healthy(4)) == []


def test_should_ignore_unhealthy_nodes_if_more_then_20_percent_of_the_nodes_are_unhealthy() -> None:
    """It "should ignore unhealthy nodes if more then 20% of the nodes are unhealthy": 3 of 10 is past ceil(2)."""
    views = [with_condition(f"bad{i}", "KernelReady", "False", 3600) for i in range(3)] + healthy(7)
    out = planner.plan(inputs(views))
    assert out.decisions == [] and {r.kind for r in out.refusals} == {Blocker.HEALTH}


def test_the_unhealthy_share_counts_every_node_showing_a_condition_however_new() -> None:
    """Karpenter's share counts every node matching a policy, tolerated or not: two nodes past their toleration
    and one that went NotReady a minute ago are 3 of 10, so nothing is repaired."""
    views = [with_condition(f"bad{i}", "Ready", "False", 3600) for i in range(2)]
    views += [with_condition("new", "Ready", "Unknown", 60)] + healthy(7)
    out = planner.plan(inputs(views))
    assert out.decisions == [] and "3 of 10 nodes of NodePool default are unhealthy" in out.notes[0]


def test_failing_status_checks_however_new_count_towards_the_share() -> None:
    """nodescale's own policy (EC2 status checks) counts towards the share as Karpenter's conditions do."""
    views = [with_condition(f"bad{i}", "Ready", "False", 3600) for i in range(2)] + healthy(8)
    assert len(repaired(views)) == 2
    assert repaired(views, impaired_since={"ok0": NOW - timedelta(seconds=30)}) == []


def test_should_consider_round_up_when_there_is_a_low_number_of_nodes_for_a_nodepool() -> None:
    """It "should consider round up when there is a low number of nodes for a nodepool": 1 of 3 is repaired."""
    assert repaired([with_condition("bad", "NetworkingReady", "False", 3600)] + healthy(2)) == [["bad"]]


def test_should_ignore_node_disruption_budgets_and_do_not_disrupt() -> None:
    """Context "Forceful termination", Its "should ignore node disruption budgets" and "should ignore
    do-not-disrupt on a node"."""
    views = [with_condition("bad", "ContainerRuntimeReady", "False", 3600,
                            {"karpenter.sh/do-not-disrupt": "true"})] + healthy(4)
    assert repaired(views) == [["bad"]]
    assert [d.nodes for d in planner.plan(inputs(views, [pool(budgets=(Budget(nodes="0"),))])).decisions] == [["bad"]]
