"""The StatefulSet controller: stable pod names and a claim per pod that outlives it.

As upstream's (kubernetes/kubernetes pkg/controller/statefulset), for what nodescale meets:

- The set's pods are named ``<set>-<ordinal>`` for ordinals 0..replicas-1, made from the template with the
  labels ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``, ``hostname`` = the pod's
  name and ``subdomain`` = ``serviceName``.
- Each ``volumeClaimTemplates`` entry gives each pod a PersistentVolumeClaim ``<template>-<set>-<ordinal>``,
  created before the pod (a claim the API refuses leaves the pod uncreated) and mounted as the volume named
  after the template (replacing a template volume of that name). Claims are kept when their pod goes, so a
  recreated pod reuses its claim, and with it its volume and the volume's zone. With
  ``persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`` a claim is owned by the set and goes with it;
  ``whenScaled`` is not modelled (claims are retained on scale-down, the default).
- A deleted or evicted pod is made again once it is gone; a failed or succeeded one is deleted to be made again.
- Scaling down deletes the pods with the highest ordinals.

Only ``podManagementPolicy: Parallel`` is modelled: an ``OrderedReady`` set (the default) is treated the same
way, its pods created and deleted all at once rather than one at a time after the previous one is Ready.
Rolling updates of the template are not modelled either (a changed template applies to pods made afterwards).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError
from .objects import is_true, meta, pod_terminal
from .store import Store
from .workloads import owned_pods, owner_reference, template_hash

STATEFULSETS = "apps/v1/statefulsets"
PVCS = "v1/persistentvolumeclaims"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def claim_name(template_name: str, set_name: str, ordinal: int) -> str:
    return f"{template_name}-{set_name}-{ordinal}"


def _ordinal(set_name: str, pod_name: str) -> int | None:
    prefix = f"{set_name}-"
    suffix = pod_name[len(prefix):] if pod_name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def _claim(sts: dict[str, Any], template: dict[str, Any], ordinal: int) -> dict[str, Any]:
    template_meta = template.get("metadata") or {}
    selector_labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    metadata: dict[str, Any] = {
        "name": claim_name(template_meta.get("name", ""), meta(sts)["name"], ordinal),
        "namespace": meta(sts)["namespace"],
        "labels": {**(template_meta.get("labels") or {}), **selector_labels},
        "annotations": dict(template_meta.get("annotations") or {}),
    }
    policy = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    if policy.get("whenDeleted") == "Delete":
        metadata["ownerReferences"] = [{**owner_reference(sts), "controller": False}]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata,
            "spec": copy.deepcopy(template.get("spec") or {})}


def _ensure_claims(store: Store, sts: dict[str, Any], ordinal: int) -> bool:
    """Create the pod's missing claims; False when one could not be made (the pod waits for it)."""
    for template in (sts.get("spec") or {}).get("volumeClaimTemplates") or []:
        body = _claim(sts, template, ordinal)
        if store.peek(PVCS, body["metadata"]["name"], body["metadata"]["namespace"]) is not None:
            continue
        try:
            store.create(PVCS, body, body["metadata"]["namespace"])
        except ApiError as error:
            if error.status != 409:
                return False
    return True


def _pod(sts: dict[str, Any], ordinal: int) -> dict[str, Any]:
    spec = sts.get("spec") or {}
    set_name = meta(sts)["name"]
    name = f"{set_name}-{ordinal}"
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    claims = {t.get("metadata", {}).get("name", ""): claim_name(t.get("metadata", {}).get("name", ""), set_name, ordinal)
              for t in spec.get("volumeClaimTemplates") or []}
    volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") not in claims]
    volumes += [{"name": volume, "persistentVolumeClaim": {"claimName": claim}} for volume, claim in claims.items()]
    if volumes:
        pod_spec["volumes"] = volumes
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    labels = {**(template_meta.get("labels") or {}), POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
              "controller-revision-hash": f"{set_name}-{template_hash(spec.get('template') or {})}"}
    return {
        "metadata": {"name": name, "namespace": meta(sts)["namespace"], "labels": labels,
                     "annotations": dict(template_meta.get("annotations") or {}),
                     "ownerReferences": [owner_reference(sts)]},
        "spec": pod_spec,
    }


def _delete(store: Store, pod: dict[str, Any]) -> None:
    try:
        store.delete("v1/pods", meta(pod)["name"], meta(pod)["namespace"])
    except ApiError as error:
        if error.status != 404:
            raise


def reconcile_statefulset(store: Store, namespace: str, name: str) -> None:
    sts = store.peek(STATEFULSETS, name, namespace)
    if sts is None or meta(sts).get("deletionTimestamp"):
        return
    replicas = int((sts.get("spec") or {}).get("replicas", 1) or 0)
    pods = {meta(p)["name"]: p for p in owned_pods(store, sts)}
    for ordinal in range(replicas):
        pod = pods.get(f"{name}-{ordinal}")
        if pod is not None:
            if pod_terminal(pod) and not meta(pod).get("deletionTimestamp"):
                _delete(store, pod)  # made again once it is gone
            continue
        if _ensure_claims(store, sts, ordinal):
            try:
                store.create("v1/pods", _pod(sts, ordinal), namespace)
            except ApiError as error:
                if error.status != 409:  # the old pod of that name is still being removed
                    raise
    for pod_name, pod in pods.items():
        ordinal = _ordinal(name, pod_name)
        if (ordinal is None or ordinal >= replicas) and not meta(pod).get("deletionTimestamp"):
            _delete(store, pod)
    _write_status(store, sts)


def _write_status(store: Store, sts: dict[str, Any]) -> None:
    active = [p for p in owned_pods(store, sts) if not meta(p).get("deletionTimestamp") and not pod_terminal(p)]
    ready = sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running" and is_true(p, "Ready"))
    revision = f"{meta(sts)['name']}-{template_hash((sts.get('spec') or {}).get('template') or {})}"
    status = {"observedGeneration": meta(sts).get("generation", 1), "replicas": len(active), "readyReplicas": ready,
              "availableReplicas": ready, "currentReplicas": len(active), "updatedReplicas": len(active),
              "currentRevision": revision, "updateRevision": revision, "collisionCount": 0}

    def change(current: dict[str, Any]) -> bool:
        updated = {**(current.get("status") or {}), **status}
        if updated == current.get("status"):
            return False
        current["status"] = updated
        return True

    store.modify(STATEFULSETS, meta(sts)["name"], meta(sts)["namespace"], change, "status")
