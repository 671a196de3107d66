"""#31.1 on `sim/`: a node at its EBS attachment limit (its CSINode's count) gets no further pod with a new
volume from the plan: a node is launched for it, and sim's kube-scheduler (NodeVolumeLimits) runs it there.

Restates aws/karpenter-provider-aws test/suites/storage/suite_test.go It "should run a pod with a dynamic
persistent volume while respecting volume limits" (the EBS driver's limit set to 1, two pods with their own
claims: two nodes), on kubernetes-sigs/karpenter pkg/scheduling/volumeusage.go. Fails on the code before #31.1's
limits: the plan put the second pod on the first node (room for its cpu), launched nothing, and the pod stayed
Pending there ("node(s) exceed max volume count")."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, delete_quietly, pods, put_pool, wait_for
from tests.integration.test_interruption import provision, wait_running

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("volume-limits", sim_clock=False)
sim = helpers.emptied_environment_fixture()
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()


def _pod(api: Any, ns: str, name: str, storage_class: str) -> None:
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
        "metadata": {"name": f"data-{name}"}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                                                     "resources": {"requests": {"storage": "4Gi"}}}})
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}]}})


def _limit_ebs_attachments(api: Any, node: str, count: int) -> None:
    """The EBS driver run with --volume-attach-limit: its CSINode reports ``count``."""
    csinode = request_json(api, "GET", f"/apis/storage.k8s.io/v1/csinodes/{node}")
    for driver in csinode["spec"]["drivers"]:
        driver["allocatable"] = {"count": count}
    request_json(api, "PUT", f"/apis/storage.k8s.io/v1/csinodes/{node}", body=csinode)


def test_a_node_at_its_volume_limit_gets_no_further_volume_pod_a_node_is_launched(
    sim: Environment, rt: Runtime, ns: str,
) -> None:
    """#31.1: the first node's CSINode allows one EBS volume, taken by db-0; db-1 (another claim) gets a new node."""
    put_pool(sim, (EXAMPLES / "karpenter-v1" / "default.yaml").read_text(), "default")
    api, storage_class = sim.kube_api_client(), f"gp3-{uuid.uuid4().hex[:6]}"
    request_json(api, "POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "metadata": {"name": storage_class}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        _pod(api, ns, "db-0", storage_class)
        (first,) = provision(sim, rt, ns, 1)
        full = first["spec"]["nodeName"]
        _limit_ebs_attachments(api, full, 1)

        _pod(api, ns, "db-1", storage_class)
        wait_for("db-1 refused by the full node", lambda: any(
            "exceed max volume count" in (c.get("message") or "") for p in pods(sim, ns) if p["metadata"]["name"] == "db-1"
            for c in (p.get("status") or {}).get("conditions") or []))
        summary = provisioning.provision_once(rt)
        (launch,) = summary.launches
        assert f"{ns}/db-1" in launch.pods, summary.to_json()
        running = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in wait_running(sim, ns, 2)}
        assert running["db-0"] == full and running["db-1"] != full
    finally:
        delete_quietly(api, f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")
