"""Small helpers over plain-dict Kubernetes objects."""

from __future__ import annotations

import json
import re
from typing import Any

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def name_of(obj: dict[str, Any]) -> str:
    return meta(obj).get("name", "")


def namespace_of(obj: dict[str, Any]) -> str:
    return meta(obj).get("namespace", "")


def clone(obj: Any) -> Any:
    """A deep copy; JSON round trips are the fastest deep copy for plain JSON data."""
    return json.loads(json.dumps(obj))


def valid_name(name: str) -> str | None:
    """Why `name` is not a valid object name (RFC 1123 subdomain), or None."""
    if len(name) > 253:
        return "must be no more than 253 characters"
    if not _DNS_SUBDOMAIN.match(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def valid_path_segment_name(name: str) -> str | None:
    """Why `name` is not a valid RBAC object name (a path segment: `system:discovery` is fine), or None."""
    if name in (".", ".."):
        return f"may not be '{name}'"
    for bad in ("/", "%"):
        if bad in name:
            return f"may not contain '{bad}'"
    return None


def condition(obj: dict[str, Any], cond_type: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond
    return None


def is_true(obj: dict[str, Any], cond_type: str) -> bool:
    cond = condition(obj, cond_type)
    return bool(cond) and cond.get("status") == "True"


def set_condition(obj: dict[str, Any], cond: dict[str, Any]) -> bool:
    """Insert or update a condition by type; returns True when anything but timestamps changed."""
    status = obj.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    for index, existing in enumerate(conditions):
        if existing.get("type") == cond["type"]:
            same = all(existing.get(k) == v for k, v in cond.items() if not k.endswith("Time"))
            if same:
                return False
            merged = dict(cond)
            if existing.get("status") == cond.get("status") and "lastTransitionTime" in existing:
                merged["lastTransitionTime"] = existing["lastTransitionTime"]
            conditions[index] = merged
            return True
    conditions.append(dict(cond))
    return True


def node_ready(node: dict[str, Any]) -> bool:
    return is_true(node, "Ready")


def pod_healthy(pod: dict[str, Any]) -> bool:
    """Healthy as PodDisruptionBudgets count it: running, Ready and not being deleted."""
    return (
        not meta(pod).get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
        and is_true(pod, "Ready")
    )


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def pod_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
