"""sim's StatefulSet controller: stable pod names, a claim per pod kept across the pod's life, so a pod made
again lands in its volume's zone (#31.2). Each test names the upstream StatefulSet test it restates
(kubernetes/kubernetes pkg/controller/statefulset stateful_set_test.go / stateful_set_control_test.go, and
test/e2e/apps/statefulset.go)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _statefulset(name: str, replicas: int, storage_class: str, selector: dict[str, str]) -> dict:
    labels = {"app": name}
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {
            "nodeSelector": selector,
            "containers": [{"name": "db", "image": "postgres", "resources": {"requests": {"cpu": "100m"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/data"}]}]}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
            "resources": {"requests": {"storage": "8Gi"}}}}],
    }}


def _zone_of_pod(kube: KubeHarness, ns: str, name: str) -> str | None:
    """The zone of the pod's node; None while it is unbound, being deleted or not made (again) yet."""
    try:
        pod = kube.core.read_namespaced_pod(name, ns)
    except ApiException as exc:
        if exc.status == 404:  # deleted, and its StatefulSet has not made it again yet
            return None
        raise
    if not pod.spec.node_name or pod.metadata.deletion_timestamp:
        return None
    return kube.core.read_node(pod.spec.node_name).metadata.labels["topology.kubernetes.io/zone"]


def test_a_statefulset_pod_made_again_keeps_its_claim_and_its_zone(kube: KubeHarness) -> None:
    """#31.2: claims <template>-<set>-<ordinal> are made before pods <set>-<ordinal> and mount them; a deleted pod
    comes back with the same name and claim, and so in its volume's zone even when another zone's node is
    free and first in line (stateful_set_test.go TestStatefulSetControllerRespectsTermination-style recreation,
    stateful_set_control_test.go "CreatesPods" / "RecreatesFailedPod"; e2e statefulset.go "should provide basic
    identity" and "should not deadlock when a pod's predecessor fails" persistence of claims)."""
    ns, tag = kube.namespace(), uuid.uuid4().hex[:6]
    first, second = f"a-{tag}", f"b-{tag}"
    # Zone a's node is made first, so the scheduler tries it first: cordoned while the set starts.
    kube.ready_node(first, labels={"topology.kubernetes.io/zone": "us-east-1a",
                                   "topology.ebs.csi.aws.com/zone": "us-east-1a", "test": tag})
    kube.core.patch_node(first, {"spec": {"unschedulable": True}})
    kube.ready_node(second, labels={"topology.kubernetes.io/zone": "us-east-1b",
                                    "topology.ebs.csi.aws.com/zone": "us-east-1b", "test": tag})
    storage_class = f"gp3-{tag}"
    client.StorageV1Api(kube.api_client).create_storage_class({
        "metadata": {"name": storage_class}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer", "parameters": {"type": "gp3"}})
    kube.apps.create_namespaced_stateful_set(ns, _statefulset("db", 2, storage_class, {"test": tag}))
    wait_for(lambda: kube.apps.read_namespaced_stateful_set_status("db", ns).status.ready_replicas == 2)
    claims = {c.metadata.name: c for c in kube.core.list_namespaced_persistent_volume_claim(ns).items}
    assert set(claims) == {"data-db-0", "data-db-1"}
    for ordinal in (0, 1):
        pod = kube.core.read_namespaced_pod(f"db-{ordinal}", ns)
        assert pod.spec.hostname == f"db-{ordinal}" and pod.spec.subdomain == "db"
        assert pod.metadata.labels["statefulset.kubernetes.io/pod-name"] == f"db-{ordinal}"
        assert [v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim] == [
            f"data-db-{ordinal}"]
        assert _zone_of_pod(kube, ns, f"db-{ordinal}") == "us-east-1b"
    volume = claims["data-db-0"].spec.volume_name
    assert volume
    kube.core.patch_node(first, {"spec": {"unschedulable": False}})
    kube.core.delete_namespaced_pod("db-0", ns, grace_period_seconds=0)
    wait_for(lambda: _zone_of_pod(kube, ns, "db-0"))
    assert _zone_of_pod(kube, ns, "db-0") == "us-east-1b"
    again = kube.core.read_namespaced_persistent_volume_claim("data-db-0", ns)
    assert (again.metadata.uid, again.spec.volume_name) == (claims["data-db-0"].metadata.uid, volume)


def test_scaling_a_statefulset_down_removes_the_highest_ordinals_and_keeps_their_claims(kube: KubeHarness) -> None:
    """#31.2: scale down deletes the pods with the highest ordinals; their claims stay (retention Retain, the
    default); status counts replicas and ready replicas (stateful_set_control_test.go "ScalesDown" and
    TestStatefulSetControlScaleDownDeleteError; e2e statefulset.go "Scaling down before scale up is finished
    should wait until current pod will be running and ready before it will be removed" for the order)."""
    ns, tag = kube.namespace(), uuid.uuid4().hex[:6]
    kube.ready_node(f"n-{tag}", labels={"topology.kubernetes.io/zone": "us-east-1a",
                                        "topology.ebs.csi.aws.com/zone": "us-east-1a", "test": tag})
    storage_class = f"gp3-{tag}"
    client.StorageV1Api(kube.api_client).create_storage_class({
        "metadata": {"name": storage_class}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer"})
    kube.apps.create_namespaced_stateful_set(ns, _statefulset("web", 3, storage_class, {"test": tag}))
    wait_for(lambda: kube.apps.read_namespaced_stateful_set_status("web", ns).status.ready_replicas == 3)
    kube.apps.patch_namespaced_stateful_set_scale("web", ns, {"spec": {"replicas": 1}})

    def remaining() -> set[str]:
        return {p.metadata.name for p in kube.core.list_namespaced_pod(ns).items if not p.metadata.deletion_timestamp}

    wait_for(lambda: remaining() == {"web-0"})
    status = wait_for(lambda: (s := kube.apps.read_namespaced_stateful_set_status("web", ns).status).replicas == 1
                      and s)
    assert status.ready_replicas == 1
    assert {c.metadata.name for c in kube.core.list_namespaced_persistent_volume_claim(ns).items} == {
        "data-web-0", "data-web-1", "data-web-2"}


def test_a_new_statefulset_reads_zero_replicas_in_its_status_not_none(kube: KubeHarness) -> None:
    """The API server resets a created StatefulSet's status to the empty one, whose replicas and
    availableReplicas are not omitempty (k8s.io/api apps/v1 StatefulSetStatus): a client reading it at once
    gets 0, never a missing status (a CI run's wait on readyReplicas met None here)."""
    ns, tag = kube.namespace(), uuid.uuid4().hex[:6]
    body = _statefulset("idle", 0, f"gp3-{tag}", {"test": tag})
    created = kube.apps.create_namespaced_stateful_set(ns, body)
    assert created.status is not None and (created.status.replicas, created.status.available_replicas) == (0, 0)
