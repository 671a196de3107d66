"""Pods as the functions keep them (`nodescale.k8s.compact`): what no decision reads is dropped, what every
decision reads is the same, and a cluster's pods take about half the memory they took as parsed."""

from __future__ import annotations

import copy
import dataclasses
import json
import tracemalloc
from typing import Any

import pytest

from nodescale.disruption import drain_policy
from nodescale.k8s import listing
from nodescale.k8s.compact import compact_pod
from nodescale.model.pod import DrainPod, Pod, started_at

NOW = "2026-11-27T09:00:00Z"


def eks_pod(i: int, node: str | None = "ip-10-0-12-34.ec2.internal") -> dict[str, Any]:
    """A Deployment's pod as EKS returns it: with a sidecar, probes, environment, mounts, the projected
    service-account token, container statuses, field managers and `kubectl apply`'s annotation."""
    container = {
        "name": "web", "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/web:1.4.2",
        "command": ["/bin/web"], "args": ["--port=8080", "--log=json"],
        "env": [{"name": "AWS_REGION", "value": "us-east-1"}, {"name": "POD_IP", "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
        "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 5},
        "volumeMounts": [{"name": "kube-api-access-x1", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "readOnly": True}],
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    sidecar = {"name": "proxy", "image": "envoy:1.31", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}, "env": [{"name": "X", "value": "1"}]}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"web-7d9f8c6b5-{i:05d}", "generateName": "web-7d9f8c6b5-", "namespace": "shop",
            "uid": f"6f1c1f3e-0000-4000-8000-{i:012d}", "resourceVersion": str(1000 + i), "creationTimestamp": NOW,
            "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5"},
            "annotations": {"karpenter.sh/do-not-disrupt": "30m",
                            "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"spec": container})},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                                 "uid": "rs-uid", "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}}}}}}],
        },
        "spec": {
            "containers": [container], "initContainers": [sidecar],
            "volumes": [{"name": "kube-api-access-x1", "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
            "nodeSelector": {"karpenter.sh/capacity-type": "spot"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}]}},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]},
            },
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                           "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "web"}}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "overhead": {"cpu": "10m"}, "priority": 1000, "priorityClassName": "shop",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 45,
        },
        "status": {
            "phase": "Running", "startTime": "2026-11-27T08:00:00Z", "qosClass": "Burstable",
            "hostIP": "10.0.12.34", "hostIPs": [{"ip": "10.0.12.34"}], "podIP": "10.0.40.2",
            "podIPs": [{"ip": "10.0.40.2"}],
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": NOW}],
            "containerStatuses": [{"name": "web", "image": "web:1.4.2", "imageID": "sha256:0", "ready": True,
                                   "restartCount": 0, "state": {"running": {"startedAt": NOW}}}],
            "initContainerStatuses": [{"name": "proxy", "ready": True, "restartCount": 0}],
        },
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


def typed(pod: dict[str, Any]) -> Pod:
    return dataclasses.replace(Pod.from_dict(pod), raw={})


@pytest.mark.parametrize("node", ["ip-10-0-12-34.ec2.internal", None], ids=["bound", "pending"])
def test_every_decision_reads_the_same_pod_after_compaction(node: str | None) -> None:
    raw = eks_pod(7, node)
    kept = compact_pod(copy.deepcopy(raw))
    # Requests (sidecar, overhead), selectors, affinity, spread, owner, priority; not `kubectl apply`'s copy.
    applied = raw["metadata"]["annotations"].pop("kubectl.kubernetes.io/last-applied-configuration")
    assert typed(kept) == typed(raw) and applied
    assert started_at(kept) == started_at(raw)
    assert drain_policy.skip_reason(DrainPod.from_dict(kept)) == drain_policy.skip_reason(DrainPod.from_dict(raw))
    assert listing.is_provisionable(kept) == listing.is_provisionable(raw)
    assert kept["spec"]["volumes"] == raw["spec"]["volumes"]
    assert kept["spec"]["containers"][0]["ports"] == raw["spec"]["containers"][0]["ports"]
    assert kept["status"]["conditions"] == raw["status"]["conditions"]


def test_what_only_the_kubelet_and_runtime_read_is_dropped() -> None:
    kept = compact_pod(eks_pod(1))
    assert "managedFields" not in kept["metadata"]
    assert list(kept["metadata"]["annotations"]) == ["karpenter.sh/do-not-disrupt"]
    assert set(kept["spec"]["containers"][0]) == {"name", "ports", "resources"}
    assert set(kept["spec"]["initContainers"][0]) == {"name", "restartPolicy", "resources"}
    assert not {"containerStatuses", "initContainerStatuses", "podIPs", "hostIPs"} & set(kept["status"])
    assert len(json.dumps(kept)) < len(json.dumps(eks_pod(1))) / 2


def test_a_malformed_pod_stays_malformed_for_the_model_to_report() -> None:
    raw = eks_pod(2)
    raw["spec"]["containers"] = "web"
    raw["metadata"]["annotations"] = None
    kept = compact_pod(raw)
    assert kept["spec"]["containers"] == "web" and kept["metadata"]["annotations"] is None


def test_a_cluster_of_pods_takes_under_half_the_memory_it_took_as_parsed() -> None:
    # Each page parsed on its own, as the lists and the watch deliver them: json shares nothing between them.
    pages = [json.dumps([eks_pod(i) for i in range(start, start + 100)]) for start in range(0, 1000, 100)]

    def kept_bytes(keep: Any) -> int:
        tracemalloc.start()
        try:
            held = [keep(pod) for page in pages for pod in json.loads(page)]
            return tracemalloc.get_traced_memory()[0] if held else 0
        finally:
            tracemalloc.stop()

    as_parsed, compacted = kept_bytes(lambda pod: pod), kept_bytes(compact_pod)
    assert compacted < as_parsed / 2, (as_parsed, compacted)
