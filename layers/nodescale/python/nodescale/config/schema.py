"""Which fields exist where in each Karpenter kind of each API generation: nodescale's own compact table.

Derived from Karpenter's CRD OpenAPI schemas (aws/karpenter-provider-aws, pkg/apis/crds/): Provisioner
and AWSNodeTemplate from v0.27-v0.37, v1beta1 NodePool and EC2NodeClass from v0.32-v1.2 (the releases
that served v1beta1), v1 from v1.0 onwards. Each generation allows the union of its releases' fields,
so a manifest written for any of them is accepted. Field names and the JSON type of each leaf are
recorded here (the type as Karpenter's CRDs declare it, which the API server enforces); what a value may
be beyond its type is checked by the converters (nodepools.py, nodeclasses.py, kubelet.py). The same
table is the CRDs' structural schema (crds.py), so the two never disagree on a field.

A schema is one of:
    STRING, INTEGER, BOOLEAN, NUMBER, INT_OR_STRING
                   a leaf of that JSON type (INT_OR_STRING: a quantity, or a count or percentage)
    SCALAR         a leaf of any scalar type
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
class Leaf:
    """A leaf of one JSON type, as the CRD's OpenAPI schema declares it (``int-or-string`` for quantities)."""

    type: str


STRING = Leaf("string")
INTEGER = Leaf("integer")
BOOLEAN = Leaf("boolean")
NUMBER = Leaf("number")
INT_OR_STRING = Leaf("int-or-string")


@dataclass(frozen=True, slots=True)
class Refused:
    """A field a person may write that this generation does not take: the message says what to do instead."""

    message: str


Schema = Any  # Leaf | SCALAR | FREE | ANY | dict[str, Schema] | list[Schema] | Refused

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

_TAINT = {"key": STRING, "value": STRING, "effect": STRING, "timeAdded": STRING}
_REQUIREMENT_V1ALPHA5 = {"key": STRING, "operator": STRING, "values": [STRING]}
_REQUIREMENT = {**_REQUIREMENT_V1ALPHA5, "minValues": INTEGER}  # minValues arrived in v0.35

# The kubelet block keeps one shape across generations; v1alpha5 also had containerRuntime (dropped in
# v1beta1, when containerd became the only runtime). The reserved and eviction maps are keyed by
# resource or signal name: free here, the converter checks the names.
_KUBELET = {
    "clusterDNS": [STRING],
    "maxPods": INTEGER,
    "podsPerCore": INTEGER,
    "systemReserved": FREE,
    "kubeReserved": FREE,
    "evictionHard": FREE,
    "evictionSoft": FREE,
    "evictionSoftGracePeriod": FREE,
    "evictionMaxPodGracePeriod": INTEGER,
    "imageGCHighThresholdPercent": INTEGER,
    "imageGCLowThresholdPercent": INTEGER,
    "cpuCFSQuota": BOOLEAN,
}
_KUBELET_V1ALPHA5 = {**_KUBELET, "containerRuntime": STRING}


def _object(spec: dict[str, Schema]) -> dict[str, Schema]:
    """A whole object: type fields, metadata, the kind's spec, and the status the controller writes."""
    return {"apiVersion": STRING, "kind": STRING, "metadata": OBJECT_META, "spec": spec, "status": ANY}


PROVISIONER_V1ALPHA5 = _object(
    {
        "annotations": FREE,
        "labels": FREE,
        "taints": [_TAINT],
        "startupTaints": [_TAINT],
        "requirements": [_REQUIREMENT_V1ALPHA5],
        "kubeletConfiguration": _KUBELET_V1ALPHA5,
        "provider": ANY,  # inline provider settings, schemaless upstream; the converter refuses them
        "providerRef": {"apiVersion": STRING, "kind": STRING, "name": STRING},
        "limits": {"resources": FREE},
        "consolidation": {"enabled": BOOLEAN},
        "ttlSecondsAfterEmpty": INTEGER,
        "ttlSecondsUntilExpired": INTEGER,
        "weight": INTEGER,
    }
)

_BUDGET_V1BETA1 = {"nodes": STRING, "schedule": STRING, "duration": STRING}

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
                "nodeClassRef": {"apiVersion": STRING, "kind": STRING, "name": STRING},
            },
        },
        "disruption": {
            "consolidateAfter": STRING,
            "consolidationPolicy": STRING,
            "expireAfter": STRING,
            "budgets": [_BUDGET_V1BETA1],
        },
        "limits": FREE,
        "weight": INTEGER,
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
                "nodeClassRef": {"group": STRING, "kind": STRING, "name": STRING},
                "expireAfter": STRING,
                "terminationGracePeriod": STRING,
                "kubelet": Refused("is not part of karpenter.sh/v1; set kubelet on the EC2NodeClass"),
            },
        },
        "disruption": {
            "consolidateAfter": STRING,
            "consolidationPolicy": STRING,
            "consolidationThreshold": SCALAR,  # Balanced (v1.14)
            "budgets": [{**_BUDGET_V1BETA1, "reasons": [STRING]}],
            "expireAfter": Refused("moved to spec.template.spec.expireAfter in karpenter.sh/v1"),
        },
        "limits": FREE,
        "weight": INTEGER,
        "replicas": INTEGER,  # static capacity (v1.8+)
    }
)

_EBS = {
    "deleteOnTermination": BOOLEAN,
    "encrypted": BOOLEAN,
    "iops": INTEGER,
    "kmsKeyID": STRING,
    "snapshotID": STRING,
    "throughput": INTEGER,
    "volumeSize": INT_OR_STRING,
    "volumeType": STRING,
}
_METADATA_OPTIONS = {
    "httpEndpoint": STRING,
    "httpProtocolIPv6": STRING,
    "httpPutResponseHopLimit": INTEGER,
    "httpTokens": STRING,
}
# Fields every node class generation has, with the same shape.
_NODE_CLASS_COMMON = {
    "amiFamily": STRING,
    "context": STRING,
    "detailedMonitoring": BOOLEAN,
    "instanceProfile": STRING,
    "metadataOptions": _METADATA_OPTIONS,
    "tags": FREE,
    "userData": STRING,
}

AWSNODETEMPLATE_V1ALPHA1 = _object(
    {
        **_NODE_CLASS_COMMON,
        # v1alpha1 selectors are maps: tag keys, or aws-ids / aws::name / aws::owners (checked by the converter).
        "amiSelector": FREE,
        "subnetSelector": FREE,
        "securityGroupSelector": FREE,
        "blockDeviceMappings": [{"deviceName": STRING, "ebs": _EBS}],
        "launchTemplate": STRING,  # a pre-made launch template's name; the converter refuses it
        # The inline provider's type fields, carried over into the template's spec.
        "apiVersion": STRING,
        "kind": STRING,
    }
)

_SUBNET_TERM = {"tags": FREE, "id": STRING}
_SECURITY_GROUP_TERM = {"tags": FREE, "id": STRING, "name": STRING}
_AMI_TERM_V1BETA1 = {"tags": FREE, "id": STRING, "name": STRING, "owner": STRING}

EC2NODECLASS_V1BETA1 = _object(
    {
        **_NODE_CLASS_COMMON,
        "amiSelectorTerms": [_AMI_TERM_V1BETA1],
        "subnetSelectorTerms": [_SUBNET_TERM],
        "securityGroupSelectorTerms": [_SECURITY_GROUP_TERM],
        "associatePublicIPAddress": BOOLEAN,
        "blockDeviceMappings": [{"deviceName": STRING, "rootVolume": BOOLEAN, "ebs": _EBS}],
        "instanceStorePolicy": STRING,
        "role": STRING,
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
                "alias": STRING,
                "ssmParameter": Refused(
                    "is not supported by nodescale; select the AMI by alias, id, name (and owner) or tags"
                ),
            }
        ],
        "subnetSelectorTerms": [_SUBNET_TERM],
        "securityGroupSelectorTerms": [_SECURITY_GROUP_TERM],
        "associatePublicIPAddress": BOOLEAN,
        "blockDeviceMappings": [
            {"deviceName": STRING, "rootVolume": BOOLEAN, "ebs": {**_EBS, "volumeInitializationRate": INTEGER}}
        ],
        "instanceStorePolicy": STRING,
        "role": STRING,
        "kubelet": _KUBELET,
        "capacityReservationSelectorTerms": [
            {"id": STRING, "ownerID": STRING, "tags": FREE, "instanceMatchCriteria": STRING}
        ],
        "connectionTracking": {"tcpEstablishedTimeout": STRING, "udpStreamTimeout": STRING, "udpTimeout": STRING},
        "cpuOptions": {"nestedVirtualization": SCALAR},
        "ipPrefixCount": INTEGER,
        "networkInterfaces": [{"deviceIndex": INTEGER, "interfaceType": STRING, "networkCardIndex": INTEGER}],
        "placementGroupSelector": {"id": STRING, "name": STRING},
    }
)

# karpenter.sh/v1alpha1 NodeOverlay (Karpenter v1.6+, kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay.go).
NODEOVERLAY_V1ALPHA1 = _object(
    {
        "requirements": [_REQUIREMENT_V1ALPHA5],
        "price": STRING,
        "priceAdjustment": STRING,
        "capacity": FREE,
        "weight": INTEGER,
    }
)

# autoscaling.x-k8s.io CapacityBuffer (Cluster Autoscaler, Karpenter v1.14), the same fields in v1alpha1, v1beta1, v1.
CAPACITYBUFFER = _object(
    {
        "provisioningStrategy": STRING,
        "podTemplateRef": {"name": STRING},
        "scalableRef": {"apiGroup": STRING, "kind": STRING, "name": STRING},
        "replicas": INTEGER,
        "percentage": INTEGER,
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
