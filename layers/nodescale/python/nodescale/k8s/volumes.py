"""VolumeAttachments on a node, and the PersistentVolume a claim is bound to (for the termination's wait
for volume detachment); the claims, PersistentVolumes, StorageClasses and CSINodes a pass plans pods' volumes with."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from ..scheduling.volumetopology import VolumeObjects
from ..scheduling.volumeusage import csinode_limits
from .http import ApiClient
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


def read_volume_objects(api: ApiClient) -> VolumeObjects:
    """Every claim, PersistentVolume, StorageClass and CSINode, one list each (a get per claim costs more at
    scale)."""
    claims = list_objects(api, collection_path("", "v1", "persistentvolumeclaims")).items
    volumes = list_objects(api, collection_path("", "v1", "persistentvolumes")).items
    classes = list_objects(api, collection_path("storage.k8s.io", "v1", "storageclasses")).items
    csinodes = list_objects(api, collection_path("storage.k8s.io", "v1", "csinodes")).items
    return VolumeObjects(
        claims={((c.get("metadata") or {}).get("namespace") or "default", (c.get("metadata") or {}).get("name") or ""): c
                for c in claims},
        volumes={(v.get("metadata") or {}).get("name") or "": v for v in volumes},
        classes={(c.get("metadata") or {}).get("name") or "": c for c in classes},
        limits=csinode_limits(csinodes),
    )
