"""kube-scheduler's VolumeBinding plugin, and the EBS CSI driver's provisioning it sets off, for sim's scheduler.

As upstream (kubernetes/kubernetes pkg/scheduler/framework/plugins/volumebinding):

- PreFilter: a pod naming a PersistentVolumeClaim that does not exist, is being deleted or has lost its volume,
  or one whose unbound claim binds immediately (no StorageClass, a class that is not found, or a class with
  ``volumeBindingMode: Immediate``), fits no node; its message is the reason alone (``pod has unbound immediate
  PersistentVolumeClaims``, ``persistentvolumeclaim "x" not found``). sim's PV controller (``pvcontroller``)
  binds only claims that name their volume, so an Immediate claim without one is never bound: the pod stays
  Pending, as on a cluster whose provisioner is down.
- Filter: a claim bound to a PersistentVolume with ``spec.nodeAffinity`` allows only the nodes it selects
  (``node(s) had volume node affinity conflict``); an unbound ``WaitForFirstConsumer`` claim allows the nodes
  in its class's ``allowedTopologies`` that sim's provisioner can serve (``node(s) didn't find available
  persistent volumes to bind``).
- PreBind: for an unbound WaitForFirstConsumer claim the scheduler writes ``volume.kubernetes.io/selected-node``
  on the claim; the provisioner then creates the volume in that node's zone and the PV controller binds both.
  sim does all three at once before binding the pod: a PV named ``pvc-<claim uid>`` on the CSI driver
  ``ebs.csi.aws.com`` whose node affinity requires ``topology.ebs.csi.aws.com/zone`` and
  ``topology.kubernetes.io/zone`` to be the node's zone, the claim's requested storage as capacity.

Not modelled: binding an unbound WaitForFirstConsumer claim to an existing Available PV (static binding, as
for local volumes), CSI storage capacity, and generic ephemeral volumes. Only the EBS provisioners are served
(``ebs.csi.aws.com`` and the in-tree ``kubernetes.io/aws-ebs`` that CSI migration hands to it); a class with
another provisioner fits no node.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from .objects import meta
from .placement import matches_node_selector
from .store import Store

PVCS = "v1/persistentvolumeclaims"
PVS = "v1/persistentvolumes"
CLASSES = "storage.k8s.io/v1/storageclasses"
EBS_DRIVER = "ebs.csi.aws.com"
EBS_PROVISIONERS = (EBS_DRIVER, "kubernetes.io/aws-ebs")
EBS_ZONE_LABEL = "topology.ebs.csi.aws.com/zone"
ZONE_LABEL = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass
class PodVolumes:
    """The pod's claims as PreFilter sorts them: the PVs of its bound claims and its unbound delayed claims
    (each with its StorageClass)."""

    bound: list[dict[str, Any]] = field(default_factory=list)
    delayed: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def reasons(self, node: dict[str, Any]) -> tuple[str, ...]:
        """Filter: why the node cannot serve these volumes (empty when it can)."""
        found = []
        if any(not _pv_allows(pv, node) for pv in self.bound):
            found.append(NODE_CONFLICT)
        if any(not _can_provision(cls, node) for _, cls in self.delayed):
            found.append(BIND_CONFLICT)
        return tuple(found)


def claim_names(pod: dict[str, Any]) -> list[str]:
    return [v["persistentVolumeClaim"].get("claimName") or ""
            for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


def pod_volumes(store: Store, pod: dict[str, Any]) -> PodVolumes | str | None:
    """PreFilter: None for a pod without claims, the rejection message when the pod fits no node whatever the
    node, else its volumes for Filter."""
    names = claim_names(pod)
    if not names:
        return None
    namespace = meta(pod).get("namespace") or "default"
    found = PodVolumes()
    immediate = False
    for name in names:
        claim = store.peek(PVCS, name, namespace)
        if claim is None:
            return f'persistentvolumeclaim "{name}" not found'
        volume_name = (claim.get("spec") or {}).get("volumeName")
        if (claim.get("status") or {}).get("phase") == "Lost":
            return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume_name}"'
        if meta(claim).get("deletionTimestamp"):
            return f'persistentvolumeclaim "{name}" is being deleted'
        if volume_name:
            pv = store.peek(PVS, volume_name)
            if pv is None:
                return f'persistentvolume "{volume_name}" not found'
            found.bound.append(pv)
            continue
        cls = delaying_class(store, claim)
        if cls is None:
            immediate = True
        else:
            found.delayed.append((claim, cls))
    return UNBOUND_IMMEDIATE if immediate else found


def delaying_class(store: Store, claim: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's StorageClass when it delays binding to the first consumer; None when the claim binds at once
    (no class named, a class not found, or an Immediate one), as upstream's IsDelayBindingMode reads it."""
    class_name = (claim.get("spec") or {}).get("storageClassName")
    cls = store.peek(CLASSES, class_name) if class_name else None
    if cls is None or cls.get("volumeBindingMode") != WAIT_FOR_FIRST_CONSUMER:
        return None
    return cls


def _pv_allows(pv: dict[str, Any], node: dict[str, Any]) -> bool:
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return not required or matches_node_selector(required, node)


def _zone(node: dict[str, Any]) -> str:
    return (meta(node).get("labels") or {}).get(ZONE_LABEL) or ""


def _can_provision(cls: dict[str, Any], node: dict[str, Any]) -> bool:
    """The class's provisioner is one sim serves, the node has a zone to put the volume in, and the node is in
    the class's allowedTopologies (any term whose every expression the node's labels satisfy)."""
    if cls.get("provisioner") not in EBS_PROVISIONERS or not _zone(node):
        return False
    terms = cls.get("allowedTopologies") or []
    labels = meta(node).get("labels") or {}
    return not terms or any(
        all(labels.get(expr.get("key")) in (expr.get("values") or []) for expr in term.get("matchLabelExpressions") or [])
        for term in terms
    )


def provision(store: Store, volumes: PodVolumes, node: dict[str, Any]) -> None:
    """PreBind for the pod's delayed claims on the chosen node: select the node on each claim, provision its
    volume in the node's zone and bind the two. An ApiError leaves the pod unbound (retried next pass)."""
    for claim, cls in volumes.delayed:
        name, namespace = meta(claim)["name"], meta(claim)["namespace"]

        def select(obj: dict[str, Any]) -> bool:
            annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[SELECTED_NODE] = meta(node)["name"]
            annotations["volume.kubernetes.io/storage-provisioner"] = EBS_DRIVER
            return True

        claim = store.modify(PVCS, name, namespace, select) or claim
        pv = store.create(PVS, provisioned_volume(claim, cls, _zone(node)))
        bind_claim(store, claim, pv)


def ebs_volume(name: str, zone: str, storage: str = "1Gi", access_modes: tuple[str, ...] = ("ReadWriteOnce",),
               **spec: Any) -> dict[str, Any]:
    """A PersistentVolume body for an EBS volume in ``zone``, as the EBS CSI driver makes them: its node affinity
    requires both the driver's zone label and topology.kubernetes.io/zone (tests create zonal PVs with it)."""
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "accessModes": list(access_modes),
            "capacity": {"storage": storage},
            "csi": {"driver": EBS_DRIVER, "volumeHandle": "vol-" + hashlib.sha256(name.encode()).hexdigest()[:17],
                    "fsType": "ext4"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": EBS_ZONE_LABEL, "operator": "In", "values": [zone]},
                {"key": ZONE_LABEL, "operator": "In", "values": [zone]},
            ]}]}},
            **spec,
        },
    }


def provisioned_volume(claim: dict[str, Any], cls: dict[str, Any], zone: str) -> dict[str, Any]:
    """The PersistentVolume the EBS CSI driver (through external-provisioner) makes for a claim in a zone."""
    spec = claim.get("spec") or {}
    uid = meta(claim)["uid"]
    parameters = cls.get("parameters") or {}
    extra = {"mountOptions": list(cls["mountOptions"])} if cls.get("mountOptions") else {}
    pv = ebs_volume(
        f"pvc-{uid}", zone, ((spec.get("resources") or {}).get("requests") or {}).get("storage") or "",
        tuple(spec.get("accessModes") or ()),
        claimRef={"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta(claim)["namespace"],
                  "name": meta(claim)["name"], "uid": uid, "resourceVersion": meta(claim).get("resourceVersion", "")},
        persistentVolumeReclaimPolicy=cls.get("reclaimPolicy") or "Delete",
        storageClassName=meta(cls)["name"],
        volumeMode=spec.get("volumeMode") or "Filesystem",
        **extra,
    )
    pv["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": EBS_DRIVER}
    pv["spec"]["csi"]["fsType"] = parameters.get("csi.storage.k8s.io/fstype") or parameters.get("fsType") or "ext4"
    return pv


def bind_claim(store: Store, claim: dict[str, Any], pv: dict[str, Any]) -> None:
    """What the PV controller does for a provisioned volume: the claim names the PV, both are Bound."""
    name, namespace, pv_name = meta(claim)["name"], meta(claim)["namespace"], meta(pv)["name"]

    def claim_spec(obj: dict[str, Any]) -> bool:
        obj["spec"]["volumeName"] = pv_name
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        annotations.update({"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"})
        return True

    def claim_status(obj: dict[str, Any]) -> bool:
        obj["status"] = {"phase": "Bound", "accessModes": list((pv.get("spec") or {}).get("accessModes") or []),
                         "capacity": dict((pv.get("spec") or {}).get("capacity") or {})}
        return True

    def pv_status(obj: dict[str, Any]) -> bool:
        obj["status"] = {"phase": "Bound"}
        return True

    store.modify(PVCS, name, namespace, claim_spec)
    store.modify(PVCS, name, namespace, claim_status, "status")
    store.modify(PVS, pv_name, None, pv_status, "status")

