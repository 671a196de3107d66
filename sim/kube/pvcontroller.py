"""kube-controller-manager's PersistentVolume controller, as far as sim needs it (#31.2).

As upstream (kubernetes/kubernetes pkg/controller/volume/persistentvolume, pv_controller.go):

- syncVolume: a volume with no ``spec.claimRef`` is ``Available``.
- syncUnboundClaim, "the user asked for a specific PV" (static binding): a claim whose ``spec.volumeName``
  names an existing volume that is unbound (or pre-bound to this claim by ``claimRef``) and satisfies it (same
  StorageClass, enough capacity, the access modes it asks, the same volume mode) is bound: the volume gets the
  claim as ``claimRef`` (``pv.kubernetes.io/bound-by-controller`` when the controller set it) and phase
  ``Bound``; the claim gets ``pv.kubernetes.io/bind-completed: "yes"``, phase ``Bound``, and the volume's
  capacity and access modes in its status. A claim whose volume is missing, bound to another claim or does not
  satisfy it stays ``Pending``.
- syncBoundClaim: a claim marked bind-completed whose volume has no ``claimRef`` yet gets the volume bound to it.

Not modelled: matching an unbound claim without ``volumeName`` to any Available volume (sim provisions
WaitForFirstConsumer claims itself, see ``volumebinding``), ``Lost`` claims, reclaiming Released volumes, and
the events upstream records on a mismatch.
"""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .objects import meta
from .quantity import QuantityError, milli
from .store import Store

PVCS = "v1/persistentvolumeclaims"
PVS = "v1/persistentvolumes"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


def sync_volume(store: Store, name: str) -> None:
    """An unbound volume becomes Available; the claim it names, or that names it, is synced too."""
    pv = store.peek(PVS, name)
    if pv is None:
        return
    ref = (pv.get("spec") or {}).get("claimRef")
    if ref:
        # Pre-bound (or provisioned) for a claim: that claim may have been waiting for it.
        sync_claim(store, ref.get("namespace") or "", ref.get("name") or "")
        return
    if (pv.get("status") or {}).get("phase") == "Pending":
        _set_phase(store, PVS, name, None, "Available")
    for claim in store.snapshot(PVCS):
        if (claim.get("spec") or {}).get("volumeName") == name:
            sync_claim(store, meta(claim)["namespace"], meta(claim)["name"])


def sync_claim(store: Store, namespace: str, name: str) -> None:
    """Bind a claim to the volume its ``spec.volumeName`` names, when that volume may serve it."""
    claim = store.peek(PVCS, name, namespace)
    if claim is None or meta(claim).get("deletionTimestamp"):
        return
    volume_name = (claim.get("spec") or {}).get("volumeName")
    pv = store.peek(PVS, volume_name) if volume_name else None
    if pv is None:
        return
    completed = (meta(claim).get("annotations") or {}).get(BIND_COMPLETED)
    ref = (pv.get("spec") or {}).get("claimRef")
    if ref:
        if not _refers_to(ref, claim):
            return
        if completed and (pv.get("status") or {}).get("phase") == "Bound" and _claim_bound(claim):
            return
    elif not completed and not satisfies(pv, claim):
        return
    _bind(store, pv, claim)


def satisfies(pv: dict[str, Any], claim: dict[str, Any]) -> bool:
    """checkVolumeSatisfyClaim: class, capacity, access modes and volume mode."""
    pv_spec, spec = pv.get("spec") or {}, claim.get("spec") or {}
    if (pv_spec.get("storageClassName") or "") != (spec.get("storageClassName") or ""):
        return False
    if not set(spec.get("accessModes") or ()) <= set(pv_spec.get("accessModes") or ()):
        return False
    if (pv_spec.get("volumeMode") or "Filesystem") != (spec.get("volumeMode") or "Filesystem"):
        return False
    try:
        wanted = milli(((spec.get("resources") or {}).get("requests") or {}).get("storage") or "0")
        offered = milli((pv_spec.get("capacity") or {}).get("storage") or "0")
    except QuantityError:
        return False
    return offered >= wanted


def _refers_to(ref: dict[str, Any], claim: dict[str, Any]) -> bool:
    """IsVolumeBoundToClaim: the reference names the claim (and, when it has one, its uid)."""
    m = meta(claim)
    return (ref.get("name"), ref.get("namespace")) == (m["name"], m["namespace"]) and (
        not ref.get("uid") or ref["uid"] == m.get("uid")
    )


def _claim_bound(claim: dict[str, Any]) -> bool:
    return (claim.get("status") or {}).get("phase") == "Bound"


def _bind(store: Store, pv: dict[str, Any], claim: dict[str, Any]) -> None:
    """bindVolumeToClaim, then bindClaimToVolume, each with its status; a write that fails is retried on the
    next event for either object (as upstream's resync does)."""
    m, pv_name = meta(claim), meta(pv)["name"]
    ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": m["namespace"], "name": m["name"],
           "uid": m.get("uid", ""), "resourceVersion": m.get("resourceVersion", "")}

    def volume_spec(obj: dict[str, Any]) -> bool:
        spec = obj.setdefault("spec", {})
        current = spec.get("claimRef")
        if current and current.get("uid") == ref["uid"]:
            return False
        if not current:
            obj.setdefault("metadata", {}).setdefault("annotations", {})[BOUND_BY_CONTROLLER] = "yes"
        spec["claimRef"] = ref
        return True

    def claim_spec(obj: dict[str, Any]) -> bool:
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        if annotations.get(BIND_COMPLETED) == "yes":
            return False
        annotations[BIND_COMPLETED] = "yes"
        return True

    def claim_status(obj: dict[str, Any]) -> bool:
        pv_spec = pv.get("spec") or {}
        obj["status"] = {"phase": "Bound", "accessModes": list(pv_spec.get("accessModes") or []),
                         "capacity": dict(pv_spec.get("capacity") or {})}
        return True

    try:
        store.modify(PVS, pv_name, None, volume_spec)
        _set_phase(store, PVS, pv_name, None, "Bound")
        store.modify(PVCS, m["name"], m["namespace"], claim_spec)
        store.modify(PVCS, m["name"], m["namespace"], claim_status, "status")
    except ApiError:
        return


def _set_phase(store: Store, resource: str, name: str, namespace: str | None, phase: str) -> None:
    def change(obj: dict[str, Any]) -> bool:
        status = obj.setdefault("status", {})
        if status.get("phase") == phase:
            return False
        status["phase"] = phase
        return True

    store.modify(resource, name, namespace, change, "status")
