"""Workload controllers: Deployment -> ReplicaSet -> Pods, DaemonSet pods per node, Job pods.

Each reconcile function reads the current state from the store and writes only what differs,
so calling it again is harmless; the controller loop calls them whenever something they own
changes.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .errors import ApiError
from .objects import is_true, meta, pod_terminal, set_condition
from .placement import matches_node_selection, tolerates
from .store import Store

DAEMON_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
RUN_SECONDS_ANNOTATION = "sim.nodescale.io/run-seconds"


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta(owner)["name"],
        "uid": meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_pods(store: Store, owner: dict[str, Any]) -> list[dict[str, Any]]:
    uid = meta(owner)["uid"]
    pods = []
    for resource, namespace, name in store.dependents(uid):
        if resource != "v1/pods":
            continue
        pod = store.peek("v1/pods", name, namespace)
        if pod is not None and any(
            r.get("uid") == uid and r.get("controller") for r in meta(pod).get("ownerReferences") or []
        ):
            pods.append(pod)
    return pods


def _active(pod: dict[str, Any]) -> bool:
    return not meta(pod).get("deletionTimestamp") and not pod_terminal(pod)


def _ready(pod: dict[str, Any]) -> bool:
    return _active(pod) and (pod.get("status") or {}).get("phase") == "Running" and is_true(pod, "Ready")


def _pod_from_template(owner: dict[str, Any], prefix: str, extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    labels = dict(template_meta.get("labels") or {})
    labels.update(extra_labels or {})
    return {
        "metadata": {
            "generateName": prefix,
            "namespace": meta(owner)["namespace"],
            "labels": labels,
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": template.get("spec") or {},
    }


def _write_status(store: Store, resource: str, obj: dict[str, Any], status: dict[str, Any]) -> None:
    def change(current: dict[str, Any]) -> bool:
        existing = current.setdefault("status", {})
        updated = {**existing, **status}
        if updated == existing:
            return False
        current["status"] = updated
        return True

    store.modify(resource, meta(obj)["name"], meta(obj)["namespace"], change, "status")


def _delete_quietly(store: Store, namespace: str, name: str, grace: int | None = None) -> None:
    try:
        store.delete("v1/pods", name, namespace, grace_period_seconds=grace)
    except ApiError as error:
        if error.status != 404:
            raise


def _removal_order(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods to remove first: unscheduled, then pending, then not ready, then the newest."""

    def stage(pod: dict[str, Any]) -> int:
        if not (pod.get("spec") or {}).get("nodeName"):
            return 0
        if (pod.get("status") or {}).get("phase") == "Pending":
            return 1
        return 2 if not _ready(pod) else 3

    newest_first = sorted(pods, key=lambda p: (meta(p).get("creationTimestamp", ""), meta(p)["name"]), reverse=True)
    return sorted(newest_first, key=stage)


def reconcile_replicaset(store: Store, namespace: str, name: str) -> None:
    rs = store.peek("apps/v1/replicasets", name, namespace)
    if rs is None or meta(rs).get("deletionTimestamp"):
        return
    pods = owned_pods(store, rs)
    active = [p for p in pods if _active(p)]
    wanted = int((rs.get("spec") or {}).get("replicas", 1) or 0)
    if len(active) < wanted:
        for _ in range(wanted - len(active)):
            store.create("v1/pods", _pod_from_template(rs, f"{name}-"), namespace)
    elif len(active) > wanted:
        for pod in _removal_order(active)[: len(active) - wanted]:
            _delete_quietly(store, namespace, meta(pod)["name"])
    pods = owned_pods(store, rs)
    active = [p for p in pods if _active(p)]
    ready = sum(1 for p in active if _ready(p))
    _write_status(store, "apps/v1/replicasets", rs, {
        "replicas": len(active),
        "fullyLabeledReplicas": len(active),
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": meta(rs).get("generation", 1),
    })


def template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int(digest[:16], 16)
    text = ""
    for _ in range(10):
        number, index = divmod(number, len(alphabet))
        text += alphabet[index]
    return text


def reconcile_deployment(store: Store, namespace: str, name: str) -> None:
    deployment = store.peek("apps/v1/deployments", name, namespace)
    if deployment is None or meta(deployment).get("deletionTimestamp"):
        return
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    pod_hash = template_hash(template)
    uid = meta(deployment)["uid"]
    owned = []
    for resource, ns, rs_name in store.dependents(uid):
        if resource == "apps/v1/replicasets":
            rs = store.peek(resource, rs_name, ns)
            if rs is not None:
                owned.append(rs)
    replicas = 0 if spec.get("paused") else int(spec.get("replicas", 1) or 0)
    current = next((rs for rs in owned if (meta(rs).get("labels") or {}).get("pod-template-hash") == pod_hash), None)
    if current is None:
        new_template = copy.deepcopy(template)
        new_template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = pod_hash
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels["pod-template-hash"] = pod_hash
        store.create("apps/v1/replicasets", {
            "metadata": {
                "name": f"{name}-{pod_hash}",
                "namespace": namespace,
                "labels": labels,
                "ownerReferences": [owner_reference(deployment)],
                "annotations": {"deployment.kubernetes.io/revision": str(len(owned) + 1)},
            },
            "spec": {"replicas": replicas, "selector": selector, "template": new_template,
                     "minReadySeconds": spec.get("minReadySeconds", 0)},
        }, namespace)
    elif (current.get("spec") or {}).get("replicas") != replicas:
        store.patch("apps/v1/replicasets", meta(current)["name"], {"spec": {"replicas": replicas}}, namespace)
    for rs in owned:
        if rs is not current and (rs.get("spec") or {}).get("replicas", 0) != 0:
            store.patch("apps/v1/replicasets", meta(rs)["name"], {"spec": {"replicas": 0}}, namespace)
    total = ready = available = updated = 0
    for rs in owned:
        status = rs.get("status") or {}
        total += status.get("replicas", 0)
        ready += status.get("readyReplicas", 0)
        available += status.get("availableReplicas", 0)
        if rs is current:
            updated = status.get("replicas", 0)
    now = store.clock.timestamp()
    status_obj: dict[str, Any] = dict(deployment.get("status") or {})
    status_obj.update({
        "observedGeneration": meta(deployment).get("generation", 1),
        "replicas": total,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": max(0, replicas - available),
    })
    probe = {"status": status_obj}
    set_condition(probe, {
        "type": "Available",
        "status": "True" if available >= replicas else "False",
        "reason": "MinimumReplicasAvailable" if available >= replicas else "MinimumReplicasUnavailable",
        "message": "Deployment has minimum availability." if available >= replicas
        else "Deployment does not have minimum availability.",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    })
    _write_status(store, "apps/v1/deployments", deployment, probe["status"])


def daemon_tolerations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    tolerations = list(spec.get("tolerations") or [])
    for default in DAEMON_TOLERATIONS:
        if not any(t.get("key") == default["key"] and t.get("effect") == default["effect"] for t in tolerations):
            tolerations.append(dict(default))
    if spec.get("hostNetwork"):
        tolerations.append({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def daemon_wants_node(template_spec: dict[str, Any], node: dict[str, Any], *, running: bool = False) -> bool:
    """Whether a DaemonSet runs a pod on the node: selection matches and every taint is tolerated. A pod
    already ``running`` there stays unless a NoExecute taint is not tolerated, as the DaemonSet controller's
    shouldContinueRunning says: a NoSchedule taint (a cordon, karpenter.sh/disrupted) or the node's deletion
    (held by a finalizer) only keeps new pods off, the drain removes the old."""
    if not matches_node_selection(template_spec, node):
        return False
    if meta(node).get("deletionTimestamp") and not running:
        return False
    tolerations = daemon_tolerations(template_spec)
    effects = ("NoExecute",) if running else ("NoSchedule", "NoExecute")
    return all(
        tolerates(tolerations, taint)
        for taint in (node.get("spec") or {}).get("taints") or []
        if taint.get("effect") in effects
    )


def reconcile_daemonset(store: Store, namespace: str, name: str) -> None:
    ds = store.peek("apps/v1/daemonsets", name, namespace)
    if ds is None or meta(ds).get("deletionTimestamp"):
        return
    template_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    nodes = {meta(n)["name"]: n for n in store.snapshot("v1/nodes")}
    wanted = {node_name for node_name, node in nodes.items() if daemon_wants_node(template_spec, node)}
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in owned_pods(store, ds):
        if _active(pod):
            by_node.setdefault((pod.get("spec") or {}).get("nodeName", ""), []).append(pod)
    for node_name, pods in by_node.items():
        stays = node_name in nodes and daemon_wants_node(template_spec, nodes[node_name], running=True)
        keep = 1 if node_name in wanted or stays else 0
        for pod in sorted(pods, key=lambda p: meta(p).get("creationTimestamp", ""))[keep:]:
            _delete_quietly(store, namespace, meta(pod)["name"], grace=0 if node_name not in nodes else None)
    for node_name in sorted(wanted - set(by_node)):
        pod = _pod_from_template(ds, f"{name}-")
        pod["spec"]["nodeName"] = node_name
        pod["spec"]["tolerations"] = daemon_tolerations(pod["spec"])
        store.create("v1/pods", pod, namespace)
    scheduled = ready = 0
    for pod in owned_pods(store, ds):
        if _active(pod) and (pod.get("spec") or {}).get("nodeName") in wanted:
            scheduled += 1
            ready += 1 if _ready(pod) else 0
    _write_status(store, "apps/v1/daemonsets", ds, {
        "desiredNumberScheduled": len(wanted),
        "currentNumberScheduled": scheduled,
        "updatedNumberScheduled": scheduled,
        "numberReady": ready,
        "numberAvailable": ready,
        "numberUnavailable": max(0, len(wanted) - ready),
        "numberMisscheduled": 0,
        "observedGeneration": meta(ds).get("generation", 1),
    })


def reconcile_job(store: Store, namespace: str, name: str) -> None:
    job = store.peek("batch/v1/jobs", name, namespace)
    if job is None or meta(job).get("deletionTimestamp"):
        return
    spec = job.get("spec") or {}
    pods = owned_pods(store, job)
    succeeded = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")
    failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    active = [p for p in pods if _active(p)]
    completions = spec.get("completions")
    parallelism = int(spec.get("parallelism", 1) or 0)
    complete = succeeded >= completions if completions is not None else succeeded > 0 and not active
    if complete or spec.get("suspend"):
        wanted = 0
    elif completions is not None:
        wanted = min(parallelism, completions - succeeded)
    else:
        wanted = parallelism
    if len(active) < wanted:
        for _ in range(wanted - len(active)):
            store.create("v1/pods", _pod_from_template(job, f"{name}-"), namespace)
    elif len(active) > wanted and not complete:
        for pod in _removal_order(active)[: len(active) - wanted]:
            _delete_quietly(store, namespace, meta(pod)["name"])
    active_now = [p for p in owned_pods(store, job) if _active(p)]
    now = store.clock.timestamp()
    status = dict(job.get("status") or {})
    status.update({
        "active": len(active_now),
        "succeeded": succeeded,
        "failed": failed,
        "ready": sum(1 for p in active_now if _ready(p)),
    })
    status.setdefault("startTime", now)
    if complete:
        status.setdefault("completionTime", now)
        probe = {"status": status}
        for cond_type in ("SuccessCriteriaMet", "Complete"):
            set_condition(probe, {"type": cond_type, "status": "True", "reason": "CompletionsReached",
                                  "message": "Reached expected number of succeeded pods",
                                  "lastProbeTime": now, "lastTransitionTime": now})
    _write_status(store, "batch/v1/jobs", job, status)
