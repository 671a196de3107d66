"""VolumeAttachments on a node, and the PersistentVolume a claim is bound to (for the termination's wait
for volume detachment)."""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from .listing import collection_path, list_objects
from .raw import path_segment, request_json


def attachments_on_node(api: ApiClient, node_name: str) -> list[dict[str, Any]]:
    """The node's VolumeAttachments (the API offers no field selector for spec.nodeName: filtered here)."""
    listed = list_objects(api, collection_path("storage.k8s.io", "v1", "volumeattachments"))
    return [va for va in listed.items if (va.get("spec") or {}).get("nodeName") == node_name]


def claim_volume(api: ApiClient, namespace: str, claim: str) -> str | None:
    """The PersistentVolume a claim is bound to, or None (unbound, or the claim is gone)."""
    path = f"{collection_path('', 'v1', 'persistentvolumeclaims', namespace)}/{path_segment(claim)}"
    try:
        pvc = request_json(api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return (pvc.get("spec") or {}).get("volumeName") or None
