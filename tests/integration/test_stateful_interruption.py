"""#31's acceptance on `sim/`: a StatefulSet on a zonal EBS volume survives a spot interruption.

The claim of the set's pod is provisioned (WaitForFirstConsumer) in the zone of the node the provisioner
launched; when that spot instance gets its two-minute warning, the replacement nodescale launches for the
pod is in the volume's zone (another offering there, since the warned one is marked unavailable), and the
pod the StatefulSet makes again runs on it with the same claim. Without volume topology the replacement may
go to any zone, and the pod then stays Pending there (sim's VolumeBinding filter, as kube-scheduler's).

Restates kubernetes-sigs/karpenter pkg/controllers/provisioning/suite_test.go, Context "Volume Topology
Requirements", It "should schedule to volume zones if volume already bound", on the interruption path
(pkg/controllers/node/termination: the drained pod is scheduled again where its volume is).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.interrupt import handle as interrupting
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, delete_quietly, put_pool, wait_for
from tests.integration.test_interruption import event, instance_of, pods, provision, replay

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"


def spot_pool(environment: Environment) -> None:
    """The example spot pool (every zone, several families), held to one size so replacements are alike."""
    docs = list(yaml.safe_load_all((EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()))
    docs[0]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["xlarge"]})
    put_pool(environment, yaml.safe_dump_all(docs), "default-spot")


env = helpers.environment_fixture("stateful-interruption", sim_clock=False, prepare=spot_pool)
sim = helpers.emptied_environment_fixture(keep_pools=True)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()


def _statefulset(api: Any, ns: str, name: str, storage_class: str) -> None:
    labels = {"app": name}
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/statefulsets", body={
        "metadata": {"name": name}, "spec": {
            "replicas": 1, "serviceName": name, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "db", "image": "postgres",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                "resources": {"requests": {"storage": "8Gi"}}}}]}})


def _zone_of(sim: Environment, node_name: str) -> str:
    node = helpers.node_named(sim, node_name)
    assert node is not None, node_name
    return node["metadata"]["labels"][ZONE]


def _volume_zone(sim: Environment, ns: str, claim: str) -> str:
    api = sim.kube_api_client()
    pvc = request_json(api, "GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
    pv = request_json(api, "GET", f"/api/v1/persistentvolumes/{pvc['spec']['volumeName']}")
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    (zone,) = {v for t in terms for e in t["matchExpressions"] if e["key"] == ZONE for v in e["values"]}
    return zone


def test_a_statefulset_on_a_zonal_ebs_volume_survives_a_spot_interruption(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#31 acceptance: the replacement is in the volume's zone and the set's pod runs there again, same claim."""
    api, storage_class = sim.kube_api_client(), f"gp3-{uuid.uuid4().hex[:6]}"
    request_json(api, "POST", "/apis/storage.k8s.io/v1/storageclasses", body={
        "metadata": {"name": storage_class}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        _statefulset(api, ns, "db", storage_class)
        (first,) = provision(sim, rt, ns, 1)
        victim = first["spec"]["nodeName"]
        zone = _zone_of(sim, victim)
        assert _volume_zone(sim, ns, "data-db-0") == zone

        summary = replay(rt, event("spot-interruption-warning.json", instance_of(helpers.node_named(sim, victim)), sim))

        (report,) = summary.instances
        assert report.action == interrupting.DRAINED, report
        (launch,) = report.replacement.launched
        assert launch.zone == zone, report  # another offering, in the volume's zone
        again = wait_for("the set's pod running again on another node", lambda: [
            p for p in pods(sim, ns) if p["spec"].get("nodeName") not in (None, victim)
            and (p.get("status") or {}).get("phase") == "Running"], timeout=60)
        (pod,) = again
        assert pod["metadata"]["name"] == "db-0"
        assert _zone_of(sim, pod["spec"]["nodeName"]) == zone
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert claims == ["data-db-0"] and _volume_zone(sim, ns, "data-db-0") == zone
    finally:
        delete_quietly(api, f"/apis/storage.k8s.io/v1/storageclasses/{storage_class}")
