"""Template drift, the cluster gauges, and how `nodescale disrupt` shows a run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from nodescale.commands import disrupt
from nodescale.disruption.drift import (
    Drifted,
    DriftKind,
    LaunchedWith,
    NodeClassNow,
    cloud_drift,
    template_drift,
)
from nodescale.disruption.gauges import cluster_gauges
from nodescale.disruption.nodes import NodeView
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import NodePool
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint

ROOT = Path(__file__).resolve().parents[2]


def pool(**changes: object) -> NodePool:
    base = dict(
        name="default",
        requirements=Requirements([Requirement.exactly("karpenter.sh/capacity-type", "on-demand"),
                                   Requirement.exactly("karpenter.k8s.aws/instance-category", "c", "m")]),
        node_class="default",
        labels={"team": "a"},
        taints=(Taint("dedicated", "NoSchedule", "a"),),
        limits={"cpu": 100_000},
    )
    base.update(changes)
    return NodePool(**base)  # type: ignore[arg-type]


def node(labels: dict | None = None, taints: list | None = None, price: float = 0.1, ct: str = "on-demand") -> NodeView:
    raw = {"metadata": {"name": "n", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": ct,
                                                "karpenter.k8s.aws/instance-category": "m", "team": "a",
                                                **(labels or {})}},
           "spec": {"taints": taints if taints is not None else [{"key": "dedicated", "value": "a",
                                                                  "effect": "NoSchedule"}]},
           "status": {"capacity": {"cpu": "2", "memory": "8Gi"}, "allocatable": {"cpu": "1930m", "memory": "7Gi"}}}
    return NodeView.from_node(ClusterNode.from_dict(raw), [], price)


def test_a_node_matching_its_pool_has_not_drifted_and_weight_or_limits_change_nothing() -> None:
    assert template_drift(node(), pool()) is None
    assert template_drift(node(), pool(weight=50, limits={"cpu": 1})) is None


def test_requirements_labels_and_taints_drift() -> None:
    # Karpenter drift_test.go: "should detect static drift" (NodePoolDrifted) and "should detect node requirement
    # drift" (RequirementsDrifted) — each kind named.
    req = template_drift(node({"karpenter.k8s.aws/instance-category": "r"}), pool())
    assert req.kind == DriftKind.REQUIREMENTS and "karpenter.k8s.aws/instance-category=r" in req.detail
    assert template_drift(node({"team": "b"}), pool()) == Drifted(
        DriftKind.NODE_POOL, "NodePool label team='a' is 'b' on the node")
    assert template_drift(node(), pool(labels={"team": "a", "tier": "gold"})) == \
        Drifted(DriftKind.NODE_POOL, "NodePool label tier='gold' is missing on the node")
    assert template_drift(node(taints=[]), pool()) == Drifted(
        DriftKind.NODE_POOL, "NodePool taint dedicated=a:NoSchedule is missing on the node")


def test_drift_kinds_carry_karpenters_reason_strings() -> None:
    # kubernetes-sigs/karpenter drift.go (NodePoolDrifted, RequirementsDrifted) and karpenter-provider-aws
    # cloudprovider/drift.go (AMIDrift, SubnetDrift, SecurityGroupDrift, NodeClassDrift); ZonalShift is
    # nodescale's own (a pool that opts in to replacing its nodes in a shifted zone).
    assert [str(k) for k in DriftKind] == ["NodePoolDrifted", "RequirementsDrifted", "AMIDrift", "SubnetDrift",
                                           "SecurityGroupDrift", "NodeClassDrift", "ZonalShift"]
    assert str(Drifted(DriftKind.AMI, "image ami-1 is no longer selected")) == "AMIDrift: image ami-1 is no longer selected"


def test_dry_run_names_the_field_that_drifted() -> None:
    summary = {"dryRun": True, "decisions": [
        {"nodes": ["a"], "action": "replace", "reason": "Drifted", "drift": "SecurityGroupDrift", "savingPerHour": 0,
         "detail": "SecurityGroupDrift: security groups sg-1 are no longer the selected ones (sg-2)"}]}
    text = disrupt.to_text(summary)
    assert "Would disrupt:\n  a: replace (Drifted: SecurityGroupDrift): SecurityGroupDrift: security groups" in text


def test_gauges_count_nodes_price_and_pool_usage_against_limits() -> None:
    views = [node(price=0.1), node(price=0.05, ct="spot")]
    views[1].name = "m"
    caps = {"n": {"cpu": 2000, "memory": 8 * 2**30}, "m": {"cpu": 2000, "memory": 8 * 2**30}}
    g = cluster_gauges(views, caps, {"default": pool()}).to_dict()
    assert g["nodes"] == {"default/on-demand": 1, "default/spot": 1}
    assert abs(g["pricePerHour"] - 0.15) < 1e-9 and g["cpu"] == 4.0 and g["memoryGiB"] == 16.0
    assert g["usage"]["default/cpu"] == 4.0 and g["usage"]["default/nodes"] == 2
    assert g["limits"] == {"default/cpu": 100.0}


def test_dry_run_text_lists_what_why_and_the_saving() -> None:
    summary = {
        "dryRun": True,
        "decisions": [{"nodes": ["a", "b"], "action": "delete", "reason": "Underutilized", "savingPerHour": 0.192,
                       "detail": "underutilized: the pods of the 2 nodes fit on other nodes (saves $0.1920/h)"}],
        "refused": [{"nodes": ["c"], "why": "not consolidated: pod default/x has karpenter.sh/do-not-disrupt"}],
        "cleanup": {"launchTemplates": ["nodescale/demo/abc"]},
        "pricePerHourSaved": 0.192,
    }
    text = disrupt.to_text(summary)
    assert "Would disrupt:\n  a, b: delete (Underutilized, saves $0.1920/h)" in text
    assert "c: not consolidated: pod default/x has karpenter.sh/do-not-disrupt" in text
    assert "Clean-up would remove unused launch templates: nodescale/demo/abc" in text
    assert text.endswith("Would save $0.1920/h in total\n")


def test_the_handler_keeps_a_margin_before_the_invocation_ends() -> None:
    spec = importlib.util.spec_from_file_location("disruption_handler", ROOT / "lambdas/disruption/handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 300_000

    assert module.run_deadline(Context(), now=100.0) == 100.0 + 300 - module.MARGIN_SECONDS


def test_text_says_nothing_to_disrupt_only_when_nothing_happened() -> None:
    assert disrupt.to_text({"dryRun": False, "decisions": [], "pricePerHourSaved": 0.0}) == "Nothing to disrupt.\n"
    summary = {
        "dryRun": False, "decisions": [], "currency": "CNY",
        "terminations": [{"node": "n1", "state": "terminated", "reason": "Empty"}],
        "refused": [{"nodes": ["n2"], "blockedBy": "budget", "why": "not disrupted: budget 0 of pool default"}],
        "emptySince": [{"node": "n3", "nodePool": "default", "since": "2026-11-01T12:00:00Z",
                        "setting": "ttlSecondsAfterEmpty", "afterSeconds": 30, "removeAt": "2026-11-01T12:00:30Z"}],
    }
    lines = disrupt.to_text(summary).splitlines()
    assert "Nothing to disrupt." not in lines
    assert lines == [
        "Held back:", "  n2: not disrupted: budget 0 of pool default",
        "Terminations:", "  n1: terminated (Empty)",
        "Emptiness clocks started:",
        "  node n3 empty since 2026-11-01T12:00:00Z; removed after ttlSecondsAfterEmpty 30s at 2026-11-01T12:00:30Z"
        " if it stays empty",
    ]


def test_text_shows_savings_in_the_regions_currency() -> None:
    summary = {"dryRun": True, "currency": "CNY", "pricePerHourSaved": 1.5,
               "decisions": [{"nodes": ["a"], "action": "delete", "reason": "Empty", "savingPerHour": 1.5,
                              "detail": "empty for 31s"}]}
    text = disrupt.to_text(summary)
    assert "a: delete (Empty, saves ¥1.5000/h)" in text and text.endswith("Would save ¥1.5000/h in total\n")


NOW = NodeClassNow(frozenset({"ami-new"}), frozenset({"subnet-a"}), frozenset({"sg-b", "sg-a"}))


def test_cloud_drift_checks_image_then_subnet_then_the_settings_hash_in_karpenters_order():
    """#29.4: the cloud drift decision, moved from Launcher.drift into the core, decides without AWS;
    the templates' hashes are asked for only when image and subnet still match."""
    asked: list[bool] = []

    def hashes() -> set[str]:
        asked.append(True)
        return {"h-now"}

    both = LaunchedWith("ami-old", "subnet-gone", "h-old", ("sg-a",))
    assert cloud_drift(both, NOW, hashes).kind is DriftKind.AMI and not asked
    moved = LaunchedWith("ami-new", "subnet-gone", "h-old", ("sg-a",))
    assert cloud_drift(moved, NOW, hashes).kind is DriftKind.SUBNET and not asked
    groups = LaunchedWith("ami-new", "subnet-a", "h-old", ("sg-a",))
    assert cloud_drift(groups, NOW, hashes) == Drifted(
        DriftKind.SECURITY_GROUP, "security groups sg-a are no longer the selected ones (sg-a, sg-b)")
    same = LaunchedWith("ami-new", "subnet-a", "h-old", ("sg-b", "sg-a"))
    assert cloud_drift(same, NOW, hashes).kind is DriftKind.NODE_CLASS
    assert cloud_drift(LaunchedWith("ami-new", "subnet-a", "h-now", ()), NOW, hashes) is None
    assert cloud_drift(LaunchedWith("", "", None, ()), NOW, hashes) is None and len(asked) == 3
