"""What kubelets and the garbage collector would do to pods and owned objects.

Pods bound to a Ready node start Running; pods on a node that goes NotReady turn unready;
graceful deletions finish when their grace period is over; objects whose owners are gone are
deleted (background propagation) and foreground deletions finish once their dependents are gone.
"""

from __future__ import annotations

import itertools
from typing import Any

from .errors import ApiError
from .objects import is_true, meta, node_ready, set_condition
from .store import Store

_pod_ips = itertools.count(1)


def _next_pod_ip() -> str:
    number = next(_pod_ips)
    return f"10.244.{(number // 250) % 250}.{number % 250 + 2}"


def _host_ip(node: dict[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return address.get("address", "")
    return ""


def start_pod(store: Store, namespace: str, name: str) -> bool:
    """Pending -> Running with every readiness condition True, if its node is Ready."""
    pod = store.peek("v1/pods", name, namespace)
    if pod is None:
        return False
    node_name = (pod.get("spec") or {}).get("nodeName")
    node = store.peek("v1/nodes", node_name) if node_name else None
    if node is None or not node_ready(node):
        return False
    now = store.clock.timestamp()
    host_ip = _host_ip(node)
    host_network = bool((pod.get("spec") or {}).get("hostNetwork"))

    def change(obj: dict[str, Any]) -> bool:
        status = obj.setdefault("status", {})
        if status.get("phase") != "Pending" or meta(obj).get("deletionTimestamp"):
            return False
        status["phase"] = "Running"
        status["startTime"] = status.get("startTime") or now
        status["hostIP"] = host_ip
        status["hostIPs"] = [{"ip": host_ip}] if host_ip else []
        pod_ip = host_ip if host_network else _next_pod_ip()
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
        for cond_type in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            set_condition(obj, {"type": cond_type, "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
        status["containerStatuses"] = [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in (obj.get("spec") or {}).get("containers") or []
        ]
        return True

    return store.modify("v1/pods", name, namespace, change, "status") is not None


def finish_pod(store: Store, namespace: str, name: str) -> None:
    """A run-to-completion pod exits 0: phase Succeeded, not ready."""
    now = store.clock.timestamp()

    def change(obj: dict[str, Any]) -> bool:
        status = obj.setdefault("status", {})
        if status.get("phase") != "Running":
            return False
        status["phase"] = "Succeeded"
        for cond_type in ("Ready", "ContainersReady"):
            set_condition(obj, {"type": cond_type, "status": "False", "reason": "PodCompleted",
                                "lastProbeTime": None, "lastTransitionTime": now})
        for container in status.get("containerStatuses") or []:
            started = (container.get("state") or {}).get("running", {}).get("startedAt", now)
            container["ready"] = False
            container["started"] = False
            container["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started,
                                                 "finishedAt": now}}
        return True

    store.modify("v1/pods", name, namespace, change, "status")


def set_pods_ready(store: Store, node_name: str, ready: bool) -> None:
    """Follow the node's readiness on its running pods' Ready conditions."""
    now = store.clock.timestamp()
    value = "True" if ready else "False"

    def change(obj: dict[str, Any]) -> bool:
        if (obj.get("status") or {}).get("phase") != "Running" or is_true(obj, "Ready") == ready:
            return False
        for cond_type in ("Ready", "ContainersReady"):
            cond = {"type": cond_type, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
            if not ready:
                cond["reason"] = "NodeNotReady"
            set_condition(obj, cond)
        return True

    for pod in store.pods_on_node(node_name):
        store.modify("v1/pods", meta(pod)["name"], meta(pod)["namespace"], change, "status")


def finish_deletion(store: Store, namespace: str, name: str, uid: str) -> None:
    """The kubelet confirms a graceful pod deletion (grace period over): remove it now."""
    pod = store.peek("v1/pods", name, namespace)
    if pod is None or meta(pod).get("uid") != uid or not meta(pod).get("deletionTimestamp"):
        return
    try:
        store.delete("v1/pods", name, namespace, grace_period_seconds=0)
    except ApiError as error:
        if error.status != 404:
            raise


def delete_pods_on_node(store: Store, node_name: str) -> None:
    """Pods of a node that no longer exists are force-deleted, as the pod garbage collector does."""
    for pod in store.pods_on_node(node_name):
        try:
            store.delete("v1/pods", meta(pod)["name"], meta(pod)["namespace"], grace_period_seconds=0)
        except ApiError as error:
            if error.status != 404:
                raise


def _owner_alive(store: Store, namespace: str, ref: dict[str, Any]) -> bool:
    rt = store.registry.for_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
    if rt is None:
        return False
    owner = store.peek(rt.key, ref.get("name", ""), namespace if rt.namespaced else None)
    return owner is not None and meta(owner).get("uid") == ref.get("uid")


def collect_dependents(store: Store, owner: dict[str, Any]) -> None:
    """Background garbage collection after `owner` is gone: delete what only it owned."""
    uid = meta(owner).get("uid", "")
    for resource, namespace, name in store.dependents(uid):
        dependent = store.peek(resource, name, namespace or None)
        if dependent is None:
            continue
        others = [r for r in meta(dependent).get("ownerReferences") or [] if r.get("uid") != uid]
        try:
            if any(_owner_alive(store, namespace, ref) for ref in others):
                store.modify(resource, name, namespace or None, lambda obj, keep=others: _set_owners(obj, keep))
            else:
                store.delete(resource, name, namespace or None, propagation_policy="Background")
        except ApiError as error:
            if error.status != 404:
                raise


def _set_owners(obj: dict[str, Any], owners: list[dict[str, Any]]) -> None:
    obj["metadata"]["ownerReferences"] = owners


def advance_foreground(store: Store, resource: str, namespace: str, name: str) -> None:
    """Foreground deletion: delete the dependents, and drop the finalizer once none is left."""
    owner = store.peek(resource, name, namespace or None)
    if owner is None or "foregroundDeletion" not in (meta(owner).get("finalizers") or []):
        return
    uid = meta(owner)["uid"]
    remaining = store.dependents(uid)
    for dep_resource, dep_namespace, dep_name in remaining:
        dependent = store.peek(dep_resource, dep_name, dep_namespace or None)
        if dependent is not None and not meta(dependent).get("deletionTimestamp"):
            try:
                store.delete(dep_resource, dep_name, dep_namespace or None, propagation_policy="Foreground")
            except ApiError as error:
                if error.status != 404:
                    raise
    if not store.dependents(uid):
        store.modify(resource, name, namespace or None, _drop_foreground_finalizer)


def _drop_foreground_finalizer(obj: dict[str, Any]) -> None:
    obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != "foregroundDeletion"]


def owner_keys(store: Store, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(resource, namespace, name) of the objects `obj` names as owners."""
    keys = []
    namespace = meta(obj).get("namespace", "")
    for ref in meta(obj).get("ownerReferences") or []:
        rt = store.registry.for_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if rt is not None:
            keys.append((rt.key, namespace if rt.namespaced else "", ref.get("name", "")))
    return keys
