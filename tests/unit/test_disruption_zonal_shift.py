"""Disruption while an Availability Zone is under an ARC zonal shift.

Default, as Karpenter v1.12+ with ENABLE_ZONAL_SHIFT (Karpenter's Zonal Shift RFC, technical requirements 2
and 3; "ARC zonal shift support for EKS Auto Mode and Karpenter"): nodes in the shifted zone are not
voluntarily disrupted. Opt-in (nodescale's own, ``nodescale.io/zonal-shift: replace``): they are drifted and
replaced elsewhere, paced by the pool's budget.
"""

from __future__ import annotations

from datetime import timedelta

from nodescale.clock import format_timestamp
from nodescale.disruption import planner
from nodescale.disruption.context import Inputs, Outcome
from nodescale.disruption.decisions import Action, Blocker, Reason
from nodescale.disruption.drift import DriftKind
from nodescale.disruption.nodes import EMPTY_SINCE, NodeView
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import Budget, Disruption, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from tests.builders import NOW, fits_elsewhere, pod

SHIFTED = frozenset({"us-east-1c"})
REPLACE = {"nodescale.io/zonal-shift": "replace"}


def pool(annotations: dict | None = None, budget: str = "100%", **disruption: object) -> NodePool:
    return NodePool(
        name="default",
        requirements=Requirements([Requirement.exactly("karpenter.sh/capacity-type", "on-demand")]),
        node_class="default",
        disruption=Disruption(budgets=(Budget(nodes=budget),), consolidate_after_seconds=30.0, **disruption),  # type: ignore[arg-type]
        annotations=annotations or {},
    )


def node(name: str, zone: str, pods: list[Pod] | None = None, annotations: dict | None = None) -> NodeView:
    raw = {
        "metadata": {"name": name, "annotations": annotations or {},
                     "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
                                "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": zone},
                     "creationTimestamp": format_timestamp(NOW - timedelta(hours=2))},
        "spec": {"providerID": f"aws:///{zone}/i-{name}"},
        "status": {"conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": format_timestamp(NOW - timedelta(hours=1))}],
                   "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"}},
    }
    return NodeView.from_node(ClusterNode.from_dict(raw), pods or [], 0.1)


def plan(views: list[NodeView], p: NodePool, shifted: frozenset[str] = SHIFTED) -> Outcome:
    inputs = Inputs(now=NOW, nodepools={"default": p}, views=views, shifted_zones=shifted)
    return planner.plan(inputs, fits_elsewhere)


EMPTY_LONG = {EMPTY_SINCE: format_timestamp(NOW - timedelta(minutes=10))}


def test_nodes_in_a_shifted_zone_are_neither_emptied_nor_consolidated_and_say_why() -> None:
    out = plan([node("c-empty", "us-east-1c", annotations=EMPTY_LONG), node("c-busy", "us-east-1c", [pod("p")]),
                node("a-empty", "us-east-1a", annotations=EMPTY_LONG)], pool())
    assert [(d.nodes, d.reason) for d in out.decisions] == [(["a-empty"], Reason.EMPTY)], \
        "the healthy zone's empty node goes as ever"
    held = {n: r for r in out.refusals if r.kind == Blocker.ZONAL_SHIFT for n in r.nodes}
    assert set(held) == {"c-empty", "c-busy"}
    assert "us-east-1c is under an ARC zonal shift" in held["c-empty"].message
    assert "nodescale.io/zonal-shift: replace" in held["c-busy"].message


def test_without_a_shift_the_same_nodes_go() -> None:
    out = plan([node("c-empty", "us-east-1c", annotations=EMPTY_LONG)], pool(), shifted=frozenset())
    assert [d.nodes for d in out.decisions] == [["c-empty"]]


def test_a_pool_that_opts_in_has_its_nodes_in_the_zone_drifted_within_its_budget() -> None:
    views = [node(f"c{i}", "us-east-1c", [pod(f"p{i}")]) for i in range(3)] + [node("a0", "us-east-1a", [pod("q")])]
    out = plan(views, pool(REPLACE, budget="1"))
    (decision,) = [d for d in out.decisions if d.reason == Reason.DRIFTED]
    assert decision.drift == DriftKind.ZONAL_SHIFT and decision.action == Action.REPLACE
    assert decision.nodes[0].startswith("c"), "only nodes in the shifted zone drift"
    assert "us-east-1c is under an ARC zonal shift" in decision.detail
    budget = [r for r in out.refusals if r.kind == Blocker.BUDGET and r.reason == Reason.DRIFTED]
    assert sorted(n for r in budget for n in r.nodes) == sorted({"c0", "c1", "c2"} - set(decision.nodes)), \
        "the budget of one node holds the other two for later runs"


def test_another_value_of_the_annotation_keeps_the_nodes() -> None:
    assert plan([node("c", "us-east-1c", [pod("p")])], pool({"nodescale.io/zonal-shift": "keep"})).decisions == []
