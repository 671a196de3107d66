"""consolidateAfter counted from the last pod added or removed, and the Balanced consolidation policy.

Each test restates Karpenter v1 behaviour: the docs' "Disruption" page (Consolidation: "Karpenter resets
this timer whenever a pod is added to or removed from the node"; Balanced consolidation) and
kubernetes-sigs/karpenter `pkg/controllers/disruption/balanced.go` (ScoreMove, EvaluateBalancedMove).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

import pytest

from nodescale.clock import format_timestamp
from nodescale.config.errors import ConfigError
from nodescale.config.nodepools import convert_nodepool
from nodescale.disruption import planner
from nodescale.disruption.balanced import Totals, eviction_cost, score_move
from nodescale.disruption.nodes import PODS_CHANGED, NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model.currency import USD, render
from tests.builders import NOW, fits_elsewhere, inputs, node, pod, pool, replacement


def recorded(v: NodeView, ago_s: float, digest: str | None = None) -> NodeView:
    value = f"{format_timestamp(NOW - timedelta(seconds=ago_s))} {digest or v.pods_digest}"
    return dataclasses.replace(v, annotations={**v.annotations, PODS_CHANGED: value})


def test_consolidate_after_restarts_when_a_pod_is_removed_not_only_when_one_is_added() -> None:
    # Docs, Consolidation: consolidateAfter counts from the last pod added to or removed from the node.
    p = pool(consolidate_after_seconds=600.0)
    a = node("a", [pod("p")])  # its pod started an hour ago
    # First sighting: what the pods show decides, and the pod set is recorded.
    out = planner.plan(inputs([a], [p]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["a"]]
    assert out.mark_pods["a"].endswith(a.pods_digest)
    # A pod left since the last record: the set differs, so the clock restarts now.
    out = planner.plan(inputs([recorded(a, 3600, digest="0123456789abcdef")], [p]), fits_elsewhere)
    assert out.decisions == [] and out.mark_pods["a"] == f"{format_timestamp(NOW)} {a.pods_digest}"
    # The same set for less than consolidateAfter: still waiting; for longer: a candidate.
    assert planner.plan(inputs([recorded(a, 300)], [p]), fits_elsewhere).decisions == []
    out = planner.plan(inputs([recorded(a, 900)], [p]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["a"]] and out.mark_pods == {}


def test_balanced_approves_a_move_only_when_its_saving_is_worth_the_pods_it_disrupts() -> None:
    # balanced.go ScoreMove: score = (saving / pool cost) / (disruption / pool disruption), approved at
    # score >= 1 / consolidationThreshold (default 2).
    views = [node(n, [pod(f"{n}{i}") for i in range(10)], price=0.1) for n in "abcd"]

    def cheaper_by_a_cent(nodes: Sequence[NodeView]) -> Simulation:
        if len(nodes) > 1:
            return Simulation(unschedulable=[("x/y", "no room")])
        return Simulation(replacements=[replacement("default", 0.09, [("m5.large", 0.09, "on-demand")], ["on-demand"])])

    # WhenEmptyOrUnderutilized takes any saving.
    out = planner.plan(inputs(views, [pool()]), cheaper_by_a_cent)
    assert len(out.decisions) == 1 and out.decisions[0].score is None
    # Balanced: 2.5% of the pool's price for 25% of its disruption scores 0.1 < 0.5: refused.
    out = planner.plan(inputs(views, [pool(consolidation_policy="Balanced")]), cheaper_by_a_cent)
    assert out.decisions == []
    assert all("not worth the disruption: balanced score 0.10" in r.why for r in out.refusals)
    # Deleting a node whose pods fit elsewhere saves 25% for 25%: score 1.0, approved and said so.
    out = planner.plan(inputs(views, [pool(consolidation_policy="Balanced")]), fits_elsewhere)
    [d] = out.decisions
    assert d.score == pytest.approx(1.0) and "balanced score 1.00" in render(d.detail, USD)
    # A lower threshold asks more: at 0.5 a move needs a score of 2.
    strict = pool(consolidation_policy="Balanced", consolidation_threshold=0.5)
    assert planner.plan(inputs(views, [strict]), fits_elsewhere).decisions == []


def test_balanced_score_edges_and_eviction_cost() -> None:
    # balanced.go: zero saving or a pool without price is never approved; design: EvictionCost is
    # 1 + pod-deletion-cost / 2^27 + priority / 2^25, within [-10, 10].
    assert not score_move(0.0, 1.0, Totals(1.0, 10.0), 2.0, "p").approved
    assert not score_move(0.5, 1.0, None, 2.0, "p").approved
    assert score_move(1.0, 1.0, Totals(1.0, 1.0), 2.0, "p").score == pytest.approx(1.0)
    assert eviction_cost(pod("a")) == 1.0
    assert eviction_cost(pod("b", {"controller.kubernetes.io/pod-deletion-cost": str(2**27)})) == 2.0
    assert eviction_cost(pod("c", {"controller.kubernetes.io/pod-deletion-cost": str(2**31 - 1)})) == 10.0


def _v1(disruption: dict) -> tuple[object, list[ConfigError]]:
    doc = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
           "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                           "name": "default"},
                                          "requirements": []}},
                    "disruption": disruption}}
    return convert_nodepool(doc, "test")


def test_the_balanced_policy_and_its_threshold_are_read_from_a_v1_nodepool() -> None:
    p, errors = _v1({"consolidationPolicy": "Balanced", "consolidateAfter": "30s", "consolidationThreshold": 3})
    assert errors == [] and p.disruption.consolidation_policy == "Balanced"  # type: ignore[attr-defined]
    assert p.disruption.consolidation_threshold == 3.0  # type: ignore[attr-defined]
    p, errors = _v1({"consolidationPolicy": "Balanced", "consolidateAfter": "30s"})
    assert p.disruption.consolidation_threshold == 2.0  # type: ignore[attr-defined]
    _, errors = _v1({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s", "consolidationThreshold": 3})
    assert "only allowed with consolidationPolicy Balanced" in str(errors[0])
