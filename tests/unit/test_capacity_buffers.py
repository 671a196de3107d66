"""CapacityBuffers (autoscaling.x-k8s.io): read and checked as the CRD checks them, turned into virtual pods,
planned after every real pod, shown by `nodescale plan`, and kept by emptiness.

Restates kubernetes/autoscaler cluster-autoscaler/apis/capacitybuffer/autoscaling.x-k8s.io/v1beta1/types.go
(replicas, percentage "rounding up to a minimum of 1", "the maximum of the two", limits) and Karpenter's
designs/capacity-buffer.md (virtual pods "lower priority than real workloads", "Consolidation Protection").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from nodescale.cli import main
from nodescale.config.loader import load
from nodescale.disruption import planner
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Simulation
from nodescale.model import labels as wk
from nodescale.model.buffers import (
    BUFFER_PRIORITY,
    BufferError,
    CapacityBuffer,
    ScalableRef,
    chunk_count,
    resolve,
)
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement
from nodescale.scheduling.plan import ExistingNode
from nodescale.scheduling.scheduler import solve
from tests.builders import GIB, SMALL, fits_elsewhere, inputs, node, pods, since
from tests.builders import pool as disruption_pool
from tests.builders import scheduling_pool as pool

TEMPLATE = {
    "apiVersion": "v1",
    "kind": "PodTemplate",
    "metadata": {"name": "web", "namespace": "shop"},
    "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"replicas": 10, "template": TEMPLATE["template"]},
}


def buffer_doc(spec: dict, api: str = "autoscaling.x-k8s.io/v1beta1", namespace: str = "shop") -> dict:
    return {"apiVersion": api, "kind": "CapacityBuffer", "metadata": {"name": "headroom", "namespace": namespace},
            "spec": spec}


def loaded(*docs: dict) -> tuple[dict[str, CapacityBuffer], list[str]]:
    result = load([(f"test#{i}", d) for i, d in enumerate(docs)])
    return result.buffers, [str(e) for e in result.errors]


# ------------------------------------------------------------------------------------------------ reading


@pytest.mark.parametrize("api", ["autoscaling.x-k8s.io/v1", "autoscaling.x-k8s.io/v1beta1",
                                 "autoscaling.x-k8s.io/v1alpha1"])
def test_a_buffer_is_read_in_every_served_version(api: str) -> None:
    buffers, errors = loaded(buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 3}, api))
    assert errors == []
    b = buffers["shop/headroom"]
    assert (b.pod_template, b.replicas, b.active) == ("web", 3, True)


@pytest.mark.parametrize(("spec", "path", "words"), [
    ({"podTemplateRef": {"name": "web"}, "scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "w"},
      "replicas": 1}, "spec", "not both"),
    ({"replicas": 1}, "spec", "needs podTemplateRef"),
    ({"podTemplateRef": {"name": "web"}}, "spec", "set replicas or limits"),
    ({"podTemplateRef": {"name": "web"}, "replicas": 1, "percentage": 20}, "spec.percentage", "needs spec.scalableRef"),
    ({"podTemplateRef": {"name": "web"}, "replicas": -1}, "spec.replicas", "-1"),
    ({"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "j"}, "replicas": 1}, "spec.scalableRef",
     "allowed are apps/Deployment"),
    ({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "lots"}}, "spec.limits", "lots"),
    ({"podTemplateRef": {"name": "web"}, "replica": 2}, "spec.replica", "did you mean replicas"),
])
def test_a_bad_buffer_is_refused_naming_the_field(spec: dict, path: str, words: str) -> None:
    buffers, errors = loaded(buffer_doc(spec))
    assert buffers == {}
    assert any(f"test#0: {path}:" in e and words in e for e in errors), errors


def test_an_unsupported_version_is_refused_with_the_supported_ones() -> None:
    _, errors = loaded(buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 1}, "autoscaling.x-k8s.io/v2"))
    assert any("apiVersion" in e and "autoscaling.x-k8s.io/v1beta1" in e for e in errors), errors


def test_a_buffer_defined_twice_in_a_namespace_is_refused_but_one_per_namespace_is_fine() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 1}
    buffers, errors = loaded(buffer_doc(spec), buffer_doc(spec, namespace="blog"))
    assert sorted(buffers) == ["blog/headroom", "shop/headroom"] and errors == []
    buffers, errors = loaded(buffer_doc(spec), buffer_doc(spec))
    assert buffers == {} and any("also defined at test#0" in e for e in errors)


# ---------------------------------------------------------------------------------------------- chunks


def test_chunks_from_replicas_percentage_and_limits() -> None:
    one = {"cpu": 1000, "memory": GIB}
    ref = ScalableRef("apps", "Deployment", "web")
    assert chunk_count(CapacityBuffer("ns", "b", "t", replicas=3), one, None) == 3
    # percentage of the workload's replicas, rounded up, at least 1
    assert chunk_count(CapacityBuffer("ns", "b", scalable=ref, percentage=20), one, 10) == 2
    assert chunk_count(CapacityBuffer("ns", "b", scalable=ref, percentage=5), one, 3) == 1
    # both: the larger
    assert chunk_count(CapacityBuffer("ns", "b", scalable=ref, replicas=1, percentage=50), one, 10) == 5
    # limits cap the total requests, or alone say how many fit
    assert chunk_count(CapacityBuffer("ns", "b", "t", replicas=10, limits={"cpu": 2500}), one, None) == 2
    assert chunk_count(CapacityBuffer("ns", "b", "t", limits={"memory": 4 * GIB}), one, None) == 4
    with pytest.raises(BufferError, match="names no resource the pod template requests"):
        chunk_count(CapacityBuffer("ns", "b", "t", limits={"nvidia.com/gpu": 1}), one, None)


def test_virtual_pods_come_from_the_template_at_the_lowest_priority() -> None:
    r = resolve(CapacityBuffer("shop", "headroom", "web", replicas=3), {("shop", "web"): TEMPLATE}, {})
    assert r.error == "" and len(r.pods) == 3
    assert {p.buffer for p in r.pods} == {"shop/headroom"}
    assert all(p.priority == BUFFER_PRIORITY and p.labels["app"] == "web" for p in r.pods)
    assert r.pods[0].requests["cpu"] == 1000 and len({p.uid for p in r.pods}) == 3
    by_deployment = resolve(CapacityBuffer("shop", "b", scalable=ScalableRef("apps", "Deployment", "web"),
                                           percentage=30), {}, {("shop", "apps", "Deployment", "web"): DEPLOYMENT})
    assert len(by_deployment.pods) == 3 and by_deployment.template == "apps/Deployment web"


def test_a_missing_template_is_named() -> None:
    r = resolve(CapacityBuffer("shop", "headroom", "nope", replicas=3), {("shop", "web"): TEMPLATE}, {})
    assert r.pods == [] and "PodTemplate shop/nope does not exist" in r.error


# -------------------------------------------------------------------------------------------- planning


def _buffer_pods(n: int) -> list[Pod]:
    return resolve(CapacityBuffer("shop", "headroom", "web", replicas=n), {("shop", "web"): TEMPLATE}, {}).pods


def test_a_buffer_of_three_pods_launches_room_for_three() -> None:
    # Only "small" (2 vCPU, all of it allocatable here): two 1-vCPU pods a node, so two nodes for three.
    plan = solve(_buffer_pods(3), [pool()], {"default": [SMALL]})
    assert len(plan.node_claims) == 2 and not plan.unschedulable
    assert sorted(len(c.pods) for c in plan.node_claims) == [1, 2]
    # Room for one more pod on a larger type changes nothing about the count asked: four pods, two nodes.
    assert len(solve(_buffer_pods(4), [pool()], {"default": [SMALL]}).node_claims) == 2


def test_real_pods_take_existing_room_first_and_the_buffer_gets_new_nodes() -> None:
    # One existing node with room for one pod: the real pod gets it whatever the order given.
    existing = ExistingNode("n1", {wk.NODEPOOL: "default", wk.CAPACITY_TYPE: "on-demand", wk.ZONE: "zone-a",
                                   wk.INSTANCE_TYPE: "small", "kubernetes.io/os": "linux",
                                   "kubernetes.io/arch": "amd64"},
                            {"cpu": 1500, "memory": 3 * GIB, "pods": 29})
    real = pods(1, "real", cpu="1")
    plan = solve(_buffer_pods(2) + real, [pool()], {"default": [SMALL]}, existing_nodes=[existing])
    (placement,) = plan.existing
    assert [p.key for p in placement.pods] == ["default/real-0"]
    assert sorted(p.buffer for c in plan.node_claims for p in c.pods) == ["shop/headroom"] * 2


def test_a_buffer_never_takes_a_nodepool_limit_from_real_pods() -> None:
    limited = pool("default", Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"]), limits={"cpu": 2000})
    plan = solve(_buffer_pods(2) + pods(2, "real", cpu="1"), [limited], {"default": [SMALL]})
    placed = [p for c in plan.node_claims for p in c.pods]
    assert sorted(p.key for p in placed if not p.buffer) == ["default/real-0", "default/real-1"]
    assert {u.pod.buffer for u in plan.unschedulable} == {"shop/headroom"}


# ---------------------------------------------------------------------------------------- plan -f output

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
"""


def _write(tmp_path: Path, *docs: dict) -> str:
    path = tmp_path / "manifests.yaml"
    path.write_text(POOL + "".join("---\n" + json.dumps(d) + "\n" for d in docs))
    return str(path)


def test_plan_f_launches_for_a_buffer_and_lists_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, TEMPLATE, buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 3}))
    assert main(["plan", "--feature-gates", "CapacityBuffer=true", "-f", path, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # m5.large (2 vCPU) holds one 1-vCPU pod beside the kubelet's reservations: three nodes
    assert len(data["nodeClaims"]) == 3
    assert all(c["pods"] == [] and len(c["bufferPods"]) == 1 for c in data["nodeClaims"])
    (b,) = data["buffers"]
    assert (b["buffer"], b["replicas"], b["onNewNodeClaims"], b["onExistingNodes"]) == ("shop/headroom", 3, 3, 0)
    assert main(["plan", "--feature-gates", "CapacityBuffer=true", "-f", path]) == 0
    text = capsys.readouterr().out
    assert "Capacity buffers" in text and "shop/headroom" in text and "PodTemplate web" in text


def test_plan_f_refuses_a_buffer_whose_template_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 3}))
    assert main(["plan", "--feature-gates", "CapacityBuffer=true", "-f", path]) == 2
    assert "CapacityBuffer shop/headroom: spec.podTemplateRef: PodTemplate shop/web does not exist" in \
        capsys.readouterr().err


def test_plan_f_ignores_buffers_with_the_capacitybuffer_gate_off(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """#31.5 (issue #31 point 5, FEATURE_GATES in `plan -f`). Restates kubernetes-sigs/karpenter
    pkg/controllers/controllers.go (the CapacityBuffer controllers run only with ``FeatureGates.CapacityBuffer``)
    and pkg/controllers/provisioning/provisioner.go (buffer pods only with the gate), with
    pkg/operator/options/suite_test.go, Describe "Options", Context "Parse", It "should use the correct default
    values" (CapacityBuffer off): under the default gates a buffer launches nothing, is not even resolved (its
    missing template is no error), and a note says it was ignored. (The old code launched three nodes for it.)"""
    monkeypatch.delenv("FEATURE_GATES", raising=False)
    path = _write(tmp_path, TEMPLATE, buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 3}))
    assert main(["plan", "-f", path, "-o", "json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["nodeClaims"] == [] and data["buffers"] == []
    assert "the CapacityBuffer feature gate is off: 1 CapacityBuffer(s) ignored (shop/headroom)" in captured.err
    missing = _write(tmp_path, buffer_doc({"podTemplateRef": {"name": "web"}, "replicas": 3}))
    assert main(["plan", "-f", missing]) == 0


# ------------------------------------------------------------------------------------------ disruption


def _buffer_room_nowhere(nodes: Sequence[NodeView]) -> Simulation:
    return Simulation(unschedulable=[(p.key, "no node has room") for n in nodes for p in n.buffer_pods])


def test_an_empty_node_holding_a_buffers_room_is_kept_unless_the_room_exists_elsewhere() -> None:
    held = node("a", annotations=since(3600))
    held.buffer_pods = _buffer_pods(1)
    free = node("b", annotations=since(3600))
    out = planner.plan(inputs([held, free], [disruption_pool(consolidate_after_seconds=30.0)]), _buffer_room_nowhere)
    gone = {n for d in out.decisions for n in d.nodes}
    assert "b" in gone and "a" not in gone
    assert "a" in out.clear_empty  # not empty: it keeps the buffer's room
    assert any(r.nodes == ["a"] and "shop/headroom-buffer-0 would have nowhere to go" in r.why for r in out.refusals)
    # Consolidation may take it when the simulation finds the buffer room elsewhere.
    out = planner.plan(inputs([held], [disruption_pool(consolidate_after_seconds=30.0)]), fits_elsewhere)
    assert [d.nodes for d in out.decisions] == [["a"]]
