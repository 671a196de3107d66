"""Which fields exist where in each Karpenter kind of each API generation: nodescale's own compact table.

Derived from Karpenter's CRD OpenAPI schemas (aws/karpenter-provider-aws, pkg/apis/crds/): Provisioner
and AWSNodeTemplate from v0.27-v0.37, v1beta1 NodePool and EC2NodeClass from v0.32-v1.2 (the releases
that served v1beta1), v1 from v1.0 onwards. Each generation allows the union of its releases' fields,
so a manifest written for any of them is accepted. Only field names are recorded here; what a value may
be is checked by the converters (nodepools.py, nodeclasses.py, kubelet.py).

A schema is one of:
    SCALAR         a leaf (string, number, bool, duration...)
    FREE           a map whose keys the user chooses (labels, annotations, tags, limits, the kubelet's
                   reserved-resource and eviction maps): any key, values checked by the converters
    ANY            anything at all: x-kubernetes-preserve-unknown-fields places, and what the API
                   server writes (status, managedFields, ownerReferences)
    {name: schema} an object with exactly these fields
    [schema]       a list whose items follow schema
    Refused(text)  a field that is not allowed here although a person might well write it (it moved,
                   belongs to another generation, or nodescale does not support it); text says what to do
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCALAR = None
FREE = "free keys"
ANY = "anything"


@dataclass(frozen=True, slots=True)
class Refused:
    """A field a person may write that this generation does not take: the message says what to do instead."""

    message: str


Schema = Any  # SCALAR | FREE | ANY | dict[str, Schema] | list[Schema] | Refused

# ObjectMeta (k8s.io/apimachinery): what `kubectl get -o yaml` prints for any object. Karpenter's CRDs
# leave metadata to the API server, which knows exactly these fields.
OBJECT_META: dict[str, Schema] = {
    "name": SCALAR,
    "generateName": SCALAR,
    "namespace": SCALAR,
    "selfLink": SCALAR,
    "uid": SCALAR,
    "resourceVersion": SCALAR,
    "generation": SCALAR,
    "creationTimestamp": SCALAR,
    "deletionTimestamp": SCALAR,
    "deletionGracePeriodSeconds": SCALAR,
    "labels": FREE,
    "annotations": FREE,
    "ownerReferences": ANY,
    "finalizers": [SCALAR],
    "managedFields": ANY,
}

_TAINT = {"key": SCALAR, "value": SCALAR, "effect": SCALAR, "timeAdded": SCALAR}
_REQUIREMENT_V1ALPHA5 = {"key": SCALAR, "operator": SCALAR, "values": [SCALAR]}
_REQUIREMENT = {**_REQUIREMENT_V1ALPHA5, "minValues": SCALAR}  # minValues arrived in v0.35

# The kubelet block keeps one shape across generations; v1alpha5 also had containerRuntime (dropped in
# v1beta1, when containerd became the only runtime). The reserved and eviction maps are keyed by
# resource or signal name: free here, the converter checks the names.
_KUBELET = {
    "clusterDNS": [SCALAR],
    "maxPods": SCALAR,
    "podsPerCore": SCALAR,
    "systemReserved": FREE,
    "kubeReserved": FREE,
    "evictionHard": FREE,
    "evictionSoft": FREE,
    "evictionSoftGracePeriod": FREE,
    "evictionMaxPodGracePeriod": SCALAR,
    "imageGCHighThresholdPercent": SCALAR,
    "imageGCLowThresholdPercent": SCALAR,
    "cpuCFSQuota": SCALAR,
}
_KUBELET_V1ALPHA5 = {**_KUBELET, "containerRuntime": SCALAR}


def _object(spec: dict[str, Schema]) -> dict[str, Schema]:
    """A whole object: type fields, metadata, the kind's spec, and the status the controller writes."""
    return {"apiVersion": SCALAR, "kind": SCALAR, "metadata": OBJECT_META, "spec": spec, "status": ANY}


PROVISIONER_V1ALPHA5 = _object(
    {
        "annotations": FREE,
        "labels": FREE,
        "taints": [_TAINT],
        "startupTaints": [_TAINT],
        "requirements": [_REQUIREMENT_V1ALPHA5],
        "kubeletConfiguration": _KUBELET_V1ALPHA5,
        "provider": ANY,  # inline provider settings, schemaless upstream; the converter refuses them
        "providerRef": {"apiVersion": SCALAR, "kind": SCALAR, "name": SCALAR},
        "limits": {"resources": FREE},
        "consolidation": {"enabled": SCALAR},
        "ttlSecondsAfterEmpty": SCALAR,
        "ttlSecondsUntilExpired": SCALAR,
        "weight": SCALAR,
    }
)

_BUDGET_V1BETA1 = {"nodes": SCALAR, "schedule": SCALAR, "duration": SCALAR}

NODEPOOL_V1BETA1 = _object(
    {
        "template": {
            "metadata": {"labels": FREE, "annotations": FREE},
            "spec": {
                "taints": [_TAINT],
                "startupTaints": [_TAINT],
                "requirements": [_REQUIREMENT],
                "resources": {"requests": FREE},
                "kubelet": _KUBELET,
                "nodeClassRef": {"apiVersion": SCALAR, "kind": SCALAR, "name": SCALAR},
            },
        },
        "disruption": {
            "consolidateAfter": SCALAR,
            "consolidationPolicy": SCALAR,
            "expireAfter": SCALAR,
            "budgets": [_BUDGET_V1BETA1],
        },
        "limits": FREE,
        "weight": SCALAR,
    }
)

NODEPOOL_V1 = _object(
    {
        "template": {
            "metadata": {"labels": FREE, "annotations": FREE},
            "spec": {
                "taints": [_TAINT],
                "startupTaints": [_TAINT],
                "requirements": [_REQUIREMENT],
                "nodeClassRef": {"group": SCALAR, "kind": SCALAR, "name": SCALAR},
                "expireAfter": SCALAR,
                "terminationGracePeriod": SCALAR,
                "kubelet": Refused("is not part of karpenter.sh/v1; set kubelet on the EC2NodeClass"),
            },
        },
        "disruption": {
            "consolidateAfter": SCALAR,
            "consolidationPolicy": SCALAR,
            "consolidationThreshold": SCALAR,  # Balanced (v1.14)
            "budgets": [{**_BUDGET_V1BETA1, "reasons": [SCALAR]}],
            "expireAfter": Refused("moved to spec.template.spec.expireAfter in karpenter.sh/v1"),
        },
        "limits": FREE,
        "weight": SCALAR,
        "replicas": SCALAR,  # static capacity (v1.8+)
    }
)

_EBS = {
    "deleteOnTermination": SCALAR,
    "encrypted": SCALAR,
    "iops": SCALAR,
    "kmsKeyID": SCALAR,
    "snapshotID": SCALAR,
    "throughput": SCALAR,
    "volumeSize": SCALAR,
    "volumeType": SCALAR,
}
_METADATA_OPTIONS = {
    "httpEndpoint": SCALAR,
    "httpProtocolIPv6": SCALAR,
    "httpPutResponseHopLimit": SCALAR,
    "httpTokens": SCALAR,
}
# Fields every node class generation has, with the same shape.
_NODE_CLASS_COMMON = {
    "amiFamily": SCALAR,
    "context": SCALAR,
    "detailedMonitoring": SCALAR,
    "instanceProfile": SCALAR,
    "metadataOptions": _METADATA_OPTIONS,
    "tags": FREE,
    "userData": SCALAR,
}

AWSNODETEMPLATE_V1ALPHA1 = _object(
    {
        **_NODE_CLASS_COMMON,
        # v1alpha1 selectors are maps: tag keys, or aws-ids / aws::name / aws::owners (checked by the converter).
        "amiSelector": FREE,
        "subnetSelector": FREE,
        "securityGroupSelector": FREE,
        "blockDeviceMappings": [{"deviceName": SCALAR, "ebs": _EBS}],
        "launchTemplate": SCALAR,  # a pre-made launch template's name; the converter refuses it
        # The inline provider's type fields, carried over into the template's spec.
        "apiVersion": SCALAR,
        "kind": SCALAR,
    }
)

_SUBNET_TERM = {"tags": FREE, "id": SCALAR}
_SECURITY_GROUP_TERM = {"tags": FREE, "id": SCALAR, "name": SCALAR}
_AMI_TERM_V1BETA1 = {"tags": FREE, "id": SCALAR, "name": SCALAR, "owner": SCALAR}

EC2NODECLASS_V1BETA1 = _object(
    {
        **_NODE_CLASS_COMMON,
        "amiSelectorTerms": [_AMI_TERM_V1BETA1],
        "subnetSelectorTerms": [_SUBNET_TERM],
        "securityGroupSelectorTerms": [_SECURITY_GROUP_TERM],
        "associatePublicIPAddress": SCALAR,
        "blockDeviceMappings": [{"deviceName": SCALAR, "rootVolume": SCALAR, "ebs": _EBS}],
        "instanceStorePolicy": SCALAR,
        "role": SCALAR,
        "kubelet": Refused("is not part of karpenter.k8s.aws/v1beta1; set it on the NodePool's template.spec"),
    }
)

# Fields of later v1 releases that nodescale reads past (they are Karpenter's, so a manifest carrying them
# is accepted as Karpenter accepts it): connectionTracking, cpuOptions,
# ipPrefixCount, networkInterfaces, placementGroupSelector, ebs.volumeInitializationRate.
EC2NODECLASS_V1 = _object(
    {
        **_NODE_CLASS_COMMON,
        "amiSelectorTerms": [
            {
                **_AMI_TERM_V1BETA1,
                "alias": SCALAR,
                "ssmParameter": Refused(
                    "is not supported by nodescale; select the AMI by alias, id, name (and owner) or tags"
                ),
            }
        ],
        "subnetSelectorTerms": [_SUBNET_TERM],
        "securityGroupSelectorTerms": [_SECURITY_GROUP_TERM],
        "associatePublicIPAddress": SCALAR,
        "blockDeviceMappings": [
            {"deviceName": SCALAR, "rootVolume": SCALAR, "ebs": {**_EBS, "volumeInitializationRate": SCALAR}}
        ],
        "instanceStorePolicy": SCALAR,
        "role": SCALAR,
        "kubelet": _KUBELET,
        "capacityReservationSelectorTerms": [
            {"id": SCALAR, "ownerID": SCALAR, "tags": FREE, "instanceMatchCriteria": SCALAR}
        ],
        "connectionTracking": {"tcpEstablishedTimeout": SCALAR, "udpStreamTimeout": SCALAR, "udpTimeout": SCALAR},
        "cpuOptions": {"nestedVirtualization": SCALAR},
        "ipPrefixCount": SCALAR,
        "networkInterfaces": [{"deviceIndex": SCALAR, "interfaceType": SCALAR, "networkCardIndex": SCALAR}],
        "placementGroupSelector": {"id": SCALAR, "name": SCALAR},
    }
)

# karpenter.sh/v1alpha1 NodeOverlay (Karpenter v1.6+, kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay.go).
NODEOVERLAY_V1ALPHA1 = _object(
    {
        "requirements": [_REQUIREMENT_V1ALPHA5],
        "price": SCALAR,
        "priceAdjustment": SCALAR,
        "capacity": FREE,
        "weight": SCALAR,
    }
)

# autoscaling.x-k8s.io CapacityBuffer (Cluster Autoscaler, Karpenter v1.14), the same fields in v1alpha1, v1beta1, v1.
CAPACITYBUFFER = _object(
    {
        "provisioningStrategy": SCALAR,
        "podTemplateRef": {"name": SCALAR},
        "scalableRef": {"apiGroup": SCALAR, "kind": SCALAR, "name": SCALAR},
        "replicas": SCALAR,
        "percentage": SCALAR,
        "limits": FREE,
    }
)

# (apiVersion, kind) -> the object's schema: every configuration kind nodescale reads.
SCHEMAS: dict[tuple[str, str], dict[str, Schema]] = {
    ("karpenter.sh/v1alpha5", "Provisioner"): PROVISIONER_V1ALPHA5,
    ("karpenter.sh/v1beta1", "NodePool"): NODEPOOL_V1BETA1,
    ("karpenter.sh/v1", "NodePool"): NODEPOOL_V1,
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): AWSNODETEMPLATE_V1ALPHA1,
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"): EC2NODECLASS_V1BETA1,
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): EC2NODECLASS_V1,
    ("karpenter.sh/v1alpha1", "NodeOverlay"): NODEOVERLAY_V1ALPHA1,
    **{(f"autoscaling.x-k8s.io/{v}", "CapacityBuffer"): CAPACITYBUFFER for v in ("v1", "v1beta1", "v1alpha1")},
}
