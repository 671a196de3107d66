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


def plan(capsys: pytest.CaptureFixture, tmp_path: Path, *docs: dict, expect: int = 0) -> dict:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "-o", "json", "-f", str(path)])
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
