"""sim's attach-detach: VolumeAttachments follow the pods that use CSI volumes on a node (#30.7)."""

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


def _volume(kube: KubeHarness, ns: str, driver: str | None = "ebs.csi.aws.com") -> tuple[str, str]:
    """A PersistentVolume (CSI when ``driver``) and a claim bound to it: (claim, PV)."""
    pv = f"pv-{uuid.uuid4().hex[:8]}"
    source = {"csi": {"driver": driver, "volumeHandle": f"vol-{pv}"}} if driver else {"hostPath": {"path": "/tmp"}}
    kube.core.create_persistent_volume({"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **source}})
    kube.core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": f"c-{pv}"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv}})
    return f"c-{pv}", pv


def _pod(kube: KubeHarness, ns: str, name: str, node: str, claim: str) -> None:
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
        "nodeName": node, "containers": [{"name": "c", "image": "x"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})


def _attachments(kube: KubeHarness, node: str) -> list:
    items = client.StorageV1Api(kube.api_client).list_volume_attachment().items
    return [va for va in items if va.spec.node_name == node]


def test_a_pod_with_a_csi_volume_attaches_it_and_detaches_after_the_pod_goes(kube: KubeHarness) -> None:
    """#30.7: a running pod's CSI volume has a VolumeAttachment (attacher = the PV's driver, the node, the PV,
    attached); once no pod on the node uses it, it is deleted after the detach delay. A non-CSI volume
    has none."""
    ns, node = kube.namespace(), f"n-{uuid.uuid4().hex[:6]}"
    kube.ready_node(node)
    claim, pv = _volume(kube, ns)
    local_claim, _ = _volume(kube, ns, driver=None)
    _pod(kube, ns, "a", node, claim)
    _pod(kube, ns, "b", node, claim)
    _pod(kube, ns, "local", node, local_claim)
    va = wait_for(lambda: _attachments(kube, node))[0]
    assert (va.spec.attacher, va.spec.source.persistent_volume_name) == ("ebs.csi.aws.com", pv)
    wait_for(lambda: _attachments(kube, node)[0].status and _attachments(kube, node)[0].status.attached)
    kube.core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    kube.controllers.wait_idle()
    kube.clock.advance(10)
    kube.controllers.wait_idle()
    assert len(_attachments(kube, node)) == 1  # pod b still uses it
    kube.core.delete_namespaced_pod("b", ns, grace_period_seconds=0)
    kube.controllers.wait_idle()
    assert len(_attachments(kube, node)) == 1  # detaching takes a moment
    kube.clock.advance(10)
    wait_for(lambda: not _attachments(kube, node))


def test_a_volume_attachment_needs_an_attacher_a_node_and_one_source(kube: KubeHarness) -> None:
    """#30.7: sim validates VolumeAttachments as kube-apiserver does."""
    storage = client.StorageV1Api(kube.api_client)
    with pytest.raises(ApiException) as caught:
        storage.create_volume_attachment({"metadata": {"name": f"va-{uuid.uuid4().hex[:6]}"},
                                          "spec": {"attacher": "", "nodeName": "n", "source": {}}})
    assert caught.value.status == 422
    assert "spec.attacher" in caught.value.body and "spec.source" in caught.value.body
