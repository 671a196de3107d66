"""The structural schema of karpenter.sh/v1 NodeClaim (#30.1, #30.7), the kind nodescale writes, and the
printer columns of Karpenter's NodeClaim, NodePool and EC2NodeClass CRDs (what `kubectl get` shows).

The fields are those of Karpenter v1's NodeClaim (kubernetes-sigs/karpenter pkg/apis/v1/nodeclaim.go,
nodeclaim_status.go) that nodescale writes or Karpenter's own tools read; the types only, as the other
shipped CRDs have them (schema.py): the API server prunes anything else.
"""

from __future__ import annotations

from typing import Any

_STRING = {"type": "string"}
_QUANTITIES = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}
_TAINT = {"type": "object", "required": ["key", "effect"], "properties": {
    "key": _STRING, "value": _STRING, "effect": _STRING, "timeAdded": {"type": "string", "format": "date-time"}}}
_REQUIREMENT = {"type": "object", "required": ["key", "operator"], "properties": {
    "key": _STRING, "operator": _STRING, "values": {"type": "array", "items": _STRING},
    "minValues": {"type": "integer"}}}
_CONDITION = {"type": "object", "required": ["type", "status", "lastTransitionTime"], "properties": {
    "type": _STRING, "status": _STRING, "reason": _STRING, "message": _STRING,
    "lastTransitionTime": {"type": "string", "format": "date-time"},
    "observedGeneration": {"type": "integer", "format": "int64"}}}

NODECLAIM_V1: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["nodeClassRef", "requirements"],
            "properties": {
                "expireAfter": _STRING,
                "nodeClassRef": {"type": "object", "required": ["group", "kind", "name"],
                                 "properties": {"group": _STRING, "kind": _STRING, "name": _STRING}},
                "requirements": {"type": "array", "items": _REQUIREMENT},
                "resources": {"type": "object", "properties": {"requests": _QUANTITIES}},
                "startupTaints": {"type": "array", "items": _TAINT},
                "taints": {"type": "array", "items": _TAINT},
                "terminationGracePeriod": _STRING,
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "allocatable": _QUANTITIES,
                "capacity": _QUANTITIES,
                "conditions": {"type": "array", "items": _CONDITION},
                "imageID": _STRING,
                "lastPodEventTime": {"type": "string", "format": "date-time"},
                "nodeName": _STRING,
                "providerID": _STRING,
            },
        },
    },
}


def _column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        out["priority"] = priority
    return out


_READY = _column("Ready", '.status.conditions[?(@.type=="Ready")].status')
_AGE = _column("Age", ".metadata.creationTimestamp", "date")

# Karpenter v1's additionalPrinterColumns, by plural (of the v1 version).
PRINTER_COLUMNS: dict[str, list[dict[str, Any]]] = {
    "nodeclaims": [
        _column("Type", r".metadata.labels.node\.kubernetes\.io/instance-type"),
        _column("Capacity", r".metadata.labels.karpenter\.sh/capacity-type"),
        _column("Zone", r".metadata.labels.topology\.kubernetes\.io/zone"),
        _column("Node", ".status.nodeName"),
        _READY,
        _AGE,
        _column("ImageID", ".status.imageID", priority=1),
        _column("ID", ".status.providerID", priority=1),
        _column("NodePool", r".metadata.labels.karpenter\.sh/nodepool", priority=1),
        _column("NodeClass", ".spec.nodeClassRef.name", priority=1),
        _column("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
    ],
    "nodepools": [
        _column("NodeClass", ".spec.template.spec.nodeClassRef.name"),
        _column("Nodes", ".status.resources.nodes"),
        _READY,
        _AGE,
        _column("Weight", ".spec.weight", "integer", priority=1),
        _column("CPU", ".status.resources.cpu", priority=1),
        _column("Memory", ".status.resources.memory", priority=1),
    ],
    "ec2nodeclasses": [
        _READY,
        _AGE,
        _column("Role", ".spec.role", priority=1),
    ],
}
