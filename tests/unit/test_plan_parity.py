"""Karpenter v1.x parity in `nodescale plan` (issue #15): Gte/Lte requirements, NodeOverlay, static NodePools.

Each test names the Karpenter behaviour it restates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nodescale.aws.catalog import bundled_catalog
from nodescale.cli import main
from nodescale.model.requirements import Requirement, RequirementError, Requirements

CATALOG = {it.name: it for it in bundled_catalog("us-east-1")}
NODE_CLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}


def nodepool(name: str = "default", requirements: list | None = None, **spec: object) -> dict:
    reqs = requirements if requirements is not None else [
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": reqs,
                }
            },
            **spec,
        },
    }


def pods(count: int, cpu: str = "1", name: str = "app") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": count,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]},
            },
        },
    }


def plan(capsys: pytest.CaptureFixture, tmp_path: Path, *docs: dict, expect: int = 0,
         gates: str = "NodeOverlay=true") -> dict:
    """``gates``: --feature-gates; NodeOverlay on, as the overlay tests need it since #31.5 (off by default)."""
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "-o", "json", "--feature-gates", gates, "-f", str(path)])
    captured = capsys.readouterr()
    assert code == expect, captured.err
    return json.loads(captured.out) if expect == 0 else {"err": captured.err}


# --- Gte / Lte (karpenter designs/gte-lte-operators.md; pkg/scheduling requirement tests) -------------


def test_gte_and_lte_include_their_bounds():
    # "Gte 2" is "at least 2", "Lte 8" is "at most 8": the bounds themselves are admitted.
    gte = Requirement.create("karpenter.k8s.aws/instance-cpu", "Gte", ["4"])
    lte = Requirement.create("karpenter.k8s.aws/instance-cpu", "Lte", ["8"])
    assert gte.has("4") and gte.has("5") and not gte.has("3")
    assert lte.has("8") and lte.has("7") and not lte.has("9")
    both = gte.intersect(lte)
    assert [str(n) for n in range(0, 12) if both.has(str(n))] == ["4", "5", "6", "7", "8"]
    # Gte 4 and Lte 4 leave exactly 4; Gte 5 and Lte 4 leave nothing.
    assert Requirement.create("k", "Gte", ["4"]).intersect(Requirement.create("k", "Lte", ["4"])).has("4")
    assert Requirement.create("k", "Gte", ["5"]).intersect(Requirement.create("k", "Lte", ["4"])).is_impossible()
    with pytest.raises(RequirementError):
        Requirement.create("k", "Gte", ["four"])


def test_pod_node_affinity_keeps_kubernetes_operators():
    # Gte/Lte are Karpenter's (NodePool, NodeClaim, NodeOverlay); the API server holds a pod's node
    # affinity to core's six operators, so such a pod never exists.
    with pytest.raises(RequirementError, match="Gte"):
        Requirements.from_node_selector_requirements(
            [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]}],
            "nodeAffinity",
            ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
        )


def test_plan_accepts_gte_and_lte_bounds_included(capsys, tmp_path):
    # The acceptance of issue #15 item 7: a pool held to 4..4 CPUs launches only 4-CPU types.
    pool = nodepool(
        requirements=[
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["4"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        ]
    )
    out = plan(capsys, tmp_path, pool, NODE_CLASS, pods(3))
    assert out["unschedulable"] == []
    types = {t for c in out["nodeClaims"] for t in c["instanceTypes"]}
    assert types and all(CATALOG[t].capacity["cpu"] == 4000 for t in types)

    # karpenter.sh/v1beta1's CRD enum never had Gte/Lte (they arrived in v1.x's v1 API).
    pool["apiVersion"] = "karpenter.sh/v1beta1"
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {"name": "default"}
    err = plan(capsys, tmp_path, pool, NODE_CLASS, pods(1), expect=2)["err"]
    assert 'operator: "Gte" is not allowed' in err


# --- NodeOverlay (karpenter.sh/v1alpha1; docs "NodeOverlays", pkg/controllers/nodeoverlay) ------------

TWO_TYPES = [
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "m5.large"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
]


def overlay(name: str, requirements: list, **spec: object) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": requirements, **spec},
    }


M5 = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]


def test_overlay_halving_a_price_makes_the_type_the_first_choice(capsys, tmp_path):
    # NodeOverlay docs: "priceAdjustment: -50%" makes matching types look half as expensive to scheduling.
    base = plan(capsys, tmp_path, nodepool(requirements=TWO_TYPES), NODE_CLASS, pods(1))
    assert base["nodeClaims"][0]["instanceTypes"][0] == "c5.large"
    out = plan(
        capsys, tmp_path, nodepool(requirements=TWO_TYPES), NODE_CLASS, pods(1),
        overlay("half-m5", M5, priceAdjustment="-50%"),
    )
    claim = out["nodeClaims"][0]
    assert claim["instanceTypes"][0] == "m5.large"
    assert claim["price"] < base["nodeClaims"][0]["price"]
    assert claim["overlays"] == ["price set by NodeOverlay half-m5 (-50%)"]


def test_heavier_overlay_wins_and_equal_weights_conflict(capsys, tmp_path):
    # Karpenter: higher weight takes precedence per field; two of one weight setting the same price conflict
    # and the later one (names in reverse alphabetical order) is not applied.
    pool = nodepool(requirements=TWO_TYPES)
    out = plan(
        capsys, tmp_path, pool, NODE_CLASS, pods(1),
        overlay("cheap", M5, price="0.001", weight=10), overlay("dear", M5, price="9", weight=5),
    )
    assert out["nodeClaims"][0]["instanceTypes"][0] == "m5.large"
    assert out["nodeClaims"][0]["overlays"] == ["price set by NodeOverlay cheap (0.001)"]
    out = plan(
        capsys, tmp_path, pool, NODE_CLASS, pods(1),
        overlay("a-cheap", M5, price="0.001", weight=5), overlay("b-dear", M5, price="9", weight=5),
    )
    # b-dear orders first at equal weight; a-cheap conflicts with it and is dropped: m5.large costs 9.
    assert out["nodeClaims"][0]["instanceTypes"][0] == "c5.large"


def test_overlays_are_ignored_with_the_nodeoverlay_gate_off(capsys, tmp_path, monkeypatch):
    """#31.5 (issue #31 point 5, FEATURE_GATES in `plan -f`). Restates kubernetes-sigs/karpenter
    pkg/cloudprovider/overlay/cloudprovider.go ``GetInstanceTypes`` (NodeOverlays applied only with
    ``FeatureGates.NodeOverlay``) with pkg/operator/options/suite_test.go, Describe "Options", Context "Parse",
    It "should use the correct default values" (NodeOverlay off) and It "shouldn't overwrite CLI flags with
    environment variables": without the gate the half-price overlay changes nothing and a note on stderr
    says so once; FEATURE_GATES turns it on, and --feature-gates wins over it. (The old code applied it.)"""
    docs = (nodepool(requirements=TWO_TYPES), NODE_CLASS, pods(1), overlay("half-m5", M5, priceAdjustment="-50%"))
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    monkeypatch.delenv("FEATURE_GATES", raising=False)
    assert main(["plan", "-o", "json", "-f", str(path)]) == 0
    captured = capsys.readouterr()
    claim = json.loads(captured.out)["nodeClaims"][0]
    assert claim["instanceTypes"][0] == "c5.large" and "overlays" not in claim
    assert len([line for line in captured.err.splitlines() if "NodeOverlay" in line]) == 1
    assert "the NodeOverlay feature gate is off: 1 NodeOverlay(s) ignored (half-m5); set NodeOverlay=true in " \
           "--feature-gates or FEATURE_GATES to apply them" in captured.err
    monkeypatch.setenv("FEATURE_GATES", "NodeOverlay=true")
    assert main(["plan", "-o", "json", "-f", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["nodeClaims"][0]["instanceTypes"][0] == "m5.large"
    assert main(["plan", "-o", "json", "--feature-gates", "NodeOverlay=false", "-f", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["nodeClaims"][0]["instanceTypes"][0] == "c5.large"


def test_a_bad_feature_gate_string_is_a_clear_input_error(capsys, tmp_path):
    """#31.5: --feature-gates is read as FEATURE_GATES is (model/featuregates.py): a misspelt gate stops the plan
    with exit 2 and a message naming the flag, the gate and the gates allowed, not a traceback."""
    err = plan(capsys, tmp_path, nodepool(), NODE_CLASS, pods(1), gates="NodeOverlays=true", expect=2)["err"]
    assert "--feature-gates: unknown feature gate 'NodeOverlays': allowed are NodeRepair" in err
    assert "Traceback" not in err


def test_overlay_capacity_adds_extended_resources(capsys, tmp_path):
    # NodeOverlay docs: capacity adds extended resources to matching types (never cpu, memory, pods...).
    fuse = pods(1)
    fuse["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["smarter-devices/fuse"] = "1"
    out = plan(capsys, tmp_path, nodepool(requirements=TWO_TYPES), NODE_CLASS, fuse)
    assert out["nodeClaims"] == [] and len(out["unschedulable"]) == 1
    out = plan(
        capsys, tmp_path, nodepool(requirements=TWO_TYPES), NODE_CLASS, fuse,
        overlay("fuse", M5, capacity={"smarter-devices/fuse": "1"}),
    )
    assert out["unschedulable"] == [] and out["nodeClaims"][0]["instanceTypes"] == ["m5.large"]
    err = plan(
        capsys, tmp_path, nodepool(requirements=TWO_TYPES), NODE_CLASS, fuse,
        overlay("bad", M5, capacity={"cpu": "1"}, price="0.1", priceAdjustment="-1"), expect=2,
    )["err"]
    assert "spec.capacity.cpu" in err and "both 'price' and 'priceAdjustment'" in err


def test_plan_f_launches_no_node_of_a_static_pool_for_pending_pods(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    """#31.5: a static NodePool (spec.replicas) keeps its count; pending pods are planned on the dynamic pool
    only, and with the static pool alone they stay unschedulable, as the provisioner does. Restates
    kubernetes-sigs/karpenter pkg/controllers/provisioning/provisioner.go (NewScheduler leaves static NodePools
    out of the pools it schedules pending pods on; no upstream test names this case)."""
    static = nodepool("fixed", replicas=2)
    both = plan(capsys, tmp_path, static, nodepool("dynamic"), NODE_CLASS, pods(3), gates="StaticCapacity=true")
    assert both["nodeClaims"] and {c["nodePool"] for c in both["nodeClaims"]} == {"dynamic"}
    alone = plan(capsys, tmp_path, static, NODE_CLASS, pods(3), gates="StaticCapacity=true")
    assert alone["nodeClaims"] == [] and len(alone["unschedulable"]) == 3
