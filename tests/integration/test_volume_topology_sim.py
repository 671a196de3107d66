"""#31.1 on `sim/`: the provisioner reads the pods' claims, PersistentVolumes and StorageClasses (as the
functions' own RBAC identity) and launches where a pod's volume is.

Restates kubernetes-sigs/karpenter pkg/controllers/provisioning/suite_test.go, Context "Volume Topology
Requirements": It "should schedule to volume zones if volume already bound" (a PV pinned, by the EBS CSI
driver's zone key, to the demo cluster's second zone, us-east-1b) and It "should not schedule if invalid pvc"
with It "should schedule valid pods when a pod with an invalid pvc is encountered (pvc)" (the reason shown by
the summary and by `explain`, the other pod launched for).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from nodescale.k8s.raw import request_json
from nodescale.model.labels import EBS_CSI_ZONE
from nodescale.runtime import Runtime
from nodescale.scheduling.volumetopology import BIND_COMPLETED
from nodescale.usecases.provision import explain
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, delete_quietly, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("volume-topology")
sim = helpers.emptied_environment_fixture()
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

SECOND_ZONE = "us-east-1b"


@pytest.fixture
def volume(sim: Environment) -> Iterator[str]:
    """A gp3 WaitForFirstConsumer StorageClass and a PersistentVolume pinned to the second zone (cluster-scoped:
    removed after the test)."""
    api, name = sim.kube_api_client(), f"pv-{uuid.uuid4().hex[:8]}"
    request_json(api, "POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"})
    request_json(api, "POST", "/api/v1/persistentvolumes", body={
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": name,
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": EBS_CSI_ZONE, "operator": "In", "values": [SECOND_ZONE]}]}]}}}})
    yield name
    delete_quietly(api, f"/api/v1/persistentvolumes/{name}")
    delete_quietly(api, f"/apis/storage.k8s.io/v1/storageclasses/{name}")


def _claim(api: Any, ns: str, name: str, volume: str) -> None:
    """A claim bound to ``volume`` as the PV controller leaves it."""
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
        "metadata": {"name": name, "annotations": {BIND_COMPLETED: "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": volume, "volumeName": volume,
                 "resources": {"requests": {"storage": "10Gi"}}}})


def _pod(api: Any, ns: str, name: str, claim: str | None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}]}
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={"metadata": {"name": name}, "spec": spec})


def _unschedulable(sim: Environment, ns: str, n: int) -> bool:
    return len([p for p in pods(sim, ns) if any(c.get("reason") == "Unschedulable"
                                                for c in (p.get("status") or {}).get("conditions") or [])]) == n


def test_a_pod_with_a_volume_pinned_to_a_zone_gets_its_node_there(sim: Environment, rt: Runtime, ns: str,
                                                                 volume: str) -> None:
    """#31.1: the default pool allows all three zones; the bound PV's node affinity keeps only the second."""
    put_pool(sim, (EXAMPLES / "karpenter-v1" / "default.yaml").read_text(), "default")
    api = sim.kube_api_client()
    _claim(api, ns, "data", volume)
    _pod(api, ns, "db-0", "data")
    wait_for("the pod unschedulable", lambda: _unschedulable(sim, ns, 1))

    fate = explain.explain(rt, ns, "db-0")
    assert fate.zones == [SECOND_ZONE], fate
    summary = provisioning.provision_once(rt)
    assert [launch.zone for launch in summary.launches] == [SECOND_ZONE], summary.to_json()


def test_a_pod_whose_claim_is_missing_is_not_launched_for_and_says_why(sim: Environment, rt: Runtime,
                                                                       ns: str) -> None:
    """#31.1: no traceback, no node; the summary and `explain` name the missing claim; the other pod launches."""
    put_pool(sim, (EXAMPLES / "karpenter-v1" / "default.yaml").read_text(), "default")
    api = sim.kube_api_client()
    _pod(api, ns, "orphan", "nowhere")
    _pod(api, ns, "plain", None)
    wait_for("both pods unschedulable", lambda: _unschedulable(sim, ns, 2))

    summary = provisioning.provision_once(rt)
    want = f"persistentvolumeclaim {ns}/nowhere not found"
    assert {"pod": f"{ns}/orphan", "reason": want} in summary.to_json()["podErrors"]
    [launch] = summary.launches
    assert f"{ns}/plain" in launch.pods
    fate = explain.explain(rt, ns, "orphan")
    assert fate.verdict == explain.UNSCHEDULABLE and want in str(fate.message)
