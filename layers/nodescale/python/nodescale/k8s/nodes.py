"""Nodes: cordon, the disruption taint, deletion, readiness, and the EC2 instance behind each node.

Taint and cordon changes are read-modify-write guarded by the node's resourceVersion: another
writer (the kubelet, another function) in between makes the write fail with 409 and it is redone
on the fresh node, so no one's taint is lost.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import clock
from ..disruption.drain_policy import DISRUPTED_TAINT
from ..disruption.nodes import DISRUPTED_TAINT_KEY
from ..model.node import Readiness, parse_provider_id, readiness_of
from ..model.taints import Taint
from .http import ApiClient
from .raw import MERGE_PATCH, path_segment, request_json

CONFLICT_ATTEMPTS = 6


class NodeGoneError(LookupError):
    """The node does not exist (any more)."""


@dataclass(frozen=True)
class NodeChange:
    node: dict[str, Any]
    changed: bool


def node_path(name: str) -> str:
    if not name:
        raise ValueError("a node name is required")
    return f"/api/v1/nodes/{path_segment(name)}"


def get_node(api: ApiClient, name: str) -> dict[str, Any]:
    try:
        return request_json(api, "GET", node_path(name))
    except ApiException as exc:
        if exc.status == 404:
            raise NodeGoneError(f"node {name} not found") from None
        raise


def modify_node(
    api: ApiClient,
    name: str,
    change: Callable[[dict[str, Any]], dict[str, Any] | None],
    attempts: int = CONFLICT_ATTEMPTS,
    current: Mapping[str, Any] | None = None,
) -> NodeChange:
    """Apply `change(node) -> merge patch or None` to the current node, retrying on 409 Conflict.

    The patch carries the resourceVersion that `change` saw, so it only applies to that version. ``current``
    is the node as the caller read it a moment ago: the first attempt starts from it instead of reading the
    node again (a write on a node changed meanwhile is refused with 409 and redone on a fresh read; a change
    it says is done already is checked on a fresh read).
    """
    for attempt in range(attempts):
        fresh = attempt > 0 or current is None
        node = get_node(api, name) if fresh else dict(current or {})
        patch = change(node)
        if not patch and fresh:
            return NodeChange(node, False)
        if not patch:
            continue  # "nothing to do" is only believed of a fresh read: someone may have undone it since
        meta = dict(patch.get("metadata") or {})
        meta["resourceVersion"] = (node.get("metadata") or {}).get("resourceVersion")
        body = {**patch, "metadata": meta}
        try:
            updated = request_json(api, "PATCH", node_path(name), body=body, content_type=MERGE_PATCH)
            return NodeChange(updated, True)
        except ApiException as exc:
            if exc.status == 404:
                raise NodeGoneError(f"node {name} not found") from None
            if exc.status != 409 or attempt == attempts - 1:
                raise
        time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    raise AssertionError("unreachable: the last attempt returns or raises")


def taints_of(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def has_taint(node: Mapping[str, Any], key: str = DISRUPTED_TAINT_KEY, effect: str | None = None) -> bool:
    return any(t.get("key") == key and (effect is None or t.get("effect") == effect) for t in taints_of(node))


def is_cordoned(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _with_taint(taint: Taint, cordon: bool) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        spec: dict[str, Any] = {}
        if not has_taint(node, taint.key, taint.effect):
            spec["taints"] = [*taints_of(node), {**taint.to_dict(), "timeAdded": _now_rfc3339()}]
        if cordon and not is_cordoned(node):
            spec["unschedulable"] = True
        return {"spec": spec} if spec else None

    return change


def add_taint(api: ApiClient, name: str, taint: Taint = DISRUPTED_TAINT, *, cordon: bool = False) -> NodeChange:
    """Add the taint (the disruption taint by default), and optionally cordon in the same write."""
    return modify_node(api, name, _with_taint(taint, cordon))


def mark_disrupted(
    api: ApiClient,
    name: str,
    *,
    annotations: Callable[[Mapping[str, str]], dict[str, str | None]] | None = None,
    current: Mapping[str, Any] | None = None,
) -> NodeChange:
    """Taint `karpenter.sh/disrupted:NoSchedule` and cordon: from then on the node is being drained.

    ``annotations(node's annotations) -> those to set`` go in the same write (one write a node: a wave's
    cordons wait on the API server's writes, #33.3); ``current`` as for :func:`modify_node`."""
    taint_and_cordon = _with_taint(DISRUPTED_TAINT, cordon=True)

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        patch = taint_and_cordon(node) or {}
        extra = annotations(((node.get("metadata") or {}).get("annotations")) or {}) if annotations else {}
        if extra:
            patch["metadata"] = {"annotations": extra}
        return patch or None

    return modify_node(api, name, change, current=current)


def remove_taint(
    api: ApiClient, name: str, key: str = DISRUPTED_TAINT_KEY, effect: str | None = None, *, uncordon: bool = False
) -> NodeChange:
    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        spec: dict[str, Any] = {}
        if has_taint(node, key, effect):
            spec["taints"] = [
                t for t in taints_of(node) if not (t.get("key") == key and (effect is None or t.get("effect") == effect))
            ]
        if uncordon and is_cordoned(node):
            spec["unschedulable"] = None
        return {"spec": spec} if spec else None

    return modify_node(api, name, change)


def register(
    api: ApiClient,
    name: str,
    labels: Mapping[str, str],
    taints: tuple[Taint, ...],
    remove: Taint,
    annotations: Mapping[str, str] | None = None,
    finalizer: str | None = None,
) -> NodeChange:
    """Karpenter's registration sync in one write: ``labels`` merged, each of ``taints`` (key and effect)
    added when missing, and ``remove`` (key and effect) taken away, so the node is never without its labels
    while the taint that keeps pods off is gone; ``finalizer`` added when missing. Guarded by the
    resourceVersion (taints and finalizers are lists, which a merge patch replaces whole)."""

    def change(node: dict[str, Any]) -> dict[str, Any] | None:
        current = taints_of(node)
        present = {(t.get("key"), t.get("effect")) for t in current}
        added = [{**t.to_dict(), "timeAdded": _now_rfc3339()} for t in taints if (t.key, t.effect) not in present]
        kept = [t for t in current if not (t.get("key") == remove.key and t.get("effect") == remove.effect)]
        patch: dict[str, Any] = {"metadata": {"labels": dict(labels)}}
        if annotations:
            patch["metadata"]["annotations"] = dict(annotations)
        finalizers = list((node.get("metadata") or {}).get("finalizers") or [])
        if finalizer and finalizer not in finalizers:
            patch["metadata"]["finalizers"] = [*finalizers, finalizer]
        if added or len(kept) != len(current):
            patch["spec"] = {"taints": [*kept, *added]}
        return patch

    return modify_node(api, name, change)


def cordon(api: ApiClient, name: str) -> NodeChange:
    return modify_node(api, name, lambda n: None if is_cordoned(n) else {"spec": {"unschedulable": True}})


def uncordon(api: ApiClient, name: str) -> NodeChange:
    return modify_node(api, name, lambda n: {"spec": {"unschedulable": None}} if is_cordoned(n) else None)


def patch_metadata(
    api: ApiClient,
    name: str,
    *,
    labels: Mapping[str, str | None] | None = None,
    annotations: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Merge labels/annotations into the node; a None value removes that key."""
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if not meta:
        return get_node(api, name)
    try:
        return request_json(api, "PATCH", node_path(name), body={"metadata": meta}, content_type=MERGE_PATCH)
    except ApiException as exc:
        if exc.status == 404:
            raise NodeGoneError(f"node {name} not found") from None
        raise


def delete_node(api: ApiClient, name: str) -> bool:
    """Delete the Node object; False when it was already gone."""
    try:
        request_json(api, "DELETE", node_path(name))
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def provider_id(zone: str, instance_id: str) -> str:
    return f"aws:///{zone}/{instance_id}"


def readiness(node: Mapping[str, Any]) -> Readiness:
    return readiness_of(node)


def instance_id(node: Mapping[str, Any]) -> str | None:
    parsed = parse_provider_id((node.get("spec") or {}).get("providerID") or "")
    return parsed[1] if parsed else None


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _now_rfc3339() -> str:
    return clock.format_timestamp(clock.now())
