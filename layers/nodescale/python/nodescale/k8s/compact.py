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
_METADATA_DROPPED = frozenset({"managedFields", "annotations"})  # annotations: kept, less the one below
# `kubectl apply`'s copy of the whole manifest, on pods created from a file.
_ANNOTATIONS_DROPPED = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})

_intern = sys.intern


def compact_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``pod`` without what no decision reads, its strings interned. Not-a-dict parts are kept
    as they are (the model reports malformed pods; this does not judge them)."""
    out: dict[str, Any] = {}
    for key, value in pod.items():
        if key == "metadata" and isinstance(value, dict):
            value = _metadata(value)
        elif key == "spec" and isinstance(value, dict):
            value = {_intern(k): _containers(v) if k in _CONTAINER_LISTS else _shared(v) for k, v in value.items()}
        elif key == "status" and isinstance(value, dict):
            value = _kept(value, _STATUS_DROPPED)
        else:
            value = _shared(value)
        out[_intern(key)] = value
    return out


def _metadata(meta: dict[str, Any]) -> dict[str, Any]:
    out = _kept(meta, _METADATA_DROPPED)
    if "annotations" in meta:
        annotations = meta["annotations"]
        out["annotations"] = _kept(annotations, _ANNOTATIONS_DROPPED) if isinstance(annotations, dict) else annotations
    return out


def _containers(value: Any) -> Any:
    if not isinstance(value, list):
        return _shared(value)
    return [_kept(c, _CONTAINER_DROPPED) if isinstance(c, dict) else _shared(c) for c in value]


def _kept(mapping: dict[str, Any], dropped: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {_intern(k): _shared(v) for k, v in mapping.items() if k not in dropped}


def _shared(value: Any) -> Any:
    if isinstance(value, str):
        return _intern(value)
    if isinstance(value, dict):
        return _kept(value)
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value
