"""What the attach-detach controller and a CSI attacher do: VolumeAttachments follow the pods on a node.

A pod on a node (scheduled, not finished) whose PersistentVolumeClaim is bound to a CSI PersistentVolume
has its volume attached to that node: one ``storage.k8s.io/v1`` VolumeAttachment (attacher = the PV's
``csi.driver``, ``nodeName``, ``source.persistentVolumeName``) with ``status.attached=true``. Once no such
pod uses the volume on that node any more, the attachment is deleted after a short (simulated) delay,
the time a real detach takes; Karpenter's termination waits for exactly that.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .errors import ApiError
from .objects import meta, pod_terminal
from .store import Store

ATTACHMENTS = "storage.k8s.io/v1/volumeattachments"
PVCS = "v1/persistentvolumeclaims"
PVS = "v1/persistentvolumes"


def attachment_name(attacher: str, pv_name: str, node_name: str) -> str:
    """As the attach-detach controller names them: a digest of volume, attacher and node."""
    digest = hashlib.sha256(f"{pv_name}{attacher}{node_name}".encode()).hexdigest()
    return f"csi-{digest}"


def uses_claims(pod: dict[str, Any]) -> bool:
    return any("persistentVolumeClaim" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def _csi_volumes(store: Store, pod: dict[str, Any]) -> dict[str, str]:
    """{PV name: CSI driver} of the pod's claims bound to a CSI PersistentVolume."""
    found: dict[str, str] = {}
    namespace = meta(pod).get("namespace") or "default"
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        pvc = store.peek(PVCS, claim, namespace) if claim else None
        pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
        pv = store.peek(PVS, pv_name) if pv_name else None
        driver = (((pv or {}).get("spec") or {}).get("csi") or {}).get("driver")
        if pv_name and driver:
            found[pv_name] = driver
    return found


def wanted(store: Store, node_name: str) -> dict[str, tuple[str, str]]:
    """{attachment name: (PV name, driver)} the node's pods need now."""
    out: dict[str, tuple[str, str]] = {}
    for pod in store.pods_on_node(node_name):
        if pod_terminal(pod) or not uses_claims(pod):
            continue
        for pv_name, driver in _csi_volumes(store, pod).items():
            out[attachment_name(driver, pv_name, node_name)] = (pv_name, driver)
    return out


def on_node(store: Store, node_name: str) -> list[dict[str, Any]]:
    return [va for va in store.snapshot(ATTACHMENTS) if (va.get("spec") or {}).get("nodeName") == node_name]


def sync(store: Store, node_name: str) -> list[str]:
    """Attach what the node's pods need; return the attachments on the node nothing needs any more (the
    caller detaches them after the delay)."""
    need = wanted(store, node_name)
    present = {meta(va)["name"] for va in on_node(store, node_name)}
    for name, (pv_name, driver) in need.items():
        if name not in present:
            _attach(store, name, pv_name, driver, node_name)
    return sorted(present - set(need))


def _attach(store: Store, name: str, pv_name: str, driver: str, node_name: str) -> None:
    body = {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
        "spec": {"attacher": driver, "nodeName": node_name, "source": {"persistentVolumeName": pv_name}},
    }
    try:
        store.create(ATTACHMENTS, body)
    except ApiError as exc:
        if exc.status != 409:  # already attached by an earlier pass
            raise

    def attached(obj: dict[str, Any]) -> bool:
        if (obj.get("status") or {}).get("attached"):
            return False
        obj["status"] = {"attached": True}
        return True

    store.modify(ATTACHMENTS, name, None, attached, subresource="status")


def detach(store: Store, name: str) -> None:
    """Delete the attachment if still nothing on its node needs it (a pod may have come back meanwhile)."""
    va = store.peek(ATTACHMENTS, name)
    if va is None:
        return
    node_name = (va.get("spec") or {}).get("nodeName") or ""
    if name in wanted(store, node_name):
        return
    try:
        store.delete(ATTACHMENTS, name)
    except ApiError as exc:
        if exc.status != 404:
            raise
