"""#31.2: sim runs kube-controller-manager's PersistentVolume controller for static binding: a claim pre-bound by
``spec.volumeName`` to an existing volume is bound, so the product (scheduling/volumetopology.py) sees it
bind-completed. Each test names the case it restates in kubernetes/kubernetes
pkg/controller/volume/persistentvolume/binder_test.go, TestSync."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sim.kube.pvcontroller import BIND_COMPLETED, BOUND_BY_CONTROLLER
from sim.kube.volumebinding import ebs_volume
from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"pv-{tag}", f"manual-{tag}"


def _volume(kube: KubeHarness, name: str, cls: str, storage: str = "4Gi", **spec: Any) -> None:
    kube.core.create_persistent_volume(ebs_volume(name, "us-east-1b", storage, storageClassName=cls, **spec))


def _claim(kube: KubeHarness, ns: str, name: str, volume: str, cls: str) -> None:
    kube.core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": name}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "4Gi"}},
        "storageClassName": cls, "volumeName": volume}})


def _bound(kube: KubeHarness, ns: str, claim: str, volume: str) -> tuple[Any, Any]:
    def both() -> tuple[Any, Any] | None:
        pvc, pv = kube.core.read_namespaced_persistent_volume_claim(claim, ns), kube.core.read_persistent_volume(volume)
        return (pvc, pv) if pvc.status.phase == "Bound" and pv.status.phase == "Bound" else None
    return wait_for(both)


def test_a_claim_prebound_to_an_available_volume_is_bound(kube: KubeHarness) -> None:
    """TestSync "2-3 - claim prebound to unbound volume": the claim gets bind-completed (not bound-by-controller),
    the volume the claim as claimRef (bound-by-controller), both Bound; the volume was Available before
    ("4-1 - pending volume")."""
    ns, (pv, cls) = kube.namespace(), _names()
    _volume(kube, pv, cls)
    wait_for(lambda: kube.core.read_persistent_volume(pv).status.phase == "Available")
    _claim(kube, ns, "data", pv, cls)

    pvc, volume = _bound(kube, ns, "data", pv)

    assert pvc.metadata.annotations[BIND_COMPLETED] == "yes" and BOUND_BY_CONTROLLER not in pvc.metadata.annotations
    assert pvc.status.capacity == {"storage": "4Gi"} and pvc.status.access_modes == ["ReadWriteOnce"]
    ref = volume.spec.claim_ref
    assert (ref.namespace, ref.name, ref.uid) == (ns, "data", pvc.metadata.uid)
    assert volume.metadata.annotations[BOUND_BY_CONTROLLER] == "yes"


def test_a_claim_waiting_for_its_volume_is_bound_once_the_volume_exists(kube: KubeHarness) -> None:
    """TestSync "2-1 - claim prebound to non-existing volume - noop", then "2-4 - claim prebound to prebound
    volume by name" once the volume appears naming the claim (no bound-by-controller on it)."""
    ns, (pv, cls) = kube.namespace(), _names()
    _claim(kube, ns, "data", pv, cls)
    kube.controllers.wait_idle()
    assert kube.core.read_namespaced_persistent_volume_claim("data", ns).status.phase == "Pending"
    _volume(kube, pv, cls, claimRef={"kind": "PersistentVolumeClaim", "namespace": ns, "name": "data"})

    _, volume = _bound(kube, ns, "data", pv)

    assert BOUND_BY_CONTROLLER not in (volume.metadata.annotations or {})


@pytest.mark.parametrize("storage, cls, ref", [
    ("1Gi", None, None),  # too small: checkVolumeSatisfyClaim
    ("4Gi", "other", None),  # another StorageClass
    ("4Gi", None, "someone-else"),  # "2-6 - claim prebound to already bound volume"
])
def test_a_claim_the_volume_cannot_serve_stays_pending(kube: KubeHarness, storage: str, cls: str | None,
                                                       ref: str | None) -> None:
    ns, (pv, own_class) = kube.namespace(), _names()
    extra = {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": ref}} if ref else {}
    _volume(kube, pv, cls or own_class, storage, **extra)
    _claim(kube, ns, "data", pv, own_class)
    kube.controllers.wait_idle()

    pvc = kube.core.read_namespaced_persistent_volume_claim("data", ns)
    assert pvc.status.phase == "Pending" and BIND_COMPLETED not in (pvc.metadata.annotations or {})
    assert kube.core.read_persistent_volume(pv).status.phase != "Bound"
