"""Per-node volume attachment limits, as far as Karpenter counts them (#31.1).

kubernetes-sigs/karpenter pkg/scheduling/volumeusage.go: a pod's volumes are its claims, each counted against
a CSI driver: the bound PersistentVolume's ``spec.csi.driver``, else (an unbound claim) its StorageClass's
provisioner; the in-tree EBS plugin counts as the EBS CSI driver (its CSI migration). An existing node whose
CSINode reports an allocatable count for a driver takes a pod only while the union of its pods' claims and the
pod's own for that driver stays within the count (ExistingNode.CanAdd). A node without a CSINode (in flight,
or the driver not running yet) and a new node have no known limit, as in Karpenter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model.pod import Pod
from .volumetopology import VolumeObjects, claim_names

EBS_DRIVER = "ebs.csi.aws.com"
# In-tree provisioners whose volumes a CSI driver serves (csi-translation-lib), counted as that driver.
MIGRATED = {"kubernetes.io/aws-ebs": EBS_DRIVER}

PodVolumes = tuple[tuple[str, str], ...]  # (driver, "namespace/claim") per claim the pod uses


def pod_volumes(raw_pod: Mapping[str, Any], objects: VolumeObjects) -> PodVolumes:
    """The pod's claims with the driver each counts against (claims whose driver cannot be told: left out)."""
    namespace = (raw_pod.get("metadata") or {}).get("namespace") or "default"
    found = []
    for name in claim_names(raw_pod):
        claim = objects.claims.get((namespace, name))
        driver = _driver(claim, objects) if claim is not None else None
        if driver:
            found.append((driver, f"{namespace}/{name}"))
    return tuple(sorted(set(found)))


def _driver(claim: Mapping[str, Any], objects: VolumeObjects) -> str | None:
    spec = claim.get("spec") or {}
    if spec.get("volumeName"):
        pv_spec = (objects.volumes.get(spec["volumeName"]) or {}).get("spec") or {}
        if pv_spec.get("awsElasticBlockStore"):
            return EBS_DRIVER
        driver = (pv_spec.get("csi") or {}).get("driver")
    else:
        driver = (objects.classes.get(spec.get("storageClassName") or "") or {}).get("provisioner")
    return MIGRATED.get(str(driver), str(driver)) if driver else None


def csinode_limits(csinodes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Each node's allocatable count per driver, from its CSINode (drivers without a count have no limit)."""
    out: dict[str, dict[str, int]] = {}
    for csinode in csinodes:
        name = (csinode.get("metadata") or {}).get("name")
        limits = {}
        for driver in (csinode.get("spec") or {}).get("drivers") or []:
            count = ((driver or {}).get("allocatable") or {}).get("count")
            if (driver or {}).get("name") and isinstance(count, int) and not isinstance(count, bool):
                limits[str(driver["name"])] = count
        if name and limits:
            out[str(name)] = limits
    return out


class VolumeUsage:
    """A node's limits and the claims its pods use per driver; pods are added as the solve places them."""

    __slots__ = ("limits", "used")

    def __init__(self, limits: Mapping[str, int], pods: Iterable[Pod] = ()) -> None:
        self.limits = limits
        self.used: dict[str, set[str]] = {}
        for pod in pods:
            self.add(pod.volumes)

    def exceeds(self, volumes: PodVolumes) -> bool:
        """Whether adding the pod's claims takes a driver past its count (Karpenter's ExceedsLimits)."""
        wanted: dict[str, set[str]] = {}
        for driver, claim in volumes:
            wanted.setdefault(driver, set()).add(claim)
        return any(driver in self.limits and len(self.used.get(driver, set()) | claims) > self.limits[driver]
                   for driver, claims in wanted.items())

    def add(self, volumes: PodVolumes) -> None:
        for driver, claim in volumes:
            self.used.setdefault(driver, set()).add(claim)

    def take(self, pods: Sequence[Pod]) -> int:
        """How many of ``pods``, in order, the node takes before one would exceed a limit (those are added)."""
        for index, pod in enumerate(pods):
            if self.exceeds(pod.volumes):
                return index
            self.add(pod.volumes)
        return len(pods)
