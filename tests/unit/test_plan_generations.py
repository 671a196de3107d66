"""Issue 14: a v1alpha5 Provisioner/AWSNodeTemplate pair and a v1 NodePool/EC2NodeClass pair, both named
`default`, side by side (Karpenter's own upgrade path, v0.32-v0.33, runs both at once).

Karpenter v0.32 labels a Provisioner's machines `karpenter.sh/provisioner-name` and a NodePool's
nodeclaims `karpenter.sh/nodepool`, so a pod written for either generation keeps to its own pool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nodescale.cli import main
from nodescale.model import labels as wk

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
LEGACY = EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml"
CURRENT = EXAMPLES / "karpenter-v1" / "default.yaml"


def _pod(name: str, selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": selector,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }


def _plan(capsys: pytest.CaptureFixture, tmp_path: Path, docs: list[dict]) -> dict:
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all(docs))
    code = main(["plan", "-o", "json", "-f", str(LEGACY), "-f", str(CURRENT), "-f", str(pods)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_each_generations_pods_land_on_its_own_pool(capsys, tmp_path):
    out = _plan(capsys, tmp_path, [
        _pod("old-0", {wk.LEGACY_PROVISIONER: "default"}),
        _pod("old-1", {wk.LEGACY_PROVISIONER: "default"}),
        _pod("new-0", {wk.NODEPOOL: "default"}),
        _pod("new-1", {wk.NODEPOOL: "default"}),
    ])
    assert out["unschedulable"] == []
    by_pool: dict[str, list[str]] = {}
    for claim in out["nodeClaims"]:
        by_pool.setdefault(claim["nodePool"], []).extend(claim["pods"])
    # Both pools are used: the Provisioner keyed apart from the NodePool of its name.
    assert {k: sorted(v) for k, v in by_pool.items()} == {
        "provisioner/default": ["default/old-0", "default/old-1"],
        "default": ["default/new-0", "default/new-1"],
    }
    for claim in out["nodeClaims"]:
        labels = claim["labels"]
        if claim["nodePool"] == "provisioner/default":
            # What Karpenter v0.32 labels a v1alpha5 machine with: the real name, not the key, and no nodepool.
            assert labels[wk.LEGACY_PROVISIONER] == "default" and wk.NODEPOOL not in labels
            assert claim["capacityTypes"] == ["spot"]  # the Provisioner's requirement
        else:
            assert labels[wk.NODEPOOL] == "default" and wk.LEGACY_PROVISIONER not in labels
            assert labels["team"] == "platform"  # the NodePool's template label


def test_an_existing_node_of_one_generation_takes_only_its_own_pods(capsys, tmp_path):
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "old-node", "labels": {
            wk.LEGACY_PROVISIONER: "default", wk.ARCH: "amd64", wk.OS: "linux", wk.CAPACITY_TYPE: "spot",
            wk.INSTANCE_TYPE: "m5.2xlarge", wk.ZONE: "us-east-1a", wk.HOSTNAME: "old-node"}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
                   "allocatable": {"cpu": "8", "memory": "30Gi", "pods": "58"}},
    }
    out = _plan(capsys, tmp_path, [
        node, _pod("old-0", {wk.LEGACY_PROVISIONER: "default"}), _pod("new-0", {wk.NODEPOOL: "default"}),
    ])
    assert out["unschedulable"] == []
    assert [(c["nodePool"], c["pods"]) for c in out["nodeClaims"]] == [("default", ["default/new-0"])]
