"""Pods as the functions keep them: without the parts no decision reads, their strings shared.

A listed pod costs about four times its JSON in Python objects, and a warm container keeps every pod of
the cluster (``podcache``). Most of a real pod's bytes are what the kubelet and the field managers
write (``managedFields``, container statuses, pod IPs) or what only the container runtime uses (image,
command, environment, probes, mounts): nothing here reads them, so they are dropped on arrival. What is
left repeats across the pods of one template (label keys and values, tolerations, quantities, node and
namespace names, timestamps), and ``json`` makes a new string for every occurrence, so each string is
interned: equal strings become one object, freed with the last pod that holds it.

What is kept is everything ``model.pod.Pod``, the drain and the disruption rules read; a test holds
that the typed pod is the same before and after.
"""

from __future__ import annotations

import sys
from typing import Any

# Read by the kubelet and the container runtime only; the functions read a container's name, resources,
# ports and restartPolicy (a sidecar's "Always").
_CONTAINER_DROPPED = frozenset({
    "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe",
    "readinessProbe", "securityContext", "startupProbe", "stdin", "stdinOnce", "terminationMessagePath",
    "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir",
})
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
# Written by the kubelet for people and the runtime; phase, conditions and startTime are read.
_STATUS_DROPPED = frozenset({
    "containerStatuses", "ephemeralContainerStatuses", "hostIPs", "initContainerStatuses", "podIPs",
    "resourceClaimStatuses",
})
_METADATA_DROPPED = frozenset({"managedFields"})
# `kubectl apply`'s copy of the whole manifest, on pods created from a file.
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_intern = sys.intern


def compact_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``pod`` without what no decision reads, its strings interned. Not-a-dict parts are kept
    as they are (the model reports malformed pods; this does not judge them)."""
    out: dict[str, Any] = {}
    for key, value in pod.items():
        if key == "metadata" and isinstance(value, dict):
            value = _metadata(value)
        elif key == "spec" and isinstance(value, dict):
            value = _spec(value)
        elif key == "status" and isinstance(value, dict):
            value = {_intern(k): _shared(v) for k, v in value.items() if k not in _STATUS_DROPPED}
        else:
            value = _shared(value)
        out[_intern(key)] = value
    return out


def _metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out = {_intern(k): _shared(v) for k, v in meta.items() if k not in _METADATA_DROPPED and k != "annotations"}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        out["annotations"] = {_intern(k): _shared(v) for k, v in annotations.items() if k != _LAST_APPLIED}
    elif "annotations" in meta:
        out["annotations"] = annotations
    return out


def _spec(spec: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key in _CONTAINER_LISTS and isinstance(value, list):
            value = [_container(c) if isinstance(c, dict) else c for c in value]
        else:
            value = _shared(value)
        out[_intern(key)] = value
    return out


def _container(container: dict[str, Any]) -> dict[str, Any]:
    return {_intern(k): _shared(v) for k, v in container.items() if k not in _CONTAINER_DROPPED}


def _shared(value: Any) -> Any:
    if isinstance(value, str):
        return _intern(value)
    if isinstance(value, dict):
        return {_intern(k): _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value
