"""CapacityBuffers (autoscaling.x-k8s.io) on sim: spare room for pods of a PodTemplate, launched with no pod
pending, kept by consolidation, and taken by real pods of that shape without a launch.

Restates Karpenter's designs/capacity-buffer.md ("Buffer pods participate in Karpenter's bin-packing", "Have
lower priority than real workloads", "Consolidation Protection") and Cluster Autoscaler's CapacityBuffer
API (podTemplateRef + replicas), as a Cluster Autoscaler user's pause-pod overprovisioning would behave.
"""

from __future__ import annotations

import time

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.commands import explain as explain_cmd
from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import explain as explaining
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from sim.kube.crds import capacity_buffer_crd
from tests.integration import helpers
from tests.integration.helpers import instance_ids, managed_nodes, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("buffers")
sim = helpers.emptied_environment_fixture(node_timeout=30)
ns = helpers.namespace_fixture()

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets:
      - nodes: "100%"
""" + helpers.DEMO_NODECLASS
SHAPE = {"labels": {"app": "web"}}
REQUESTS = {"cpu": "700m", "memory": "1Gi"}


def _template(ns: str) -> dict:
    return {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": ns},
        "template": {"metadata": SHAPE, "spec": {"containers": [
            {"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9", "resources": {"requests": REQUESTS}}]}},
    }


def _buffer(ns: str, replicas: int) -> dict:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "web-headroom", "namespace": ns},
            "spec": {"podTemplateRef": {"name": "web"}, "replicas": replicas}}


def _real_pod(ns: str, i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "namespace": ns, **SHAPE},
            "spec": {"containers": [{"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                                     "resources": {"requests": REQUESTS}}]}}


BUFFERS_ON = FeatureGates(capacity_buffer=True)


def runtime_for(sim: Environment, gates: FeatureGates = BUFFERS_ON) -> Runtime:
    """#31.5: with the CapacityBuffer feature gate on (off by default, as in Karpenter) unless ``gates`` says."""
    return helpers.runtime_for(sim, nodepool_sources=("ssm", "cluster"), registration_timeout_seconds=10.0**6,
                               feature_gates=gates)


def _install_crd(sim: Environment) -> None:
    try:
        request_json(sim.kube_api_client(), "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                     body=capacity_buffer_crd())
    except ApiException as exc:
        if exc.status != 409:
            raise


def _running_on(sim: Environment, ns: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods(sim, ns)
            if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"}


def test_a_buffer_for_four_pods_launches_their_room_keeps_it_and_real_pods_land_there(sim: Environment, ns: str) -> None:
    put_pool(sim, POOL)
    _install_crd(sim)
    admin = sim.kube_api_client()
    request_json(admin, "POST", f"/api/v1/namespaces/{ns}/podtemplates", body=_template(ns))
    request_json(admin, "POST", f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{ns}/capacitybuffers",
                 body=_buffer(ns, 4))
    rt = runtime_for(sim)

    # #31.5: without the CapacityBuffer gate (off by default, as in Karpenter) the buffer is not read: no launch.
    off = provisioning.provision_once(runtime_for(sim, FeatureGates()), dry_run=True)
    assert off.planned == [] and off.buffers == [], off
    # No pod is pending: the buffer alone launches nodes with room for its four pods.
    first = provisioning.provision_once(rt)
    assert first.launches, first
    assert sum(len(x.pods) for x in first.launches) == 4
    (entry,) = first.buffers
    assert (entry.resolved.buffer.key, len(entry.resolved.pods), entry.resolved.template) == (
        f"{ns}/web-headroom", 4, "PodTemplate web")
    assert entry.unplaced == []
    launched = len(first.launches)
    # m5.large: 2 vCPU, about 1.93 allocatable: two 700m pods each, so two nodes for four.
    assert launched == 2
    assert provisioning.provision_once(rt).launches == [], "the room in flight counts"
    wait_for("the buffer's nodes to register", lambda: len(managed_nodes(sim)) == launched, timeout=60)
    assert provisioning.provision_once(rt).launches == [], "registered room counts"

    # Consolidation (consolidateAfter 0s, a 100% budget) keeps the empty nodes: they hold the buffer's room.
    nodes = {n["metadata"]["name"] for n in managed_nodes(sim)}
    for _ in range(2):
        run = disrupting.disrupt_once(rt)
        assert run["decisions"] == [], run
        sim.advance(60)
        time.sleep(0.2)
    assert {n["metadata"]["name"] for n in managed_nodes(sim)} == nodes

    # A burst of four real pods of that shape lands on those nodes with no launch at all.
    ids_before = set(instance_ids(sim))
    for i in range(4):
        request_json(admin, "POST", f"/api/v1/namespaces/{ns}/pods", body=_real_pod(ns, i))
    running = wait_for("the four real pods to run", lambda: (r := _running_on(sim, ns)) and len(r) == 4 and r,
                       timeout=30)
    assert set(running.values()) <= nodes
    assert set(instance_ids(sim)) == ids_before, "no instance was launched for the burst"

    # The burst used the buffer's room: the next pass launches it again, for the buffer's pods only.
    again = provisioning.provision_once(rt)
    assert sum(len(x.pods) for x in again.launches) == 4
    assert all(key.startswith(f"{ns}/web-headroom-buffer-") for x in again.launches for key in x.pods)
    request_json(admin, "DELETE", f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{ns}/capacitybuffers/web-headroom")


def test_the_functions_read_buffers_and_templates_and_may_change_neither(sim: Environment, ns: str) -> None:
    # sim holds the functions to infra/manifests/rbac.yaml: get/list/watch, nothing more.
    _install_crd(sim)
    admin, functions = sim.kube_api_client(), sim.functions_kube_api_client()
    request_json(admin, "POST", f"/api/v1/namespaces/{ns}/podtemplates", body=_template(ns))
    request_json(admin, "POST", f"/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/capacitybuffers", body=_buffer(ns, 1))
    listed = request_json(functions, "GET", "/apis/autoscaling.x-k8s.io/v1/capacitybuffers")["items"]
    assert [b["metadata"]["name"] for b in listed] == ["web-headroom"]
    assert request_json(functions, "GET", f"/api/v1/namespaces/{ns}/podtemplates/web")["metadata"]["name"] == "web"
    for path in (f"/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/capacitybuffers", f"/api/v1/namespaces/{ns}/podtemplates"):
        with pytest.raises(ApiException) as denied:
            request_json(functions, "POST", path, body=_buffer(ns, 2) if "buffers" in path else _template(ns))
        assert denied.value.status == 403
    request_json(admin, "DELETE", f"/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/capacitybuffers/web-headroom")


def test_explain_names_the_buffers_planned_after_the_pod(sim: Environment, ns: str) -> None:
    put_pool(sim, POOL)
    _install_crd(sim)
    admin = sim.kube_api_client()
    request_json(admin, "POST", f"/api/v1/namespaces/{ns}/podtemplates", body=_template(ns))
    request_json(admin, "POST", f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{ns}/capacitybuffers",
                 body=_buffer(ns, 2))
    request_json(admin, "POST", f"/api/v1/namespaces/{ns}/pods", body=_real_pod(ns, 0))
    wait_for("the pod to be unschedulable", lambda: any(is_provisionable(p) for p in pods(sim, ns)))

    fate = explaining.explain(runtime_for(sim), ns, "web-0")
    assert fate.verdict == explaining.NEW_NODE, fate
    (entry,) = fate.to_dict("USD")["buffers"]
    assert (entry["buffer"], entry["replicas"], entry["onNewNodeClaims"]) == (f"{ns}/web-headroom", 2, 2)
    text = explain_cmd.to_text({**fate.to_dict("USD"), "currency": "USD"})
    assert f"Buffer:         {ns}/web-headroom: 2 pod(s) of PodTemplate web planned after it" in text
    assert instance_ids(sim) == [], "explain launches nothing"
    request_json(admin, "DELETE", f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{ns}/capacitybuffers/web-headroom")
