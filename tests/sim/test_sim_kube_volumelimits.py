"""sim's scheduler runs kube-scheduler's NodeVolumeLimits filter for CSI drivers (#31.2): a node's CSINode count
per driver caps the volumes its pods use. Restates kubernetes/kubernetes
pkg/scheduler/framework/plugins/nodevolumelimits/csi_test.go TestCSILimits cases ("should count pending PVCs
..."/"doesn't when the volumes are already attached"/"no CSINode" style: ErrReasonMaxVolumeCountExceeded
"node(s) exceed max volume count")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from sim.kube.volumebinding import ebs_volume
from tests.integration.conftest_kube import KubeHarness, running_harness, unschedulable_message, wait_for

pytestmark = pytest.mark.integration

ZONE = "us-east-1a"


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _node(kube: KubeHarness, tag: str, limit: int | None) -> str:
    """A ready node in ZONE; with a limit, the EBS driver's CSINode reporting it."""
    name = f"n-{uuid.uuid4().hex[:6]}"
    kube.ready_node(name, labels={"topology.kubernetes.io/zone": ZONE, "topology.ebs.csi.aws.com/zone": ZONE,
                                  "test": tag})
    if limit is not None:
        uid = kube.core.read_node(name).metadata.uid
        client.StorageV1Api(kube.api_client).create_csi_node({
            "metadata": {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                                            "uid": uid}]},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": f"i-{name}",
                                  "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
                                  "allocatable": {"count": limit}}]}})
    return name


def _volume_pod(kube: KubeHarness, ns: str, name: str, claim: str, tag: str, new_volume: bool = True) -> None:
    if new_volume:
        pv = f"pv-{uuid.uuid4().hex[:8]}"
        kube.core.create_persistent_volume(ebs_volume(pv, ZONE, "4Gi"))
        kube.core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "4Gi"}}, "volumeName": pv,
            "storageClassName": ""}})
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
        "nodeSelector": {"test": tag}, "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})


def _node_of(kube: KubeHarness, ns: str, name: str) -> str:
    return wait_for(lambda: kube.core.read_namespaced_pod(name, ns).spec.node_name)



def test_a_node_at_its_csinode_count_takes_no_pod_with_a_new_volume(kube: KubeHarness) -> None:
    """#31.2: with a count of 1, the node's first volume pod binds; a second pod with another volume stays
    Pending with NodeVolumeLimits' reason; a pod using the volume already on the node still binds (csi_test.go
    TestCSILimits: "should count ... exceed max volume count" and the already-attached volume case)."""
    ns, tag = kube.namespace(), uuid.uuid4().hex[:6]
    node = _node(kube, tag, limit=1)
    _volume_pod(kube, ns, "first", "a", tag)
    assert _node_of(kube, ns, "first") == node
    _volume_pod(kube, ns, "second", "b", tag)
    assert "1 node(s) exceed max volume count" in unschedulable_message(kube, ns, "second")
    _volume_pod(kube, ns, "sharer", "a", tag, new_volume=False)
    assert _node_of(kube, ns, "sharer") == node
    assert not kube.core.read_namespaced_pod("second", ns).spec.node_name


def test_a_node_without_a_csinode_has_no_volume_limit(kube: KubeHarness) -> None:
    """#31.2: no CSINode, no limit (csi_test.go TestCSILimits "CSINode not found"-style case)."""
    ns, tag = kube.namespace(), uuid.uuid4().hex[:6]
    node = _node(kube, tag, limit=None)
    for index in range(3):
        _volume_pod(kube, ns, f"p{index}", f"c{index}", tag)
    assert {_node_of(kube, ns, f"p{index}") for index in range(3)} == {node}
