"""Pods are planned by priority (kube-scheduler's queue order), then largest first (Karpenter's queue.go)."""

from __future__ import annotations

import json

import pytest

from nodescale.cli import main
from nodescale.model.pod import Pod
from nodescale.usecases.provision.explain import _outranked_at_a_limit
from nodescale.usecases.provision.launch import Launch, LaunchOutcome, LimitHit, LimitScope
from tests.builders import SMALL, plan_for, pods
from tests.builders import scheduling_pool as pool


def _pod(name: str, cpu: str, **spec: object) -> Pod:
    return pods(1, name=name, cpu=cpu, **spec)[0]


def test_priority_class_names_of_the_system_classes_give_their_values():
    assert _pod("a", "1", priorityClassName="system-node-critical").priority == 2000001000
    assert _pod("b", "1", priorityClassName="system-cluster-critical").priority == 2000000000
    # spec.priority, filled by the API server, wins; a user class without it counts as 0 offline.
    assert _pod("c", "1", priorityClassName="system-node-critical", priority=5).priority == 5
    assert _pod("d", "1", priorityClassName="team-high").priority == 0
    assert _pod("e", "1", priority=0).priority == 0


def test_a_limit_for_one_node_goes_to_the_higher_priority_pod():
    # One small node (2 CPU) fits under the limit and holds only one of the two pods. Largest first alone
    # would place the bigger, unimportant pod; priority comes first.
    low = _pod("low", "1500m")
    high = _pod("high", "1", priority=1000)
    plan = plan_for([low, high], [pool("capped", limits={"cpu": 2000})], [SMALL])
    assert [[p.name for p in c.pods] for c in plan.node_claims] == [["high-0"]]
    assert [u.pod.key for u in plan.unschedulable] == ["default/low-0"]
    assert "limits" in plan.unschedulable[0].reason


def test_same_spec_different_priority_are_planned_apart():
    low = _pod("app", "1500m")
    high = _pod("app", "1500m", priorityClassName="system-cluster-critical")
    high.name = "app-high"
    plan = plan_for([low, high], [pool("capped", limits={"cpu": 2000})], [SMALL])
    assert [p.name for c in plan.node_claims for p in c.pods] == ["app-high"]


def test_explain_says_preemption_is_kube_schedulers_when_a_limit_went_to_higher_priority():
    low, high = _pod("low", "1"), _pod("high", "1", priority=100)
    why = "incompatible with nodepool capped: it would exceed the nodepool's limits"
    outcome = LaunchOutcome(dry_run=True)
    outcome.launches.append(Launch("capped", "", "small", "zone-a", "on-demand", 0.1, [high.key]))
    outcome.unschedulable.append((low.key, why))
    outcome.limits.append(LimitHit(LimitScope.NODEPOOL, "capped", why))
    note = _outranked_at_a_limit([low, high], outcome)[low.key]
    assert "higher priority" in note and "kube-scheduler" in note
    # Equal priority: nothing to say.
    assert _outranked_at_a_limit([low, _pod("high", "1")], outcome) == {}


def test_plan_places_the_critical_pod_under_a_limit(capsys, tmp_path):
    manifests = tmp_path / "all.yaml"
    manifests.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: capped}\n"
        "spec:\n  limits: {cpu: '4'}\n  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n"
        "      requirements:\n"
        "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
        "      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}\n"
        "---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\n"
        "spec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole-demo\n"
        "  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n"
        "  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: batch, namespace: default}\n"
        "spec:\n  containers: [{name: c, image: pause, resources: {requests: {cpu: '3', memory: 1Gi}}}]\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: dns, namespace: kube-system}\n"
        "spec:\n  priorityClassName: system-cluster-critical\n"
        "  containers: [{name: c, image: pause, resources: {requests: {cpu: '2', memory: 1Gi}}}]\n"
    )
    assert main(["plan", "-o", "json", "-f", str(manifests)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p for c in out["nodeClaims"] for p in c["pods"]] == ["kube-system/dns"]
    assert [u["pod"] for u in out["unschedulable"]] == ["default/batch"]


@pytest.mark.parametrize("order", [0, 1])
def test_priority_order_does_not_depend_on_input_order(order):
    low, high = _pod("low", "1500m"), _pod("high", "1", priority=7)
    workload = [low, high] if order else [high, low]
    plan = plan_for(workload, [pool("capped", limits={"cpu": 2000})], [SMALL])
    assert [p.name for c in plan.node_claims for p in c.pods] == ["high-0"]
