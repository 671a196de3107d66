"""Listing pods, nodes, PDBs and DaemonSets as plain dicts, paginated, with selectors.

Also the provisioner's definition of a pod it should find capacity for.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from ..model.pod import DEFAULT_SCHEDULER
from .compact import compact_pod
from .http import ApiClient
from .raw import path_segment, request_json

PAGE_SIZE = 500
# A continue token can expire mid-list (410); the list then starts over, a bounded number of times.
MAX_LIST_RESTARTS = 3
# Server-side narrowing for the provisioner: unbound pods still pending.
PENDING_FIELD_SELECTOR = "spec.nodeName=,status.phase=Pending"


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str


def collection_path(group: str, version: str, plural: str, namespace: str | None = None) -> str:
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    if namespace:
        return f"{base}/namespaces/{path_segment(namespace)}/{plural}"
    return f"{base}/{plural}"


def list_objects(
    api: ApiClient,
    path: str,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int = PAGE_SIZE,
    timeout: float | tuple[float, float] | None = None,
    resource_version: str | None = None,
    resource_version_match: str | None = None,
    item: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> ListResult:
    """Every object of a collection, page by page; the resourceVersion is the one a watch starts from.
    ``item`` (if given) makes each listed object what is kept, page by page, so a page's parse is let go.

    ``resource_version``/``resource_version_match`` apply to the first page, with kube-apiserver's
    meaning: unset reads the most recent state (a quorum read), "0" any state (the watch cache's),
    ("V", "NotOlderThan") a state at least as new as V (the watch cache's, once it has caught up).
    Later pages follow the continue token, which carries the first page's version.
    """
    for _ in range(MAX_LIST_RESTARTS):
        items: list[dict[str, Any]] = []
        token: str | None = None
        listed_version = ""
        try:
            while True:
                query = {
                    "labelSelector": label_selector,
                    "fieldSelector": field_selector,
                    "limit": limit,
                    "continue": token,
                    "resourceVersion": None if token else resource_version,
                    "resourceVersionMatch": None if token else resource_version_match,
                }
                page = request_json(api, "GET", path, query, timeout=timeout)
                listed = page.get("items") or []
                items.extend(map(item, listed) if item else listed)
                meta = page.get("metadata") or {}
                if not listed_version:
                    # The first page's version is the snapshot every later page belongs to.
                    listed_version = str(meta.get("resourceVersion") or "")
                token = meta.get("continue") or None
                if not token:
                    return ListResult(items, listed_version)
        except ApiException as exc:
            if exc.status != 410:
                raise
    raise ApiException(status=410, reason=f"list of {path} kept expiring after {MAX_LIST_RESTARTS} restarts")


def list_pods(
    api: ApiClient,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int = PAGE_SIZE,
    resource_version: str | None = None,
    resource_version_match: str | None = None,
) -> ListResult:
    return list_objects(
        api, collection_path("", "v1", "pods", namespace),
        label_selector=label_selector, field_selector=field_selector, limit=limit,
        resource_version=resource_version, resource_version_match=resource_version_match, item=compact_pod,
    )


def list_nodes(
    api: ApiClient, *, label_selector: str | None = None, field_selector: str | None = None, limit: int = PAGE_SIZE
) -> ListResult:
    return list_objects(
        api, collection_path("", "v1", "nodes"), label_selector=label_selector, field_selector=field_selector, limit=limit
    )


def list_pdbs(api: ApiClient, namespace: str | None = None, *, label_selector: str | None = None) -> ListResult:
    return list_objects(
        api, collection_path("policy", "v1", "poddisruptionbudgets", namespace), label_selector=label_selector
    )


def list_daemonsets(api: ApiClient, namespace: str | None = None, *, label_selector: str | None = None) -> ListResult:
    return list_objects(api, collection_path("apps", "v1", "daemonsets", namespace), label_selector=label_selector)


def pods_on_node(api: ApiClient, node_name: str) -> list[dict[str, Any]]:
    """Every pod bound to the node, in every namespace (terminated ones included)."""
    if not node_name:
        raise ValueError("pods_on_node: the node name is empty (that would select every unbound pod)")
    return list_pods(api, field_selector=f"spec.nodeName={node_name}").items


def group_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Bound pods by node name; unbound ones are left out."""
    out: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            out[node].append(pod)
    return dict(out)


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """A pod the default scheduler gave up on and nothing else is about to place.

    PodScheduled=False with reason Unschedulable, not nominated, not bound, not terminating, not a
    DaemonSet's (those follow nodes, they never justify one), and scheduled by the default scheduler.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or status.get("nominatedNodeName") or meta.get("deletionTimestamp"):
        return False
    if status.get("phase") not in (None, "", "Pending"):
        return False
    if (spec.get("schedulerName") or DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
        return False
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in status.get("conditions") or []
    )


def provisionable_pods(api: ApiClient, namespace: str | None = None) -> ListResult:
    """The pods the provisioner must find capacity for, and the list's resourceVersion."""
    result = list_pods(api, namespace, field_selector=PENDING_FIELD_SELECTOR)
    return ListResult([p for p in result.items if is_provisionable(p)], result.resource_version)

