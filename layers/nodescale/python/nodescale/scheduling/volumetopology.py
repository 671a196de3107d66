"""Where a pod's persistent volumes let it run, as Karpenter's volume topology reads it (#31.1).

kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/volumetopology.go: a claim bound to a
PersistentVolume adds the first term of the volume's required node affinity (a local or hostPath volume's
hostname left out: a new node never has the old one's name); an unbound claim adds the first term of its
StorageClass's ``allowedTopologies``. The keys go through the label aliases, so the EBS CSI driver's
``topology.ebs.csi.aws.com/zone`` is ``topology.kubernetes.io/zone`` (as karpenter-provider-aws makes it).

A pending pod whose claims cannot be honoured (missing, being deleted, lost, bound without the PV
controller's bind-completed mark, unbound with no or an Immediate StorageClass) is not planned for, with
the reason; Karpenter's ValidatePersistentVolumeClaims refuses the same pods. A bound pod (one a
disruption simulates moving) keeps whatever its volumes still say and is never refused here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import labels as wk
from ..model.requirements import CORE_OPERATORS, RequirementError, Requirements

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_VOLUME_REQUIREMENTS = Requirements()


class VolumeTopologyError(ValueError):
    """Why a pod's claims keep it from being planned for."""


@dataclass(frozen=True)
class VolumeObjects:
    """The cluster's claims ((namespace, name) -> object), PersistentVolumes and StorageClasses by name, and each
    node's volume attachment limits from its CSINode (node -> driver -> allocatable count)."""

    claims: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    volumes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def claim_names(raw_pod: Mapping[str, Any]) -> list[str]:
    """The claims the pod's volumes name: each persistentVolumeClaim's, and ``<pod>-<volume>`` for a
    generic ephemeral volume (the name its controller gives the claim). A bound pod's ephemeral claims are
    left out: it gets a new claim wherever it moves, so the old one's zone does not hold it."""
    spec = raw_pod.get("spec") or {}
    pod_name = (raw_pod.get("metadata") or {}).get("name") or ""
    names = []
    for volume in spec.get("volumes") or []:
        claim = (volume or {}).get("persistentVolumeClaim")
        if claim:
            names.append(str(claim.get("claimName") or ""))
        elif (volume or {}).get("ephemeral") and not spec.get("nodeName"):
            names.append(f"{pod_name}-{volume.get('name')}")
    return names


def pods_use_claims(raw_pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any pod names a claim: a cluster without one needs no volume objects read."""
    return any(claim_names(raw) for raw in raw_pods)


def volume_requirements(raw_pod: Mapping[str, Any], objects: VolumeObjects) -> Requirements:
    """The node requirements the pod's claims add to its own (empty when they add none).

    Raises VolumeTopologyError for a pending pod whose claims cannot be honoured; for a bound pod, only
    when a volume's node affinity cannot be read (the caller keeps the pod, without the requirements)."""
    meta = raw_pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    pending = not (raw_pod.get("spec") or {}).get("nodeName")
    reqs = NO_VOLUME_REQUIREMENTS
    for name in claim_names(raw_pod):
        claim = objects.claims.get((namespace, name))
        if claim is None:
            if pending:
                raise VolumeTopologyError(f"persistentvolumeclaim {namespace}/{name} not found")
            continue
        if pending:
            _validate(claim, f"{namespace}/{name}", objects)
        extra = _claim_requirements(claim, objects)
        if extra:
            reqs = reqs.intersect(extra)
    return reqs


def _validate(claim: Mapping[str, Any], ref: str, objects: VolumeObjects) -> None:
    """Karpenter's refusals of a pending pod's claim (the cases kube-scheduler's VolumeBinding refuses)."""
    meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    if meta.get("deletionTimestamp"):
        raise VolumeTopologyError(f"persistentvolumeclaim {ref} is being deleted")
    if (claim.get("status") or {}).get("phase") == "Lost":
        raise VolumeTopologyError(f"persistentvolumeclaim {ref} is bound to a persistentvolume that no longer exists")
    volume_name, class_name = spec.get("volumeName"), spec.get("storageClassName")
    if volume_name:
        volume = objects.volumes.get(volume_name)
        if volume is None:
            raise VolumeTopologyError(f"persistentvolumeclaim {ref}: persistentvolume {volume_name} not found")
        if (volume.get("metadata") or {}).get("deletionTimestamp"):
            raise VolumeTopologyError(f"persistentvolumeclaim {ref}: persistentvolume {volume_name} is being deleted")
        if BIND_COMPLETED not in (meta.get("annotations") or {}):
            raise VolumeTopologyError(f"persistentvolumeclaim {ref} names persistentvolume {volume_name} but is not "
                                      f"bound yet (no {BIND_COMPLETED} annotation)")
        return
    if not class_name:
        raise VolumeTopologyError(f"persistentvolumeclaim {ref} is unbound and names no storageClassName")
    storage_class = objects.classes.get(class_name)
    if storage_class is None:
        raise VolumeTopologyError(f"persistentvolumeclaim {ref}: storageclass {class_name} not found")
    if (storage_class.get("volumeBindingMode") or "Immediate") != WAIT_FOR_FIRST_CONSUMER:
        raise VolumeTopologyError(f"persistentvolumeclaim {ref} is unbound and storageclass {class_name} binds "
                                  "Immediate: it must be bound before the pod can be placed")


def _claim_requirements(claim: Mapping[str, Any], objects: VolumeObjects) -> Requirements | None:
    spec = claim.get("spec") or {}
    if spec.get("volumeName"):
        volume = objects.volumes.get(spec["volumeName"])
        return None if volume is None else _volume_requirements(volume)
    storage_class = objects.classes.get(spec.get("storageClassName") or "")
    return None if storage_class is None else _class_requirements(storage_class)


def _volume_requirements(volume: Mapping[str, Any]) -> Requirements | None:
    """The first of the PV's required node selector terms (terms are OR'd: Karpenter keeps the first)."""
    spec = volume.get("spec") or {}
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    if not terms:
        return None
    exprs = list((terms[0] or {}).get("matchExpressions") or [])
    if spec.get("local") or spec.get("hostPath"):
        exprs = [e for e in exprs if (e or {}).get("key") != wk.HOSTNAME]
    name = (volume.get("metadata") or {}).get("name")
    where = f"persistentvolume {name} spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions"
    try:
        return Requirements.from_node_selector_requirements(exprs, where, CORE_OPERATORS)
    except RequirementError as exc:
        raise VolumeTopologyError(str(exc)) from None


def _class_requirements(storage_class: Mapping[str, Any]) -> Requirements | None:
    """The first allowedTopologies term of the StorageClass, each expression an In."""
    terms = storage_class.get("allowedTopologies") or []
    if not terms:
        return None
    exprs = [{"key": (e or {}).get("key"), "operator": "In", "values": (e or {}).get("values") or []}
             for e in (terms[0] or {}).get("matchLabelExpressions") or []]
    name = (storage_class.get("metadata") or {}).get("name")
    try:
        return Requirements.from_node_selector_requirements(exprs, f"storageclass {name} allowedTopologies[0]")
    except RequirementError as exc:
        raise VolumeTopologyError(str(exc)) from None
