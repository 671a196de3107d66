"""kube-scheduler's NodeVolumeLimits filter for CSI drivers, for sim's scheduler (#31.2).

As upstream (kubernetes/kubernetes pkg/scheduler/framework/plugins/nodevolumelimits/csi.go): a node whose
CSINode reports an allocatable count for a driver takes a pod only while the volumes of that driver its pods
use, together with the pod's volumes not on the node already, stay within the count; otherwise the node is
filtered out with ``node(s) exceed max volume count``. A volume is a bound claim's PersistentVolume
(``spec.csi.driver`` and its volume handle) or an unbound claim (its StorageClass's provisioner, counted once
per claim); the in-tree ``kubernetes.io/aws-ebs`` counts as ``ebs.csi.aws.com`` (CSI migration). A node
without a CSINode, or a driver without a count, has no limit. Not modelled: counting VolumeAttachments of
volumes no pod on the node uses any more.
"""

from __future__ import annotations

from typing import Any

from .objects import meta, pod_terminal
from .store import Store
from .volumebinding import CLASSES, EBS_DRIVER, PVCS, PVS, claim_names

CSINODES = "storage.k8s.io/v1/csinodes"
LIMIT_REASON = "node(s) exceed max volume count"
MIGRATED = {"kubernetes.io/aws-ebs": EBS_DRIVER}

Volumes = dict[str, set[str]]  # driver -> unique volume handles


def pod_csi_volumes(store: Store, pod: dict[str, Any]) -> Volumes:
    """The CSI volumes a pod's claims use, by driver (claims that cannot be resolved are not counted)."""
    namespace = meta(pod).get("namespace") or "default"
    found: Volumes = {}
    for name in claim_names(pod):
        claim = store.peek(PVCS, name, namespace)
        if claim is None:
            continue
        spec = claim.get("spec") or {}
        if spec.get("volumeName"):
            pv = store.peek(PVS, spec["volumeName"])
            csi = ((pv or {}).get("spec") or {}).get("csi") or {}
            driver, handle = csi.get("driver"), csi.get("volumeHandle")
        else:
            cls = store.peek(CLASSES, spec.get("storageClassName") or "") if spec.get("storageClassName") else None
            driver, handle = (cls or {}).get("provisioner"), f"{namespace}/{name}"
        if driver and handle:
            found.setdefault(MIGRATED.get(driver, driver), set()).add(handle)
    return found


def node_limits(store: Store, node_name: str) -> dict[str, int]:
    """Each driver's allocatable count on the node's CSINode (empty: no CSINode, no limits)."""
    csinode = store.peek(CSINODES, node_name)
    limits = {}
    for driver in ((csinode or {}).get("spec") or {}).get("drivers") or []:
        count = (driver.get("allocatable") or {}).get("count")
        if driver.get("name") and count is not None:
            limits[driver["name"]] = int(count)
    return limits


def exceeds(store: Store, node_name: str, wanted: Volumes) -> bool:
    """Whether the pod's volumes (``wanted``) would take the node past a driver's count."""
    limits = node_limits(store, node_name)
    relevant = {d: handles for d, handles in wanted.items() if d in limits}
    if not relevant:
        return False
    attached: Volumes = {}
    for pod in store.pods_on_node(node_name):
        if pod_terminal(pod):
            continue
        for driver, handles in pod_csi_volumes(store, pod).items():
            attached.setdefault(driver, set()).update(handles)
    # Volumes already on the node (another pod's) cost nothing more; only new ones count against the limit.
    return any((new := handles - attached.get(d, set())) and len(attached.get(d, set())) + len(new) > limits[d]
               for d, handles in relevant.items())
