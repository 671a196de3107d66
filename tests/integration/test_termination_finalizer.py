"""#30.3 on `sim/`: `kubectl delete node` on a node nodescale launched goes through its termination finalizer.

Restates kubernetes-sigs/karpenter pkg/controllers/node/termination/suite_test.go (Describe "Termination",
Context "Reconciliation"): It "should evict pods in order and wait until pods are fully deleted", It "should
exclude nodes from load balancers when terminating", Context "VolumeAttachments" It "should wait for volume
attachments" and It "should only wait for volume attachments associated with drainable pods", It "should
delete nodeclaims associated with nodes" (here the other way round: a deleted NodeClaim deletes its node),
and It "should ignore nodes not managed by this Karpenter instance" (such a node gets no finalizer at all).
Every step runs in a disruption pass; nothing is kept between passes but what the objects say.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.model.labels import EXCLUDE_FROM_LOAD_BALANCERS, TERMINATION_FINALIZER
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, instance_state, node_of, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

# Long enough that a loaded machine's wall time cannot detach a volume between two steps of a test.
DETACH = 60
env = helpers.environment_fixture("termination", detach_delay=DETACH)
sim = helpers.emptied_environment_fixture()
ns = helpers.namespace_fixture()

GRACE = 30  # sim's default pod termination grace, simulated seconds


@pytest.fixture
def rt(sim: Environment) -> Runtime:
    # moto stamps LaunchTime with the real clock while these tests move the simulated one ahead.
    return helpers.runtime_for(sim, registration_timeout_seconds=10.0**6)


def launch_node(sim: Environment, rt: Runtime, ns: str) -> tuple[str, str]:
    """A node nodescale launched for a pending pod, registered and given its finalizer: (node, instance)."""
    put_pool(sim, (EXAMPLES / "karpenter-v1" / "default.yaml").read_text(), "default")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod("app", cpu="500m"))
    wait_for("the pod unschedulable", lambda: (p := pods(sim, ns)) and any(
        c.get("reason") == "Unschedulable" for c in (p[0].get("status") or {}).get("conditions") or []))
    [launch] = provisioning.provision_once(rt).launches
    name = node_of(sim, launch.instance_id)["metadata"]["name"]
    provisioning.provision_once(rt)  # registration: labels and the finalizer
    wait_for("the pod running", lambda: any(p["status"].get("phase") == "Running" for p in pods(sim, ns)))
    return name, launch.instance_id


def _pod(name: str, cpu: str = "10m", node: str | None = None, **spec: Any) -> dict:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}}}],
        **spec}}
    if node:
        body["spec"]["nodeName"] = node
    return body


def _daemonset(sim: Environment, ns: str, name: str, node: str, priority: str | None = None) -> None:
    template: dict[str, Any] = {"metadata": {"labels": {"ds": name}}, "spec": {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}]}}
    if priority:
        template["spec"]["priorityClassName"] = priority
    request_json(sim.kube_api_client(), "POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", body={
        "metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"ds": name}}, "template": template}})


def _present(sim: Environment, ns: str) -> dict[str, bool]:
    """{pod name (a DaemonSet pod by its DaemonSet's): being deleted}."""
    out = {}
    for pod in pods(sim, ns):
        owners = pod["metadata"].get("ownerReferences") or []
        key = owners[0]["name"] if owners and owners[0]["kind"] == "DaemonSet" else pod["metadata"]["name"]
        out[key] = bool(pod["metadata"].get("deletionTimestamp"))
    return out


def test_a_deleted_node_drains_in_karpenters_order_then_its_instance_and_finalizer_go(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#30.3: taint and load-balancer label first; then non-critical pods, non-critical DaemonSet pods,
    critical pods, critical DaemonSet pods, each group only once the one before is gone; then the instance is
    terminated and the finalizer removed (termination suite_test.go It "should evict pods in order and wait
    until pods are fully deleted", It "should exclude nodes from load balancers when terminating")."""
    node, iid = launch_node(sim, rt, ns)
    assert TERMINATION_FINALIZER in helpers.node_named(sim, node)["metadata"]["finalizers"]
    api = sim.kube_api_client()
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods",
                 body=_pod("crit", node=node, priorityClassName="system-cluster-critical"))
    _daemonset(sim, ns, "ds", node)
    _daemonset(sim, ns, "critds", node, priority="system-node-critical")
    wait_for("every pod on the node", lambda: set(_present(sim, ns)) == {"app", "crit", "ds", "critds"})

    request_json(api, "DELETE", f"/api/v1/nodes/{node}")
    order: list[set[str]] = []
    for _ in range(8):
        disrupting.disrupt_once(rt)
        current = helpers.node_named(sim, node)
        if current is None:
            break
        assert current["metadata"]["labels"].get(EXCLUDE_FROM_LOAD_BALANCERS)
        assert any(t["key"] == "karpenter.sh/disrupted" for t in current["spec"].get("taints") or [])
        assert instance_state(sim, iid) == "running"
        order.append({name for name, leaving in _present(sim, ns).items() if leaving})
        sim.advance(GRACE + 1)
    assert [o for o in order if o] == [{"app"}, {"ds"}, {"crit"}, {"critds"}]
    assert helpers.node_named(sim, node) is None
    assert instance_state(sim, iid) in ("shutting-down", "terminated")


def test_the_instance_waits_for_volume_attachments_of_drained_pods_only(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.3: the drained pod's CSI volume detaches (sim's attach-detach) before the instance goes; a pod the
    drain leaves (it tolerates the disrupted taint) keeps its attachment without holding the termination up
    (termination suite_test.go Context "VolumeAttachments", It "should wait for volume attachments", It
    "should only wait for volume attachments associated with drainable pods")."""
    node, iid = launch_node(sim, rt, ns)
    api = sim.kube_api_client()
    claims = {}
    for who in ("data", "kept"):
        pv = f"pv-{uuid.uuid4().hex[:8]}"
        request_json(api, "POST", "/api/v1/persistentvolumes", body={"metadata": {"name": pv}, "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{pv}"}}})
        request_json(api, "POST", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", body={
            "metadata": {"name": who}, "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": pv,
                                                "resources": {"requests": {"storage": "1Gi"}}}})
        claims[who] = pv
    volume = [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod("db", node=node, volumes=volume))
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(
        "stays", node=node, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "kept"}}],
        tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]))

    def attached() -> set[str]:
        items = request_json(api, "GET", "/apis/storage.k8s.io/v1/volumeattachments").get("items") or []
        return {va["spec"]["source"]["persistentVolumeName"] for va in items if va["spec"]["nodeName"] == node}

    wait_for("both volumes attached", lambda: attached() == set(claims.values()))
    request_json(api, "DELETE", f"/api/v1/nodes/{node}")
    disrupting.disrupt_once(rt)  # evicts app and db
    sim.advance(GRACE + 1)
    wait_for("the drained pods gone", lambda: set(_present(sim, ns)) == {"stays"})
    report = disrupting.disrupt_once(rt)  # drained, but db's volume is still attached
    assert claims["data"] in attached()
    assert instance_state(sim, iid) == "running"
    assert TERMINATION_FINALIZER in helpers.node_named(sim, node)["metadata"]["finalizers"]
    assert any("VolumeAttachment" in (t.get("reason") or "") for t in report["terminations"]), report["terminations"]
    sim.advance(DETACH + 1)
    wait_for("db's volume detached", lambda: attached() == {claims["kept"]})
    disrupting.disrupt_once(rt)
    assert instance_state(sim, iid) in ("shutting-down", "terminated")
    wait_for("the node gone", lambda: helpers.node_named(sim, node) is None)


def test_a_node_nodescale_did_not_launch_gets_no_finalizer(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.3: only nodes of this cluster's instances get karpenter.sh/termination (termination suite_test.go
    It "should ignore nodes not managed by this Karpenter instance")."""
    node, _ = launch_node(sim, rt, ns)
    api = sim.kube_api_client()
    foreign = f"foreign-{uuid.uuid4().hex[:6]}"
    theirs = sim.seed["karpenter_instance_ids"][0]
    request_json(api, "POST", "/api/v1/nodes", body={"metadata": {"name": foreign, "labels": {
        "karpenter.sh/nodepool": "default"}}, "spec": {"providerID": f"aws:///us-east-1a/{theirs}"}})
    try:
        provisioning.provision_once(rt)
        assert not helpers.node_named(sim, foreign)["metadata"].get("finalizers")
        assert TERMINATION_FINALIZER in helpers.node_named(sim, node)["metadata"]["finalizers"]
    finally:
        helpers.delete_quietly(api, f"/api/v1/nodes/{foreign}")


def test_a_deleted_nodeclaim_deletes_its_node_and_loses_its_finalizer_last(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.3: a NodeClaim deleted with the finalizer deletes its node, which terminates as above; once node and
    instance are gone the NodeClaim's finalizer goes (termination suite_test.go It "should delete nodeclaims
    associated with nodes", seen from the NodeClaim)."""
    helpers.install_karpenter_crds(sim)
    node, iid = launch_node(sim, rt, ns)
    api = sim.kube_api_client()
    claim = f"default-{uuid.uuid4().hex[:5]}"
    path = f"/apis/karpenter.sh/v1/nodeclaims/{claim}"
    request_json(api, "POST", "/apis/karpenter.sh/v1/nodeclaims", body={
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": claim, "finalizers": [TERMINATION_FINALIZER], "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}})
    request_json(api, "PATCH", f"{path}/status", body={"status": {
        "providerID": helpers.node_named(sim, node)["spec"]["providerID"], "nodeName": node}}, content_type=MERGE_PATCH)
    request_json(api, "DELETE", path)
    for _ in range(6):
        disrupting.disrupt_once(rt)
        try:
            request_json(api, "GET", path)
        except ApiException as exc:
            assert exc.status == 404
            break
        assert helpers.node_named(sim, node) is not None or instance_state(sim, iid) != "running"
        sim.advance(GRACE + 1)
    else:
        pytest.fail("the NodeClaim was never released")
    assert helpers.node_named(sim, node) is None
    assert instance_state(sim, iid) in ("shutting-down", "terminated")
