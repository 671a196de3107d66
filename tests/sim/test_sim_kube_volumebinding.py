"""sim's scheduler runs kube-scheduler's VolumeBinding plugin, and provisions WaitForFirstConsumer claims as the
EBS CSI driver does (#31.2). Each test names the upstream test it restates (kubernetes/kubernetes
pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go, TestVolumeBinding cases, and
binder_test.go)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.kube.volumebinding import ebs_volume
from tests.integration.conftest_kube import KubeHarness, running_harness, unschedulable_message, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _id() -> str:
    return uuid.uuid4().hex[:6]


def _zone_nodes(kube: KubeHarness, *zones: str) -> dict[str, str]:
    """A node per zone, labelled as a node running the EBS CSI driver is: {zone: node}. A selector label keeps
    the test's pods off other tests' nodes."""
    tag = _id()
    nodes = {}
    for zone in zones:
        name = f"n-{zone}-{tag}"
        kube.ready_node(name, labels={"topology.kubernetes.io/zone": zone, "topology.ebs.csi.aws.com/zone": zone,
                                      "test": tag})
        nodes[zone] = name
    return nodes


def _claim(kube: KubeHarness, ns: str, name: str, **spec: object) -> None:
    kube.core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "4Gi"}}, **spec}})


def _pod(kube: KubeHarness, ns: str, name: str, claim: str, selector: dict[str, str]) -> None:
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
        "nodeSelector": selector, "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})


def _class(kube: KubeHarness, mode: str, **extra: object) -> str:
    name = f"sc-{_id()}"
    client.StorageV1Api(kube.api_client).create_storage_class({
        "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com", "volumeBindingMode": mode, **extra})
    return name



def test_a_pod_whose_claim_is_bound_to_a_zonal_volume_binds_only_in_that_zone(kube: KubeHarness) -> None:
    """#31.2: a claim bound to a PV with node affinity lets the pod onto the nodes it selects only; when none of
    them fits, the pod stays Pending with VolumeBinding's reason (volume_binding_test.go TestVolumeBinding
    "PVC with node affinity mismatch"-style case: ErrReasonNodeConflict "node(s) had volume node affinity
    conflict")."""
    ns = kube.namespace()
    nodes = _zone_nodes(kube, "us-east-1a", "us-east-1b", "us-east-1c")
    selector = {"test": kube.core.read_node(nodes["us-east-1a"]).metadata.labels["test"]}
    pv = f"pv-{_id()}"
    kube.core.create_persistent_volume(ebs_volume(pv, "us-east-1b", "4Gi"))
    _claim(kube, ns, "data", volumeName=pv)
    for index in range(3):
        _pod(kube, ns, f"p{index}", "data", selector)
    wait_for(lambda: all(kube.core.read_namespaced_pod(f"p{i}", ns).spec.node_name for i in range(3)))
    assert {kube.core.read_namespaced_pod(f"p{i}", ns).spec.node_name for i in range(3)} == {nodes["us-east-1b"]}
    elsewhere = f"pv-{_id()}"
    kube.core.create_persistent_volume(ebs_volume(elsewhere, "us-west-2a", "4Gi"))
    _claim(kube, ns, "far", volumeName=elsewhere)
    _pod(kube, ns, "far", "far", selector)
    message = unschedulable_message(kube, ns, "far")
    assert message.startswith("0/") and " 3 node(s) had volume node affinity conflict" in message, message
    assert kube.core.read_namespaced_pod("far", ns).spec.node_name is None


def test_an_unbound_immediate_claim_or_a_missing_one_keeps_the_pod_pending(kube: KubeHarness) -> None:
    """#31.2: PreFilter rejects a pod whose claim is unbound and binds immediately (no class, or an Immediate
    class) or does not exist, with the plugin's message for every node (volume_binding_test.go TestVolumeBinding
    "immediate claims not bound" -> "pod has unbound immediate PersistentVolumeClaims", and "pvc not found" ->
    `persistentvolumeclaim "pvc-a" not found`)."""
    ns = kube.namespace()
    nodes = _zone_nodes(kube, "us-east-1a")
    selector = {"test": kube.core.read_node(nodes["us-east-1a"]).metadata.labels["test"]}
    _claim(kube, ns, "no-class")
    _claim(kube, ns, "immediate", storageClassName=_class(kube, "Immediate"))
    _pod(kube, ns, "a", "no-class", selector)
    _pod(kube, ns, "b", "immediate", selector)
    _pod(kube, ns, "c", "missing", selector)
    for pod, reason in (("a", "pod has unbound immediate PersistentVolumeClaims"),
                        ("b", "pod has unbound immediate PersistentVolumeClaims"),
                        ("c", 'persistentvolumeclaim "missing" not found')):
        message = unschedulable_message(kube, ns, pod)
        total = len(kube.core.list_node().items)
        assert message == (f"0/{total} nodes are available: {reason}. preemption: 0/{total} nodes are available: "
                           f"{total} Preemption is not helpful for scheduling."), message
    # The missing claim appears: the pod is tried again and binds (VolumeBinding's PVC-added event).
    _claim(kube, ns, "missing", storageClassName=_class(kube, "WaitForFirstConsumer"))
    wait_for(lambda: kube.core.read_namespaced_pod("c", ns).spec.node_name == nodes["us-east-1a"])
    assert kube.core.read_namespaced_pod("a", ns).spec.node_name is None


def test_a_wait_for_first_consumer_claim_is_provisioned_in_the_pods_nodes_zone(kube: KubeHarness) -> None:
    """#31.2: the node must be in the class's allowedTopologies; once the pod binds, the claim carries
    volume.kubernetes.io/selected-node and is bound to a new EBS PV whose node affinity is that node's zone
    (binder_test.go TestFindPodVolumesWithProvisioning "allowedTopologies" cases and TestAssumePodVolumes /
    TestBindPodVolumes "provisioning": selected-node annotation set; the volume then bound to the claim)."""
    ns = kube.namespace()
    nodes = _zone_nodes(kube, "us-east-1a", "us-east-1b")
    selector = {"test": kube.core.read_node(nodes["us-east-1a"]).metadata.labels["test"]}
    cls = _class(kube, "WaitForFirstConsumer", reclaimPolicy="Retain", allowedTopologies=[{"matchLabelExpressions": [
        {"key": "topology.ebs.csi.aws.com/zone", "values": ["us-east-1b"]}]}])
    _claim(kube, ns, "data", storageClassName=cls)
    _pod(kube, ns, "db", "data", selector)
    wait_for(lambda: kube.core.read_namespaced_pod("db", ns).spec.node_name)
    assert kube.core.read_namespaced_pod("db", ns).spec.node_name == nodes["us-east-1b"]
    claim = kube.core.read_namespaced_persistent_volume_claim("data", ns)
    assert claim.metadata.annotations["volume.kubernetes.io/selected-node"] == nodes["us-east-1b"]
    assert claim.status.phase == "Bound" and claim.status.capacity == {"storage": "4Gi"}
    pv = kube.core.read_persistent_volume(claim.spec.volume_name)
    assert pv.status.phase == "Bound" and pv.spec.csi.driver == "ebs.csi.aws.com"
    assert (pv.spec.claim_ref.name, pv.spec.claim_ref.namespace, pv.spec.claim_ref.uid) == (
        "data", ns, claim.metadata.uid)
    assert pv.spec.capacity == {"storage": "4Gi"} and pv.spec.storage_class_name == cls
    assert pv.spec.persistent_volume_reclaim_policy == "Retain"
    expressions = pv.spec.node_affinity.required.node_selector_terms[0].match_expressions
    assert {(e.key, e.operator, tuple(e.values)) for e in expressions} == {
        ("topology.ebs.csi.aws.com/zone", "In", ("us-east-1b",)), ("topology.kubernetes.io/zone", "In", ("us-east-1b",))}
    # The provisioned volume is attached to the node as any CSI volume is.
    storage = client.StorageV1Api(kube.api_client)
    wait_for(lambda: [va for va in storage.list_volume_attachment().items
                      if va.spec.source.persistent_volume_name == pv.metadata.name
                      and va.spec.node_name == nodes["us-east-1b"]])
    # A class whose allowedTopologies no node matches leaves the pod Pending with the bind-conflict reason.
    nowhere = _class(kube, "WaitForFirstConsumer", allowedTopologies=[{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["us-west-2a"]}]}])
    _claim(kube, ns, "nowhere", storageClassName=nowhere)
    _pod(kube, ns, "stuck", "nowhere", selector)
    assert "2 node(s) didn't find available persistent volumes to bind" in unschedulable_message(kube, ns, "stuck")
    assert kube.core.read_namespaced_persistent_volume_claim("nowhere", ns).spec.volume_name is None


@pytest.mark.parametrize(("create", "field"), [
    (lambda s, n: s.create_storage_class({"metadata": {"name": n}, "provisioner": "ebs.csi.aws.com",
                                          "volumeBindingMode": "Later"}), "volumeBindingMode"),
    (lambda s, n: s.create_storage_class({"metadata": {"name": n}, "provisioner": ""}), "provisioner"),
    (lambda s, n: s.create_storage_class({"metadata": {"name": n}, "provisioner": "ebs.csi.aws.com",
                                          "reclaimPolicy": "Recycle"}), "reclaimPolicy"),
])
def test_storage_classes_are_validated(kube: KubeHarness, create: object, field: str) -> None:
    """#31.2: kube-apiserver's ValidateStorageClass (pkg/apis/storage/validation validation_test.go
    TestValidateStorageClass: missing provisioner, bad reclaimPolicy; TestValidateVolumeBindingModeForStorageClass:
    an unknown mode) answers 422 naming the field."""
    with pytest.raises(ApiException) as caught:
        create(client.StorageV1Api(kube.api_client), f"bad-{_id()}")  # type: ignore[operator]
    assert caught.value.status == 422 and f"{field}: " in caught.value.body


def test_claims_and_volumes_are_validated(kube: KubeHarness) -> None:
    """#31.2: ValidatePersistentVolumeClaimSpec needs access modes and a storage request; ValidatePersistentVolume
    needs access modes, capacity, one volume source and a node affinity with terms (core validation_test.go
    TestValidatePersistentVolumeClaim "missing-access-modes", "no-resource-requests"; TestValidatePersistentVolumes
    "missing-accessmodes", "missing-capacity", "missing-volume-source", "invalid-volume-node-affinity")."""
    ns = kube.namespace()
    with pytest.raises(ApiException) as caught:
        kube.core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": "bad"}, "spec": {}})
    assert caught.value.status == 422
    assert "spec.accessModes: Required value: at least 1 access mode is required" in caught.value.body
    assert "spec.resources[storage]: Required value" in caught.value.body
    with pytest.raises(ApiException) as caught:
        kube.core.create_persistent_volume({"metadata": {"name": f"bad-{_id()}"}, "spec": {
            "nodeAffinity": {"required": {"nodeSelectorTerms": []}}}})
    assert caught.value.status == 422
    for text in ("spec.accessModes: Required value", "spec.capacity: Required value",
                 "spec: Required value: must specify a volume type",
                 "spec.nodeAffinity.required.nodeSelectorTerms: Required value"):
        assert text in caught.value.body, text
