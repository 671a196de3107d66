"""Defaults the real API server fills in on create, for the kinds where clients rely on them."""

from __future__ import annotations

from typing import Any

DEFAULT_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
# The priority classes every cluster has (kube-apiserver creates them at start-up); the Priority admission
# plugin writes a pod's `priority` from its `priorityClassName`. Others are not served by sim: 0.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def canonical_quantity(value: Any) -> Any:
    """The API server stores quantities as strings (`cpu: 1` comes back as "1", `0.5` as "500m");
    clients such as the official Python one fail to read a bare number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def canonical_resource_list(values: Any) -> Any:
    if not isinstance(values, dict):
        return values
    return {name: canonical_quantity(v) for name, v in values.items()}


def _container_defaults(container: dict[str, Any]) -> None:
    resources = container.setdefault("resources", {})
    for kind in ("requests", "limits"):
        if kind in resources:
            resources[kind] = canonical_resource_list(resources[kind])
    limits = resources.get("limits") or {}
    requests = resources.get("requests")
    # Limits without requests mean requests equal to the limits.
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    elif requests is None:
        resources.pop("requests", None)
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    container.setdefault("imagePullPolicy", "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")


def _qos_class(spec: dict[str, Any]) -> str:
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for res in ("cpu", "memory"):
            if res not in limits or requests.get(res, limits.get(res)) != limits.get(res):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    if "overhead" in spec:
        spec["overhead"] = canonical_resource_list(spec["overhead"])
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(container, dict):
            _container_defaults(container)


def pod_defaults(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    pod_spec_defaults(spec)
    spec.setdefault("serviceAccountName", "default")
    if "priority" not in spec:
        spec["priority"] = SYSTEM_PRIORITY_CLASSES.get(spec.get("priorityClassName") or "", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for default in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == default["key"] and t.get("effect") == default["effect"] for t in tolerations):
            tolerations.append(dict(default))
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status["qosClass"] = _qos_class(spec)


def _template_defaults(obj: dict[str, Any]) -> None:
    template = obj.setdefault("spec", {}).setdefault("template", {})
    pod_spec_defaults(template.setdefault("spec", {}))


def apply_create_defaults(resource: str, obj: dict[str, Any], uid: str) -> None:
    if resource == "v1/pods":
        pod_defaults(obj)
    elif resource == "v1/namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {})["phase"] = "Active"
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif resource == "apps/v1/deployments":
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault(
            "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
        )
        _template_defaults(obj)
    elif resource == "apps/v1/replicasets":
        obj.setdefault("spec", {}).setdefault("replicas", 1)
        _template_defaults(obj)
    elif resource == "apps/v1/statefulsets":
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
        # The API server writes a new StatefulSet's status as created: its replicas and availableReplicas are
        # not omitempty, so a client reads 0 there, never a missing status.
        status = obj.setdefault("status", {})
        status.setdefault("replicas", 0)
        status.setdefault("availableReplicas", 0)
        _template_defaults(obj)
    elif resource == "apps/v1/daemonsets":
        spec = obj.setdefault("spec", {})
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
        spec.setdefault("revisionHistoryLimit", 10)
        _template_defaults(obj)
    elif resource == "batch/v1/jobs":
        _job_defaults(obj, uid)
    elif resource == "storage.k8s.io/v1/storageclasses":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif resource == "v1/persistentvolumes":
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    elif resource == "v1/persistentvolumeclaims":
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    elif resource == "policy/v1/poddisruptionbudgets":
        obj.setdefault("status", {}).update(
            {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
        )


def _job_defaults(job: dict[str, Any], uid: str) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    template = spec.setdefault("template", {})
    template_spec = template.setdefault("spec", {})
    pod_spec_defaults(template_spec)
    if not spec.get("manualSelector"):
        name = job["metadata"]["name"]
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            }
        )
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    status = job.setdefault("status", {})
    status.setdefault("active", 0)
