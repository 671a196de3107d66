"""CustomResourceDefinitions of the Karpenter APIs the product reads, in every generation it accepts.

`install_karpenter_crds(store)` creates them as a cluster administrator would with `kubectl apply`;
the store then serves the custom objects like any CRD created through the API. The kinds nodescale reads
get the structural schemas of infra/manifests/crds/ (nodescale.config.crds), so sim refuses and prunes
unknown fields and refuses wrong types as kube-apiserver does with Karpenter's CRDs; NodeClaim and
Machine, which nodescale never reads, keep a schema that keeps everything.
"""

from __future__ import annotations

from typing import Any

from nodescale.config import crds as product_crds

from .errors import ApiError
from .store import Store

CRD_RESOURCE = "apiextensions.k8s.io/v1/customresourcedefinitions"

# (group, plural, kind, served versions, storage version)
KARPENTER_KINDS: tuple[tuple[str, str, str, tuple[str, ...], str], ...] = (
    ("karpenter.sh", "nodepools", "NodePool", ("v1", "v1beta1"), "v1"),
    ("karpenter.sh", "nodeclaims", "NodeClaim", ("v1", "v1beta1"), "v1"),
    ("karpenter.sh", "provisioners", "Provisioner", ("v1alpha5",), "v1alpha5"),
    ("karpenter.sh", "machines", "Machine", ("v1alpha5",), "v1alpha5"),
    ("karpenter.k8s.aws", "ec2nodeclasses", "EC2NodeClass", ("v1", "v1beta1"), "v1"),
    ("karpenter.k8s.aws", "awsnodetemplates", "AWSNodeTemplate", ("v1alpha1",), "v1alpha1"),
    ("karpenter.sh", "nodeoverlays", "NodeOverlay", ("v1alpha1",), "v1alpha1"),
)


# CapacityBuffer (kubernetes/autoscaler cluster-autoscaler/apis/capacitybuffer): namespaced, not Karpenter's.
CAPACITY_BUFFER = ("autoscaling.x-k8s.io", "capacitybuffers", "CapacityBuffer", ("v1", "v1beta1", "v1alpha1"), "v1")


def crd_manifest(
    group: str, plural: str, kind: str, versions: tuple[str, ...], storage: str, scope: str = "Cluster"
) -> dict[str, Any]:
    """A CRD (cluster-scoped unless ``scope`` says Namespaced) with a status subresource and a schema that
    keeps unknown fields."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {"name": version, "served": True, "storage": version == storage, "schema": schema,
                 "subresources": {"status": {}}}
                for version in versions
            ],
        },
    }


def _structural(group: str, plural: str) -> dict[str, Any] | None:
    """The CRD nodescale ships for this kind (infra/manifests/crds/), if it ships one."""
    for manifest in product_crds.all_crds():
        if manifest["spec"]["group"] == group and manifest["spec"]["names"]["plural"] == plural:
            return manifest
    return None


def karpenter_crds() -> list[dict[str, Any]]:
    return [_structural(kind[0], kind[1]) or crd_manifest(*kind) for kind in KARPENTER_KINDS]


def capacity_buffer_crd() -> dict[str, Any]:
    return _structural(CAPACITY_BUFFER[0], CAPACITY_BUFFER[1]) or crd_manifest(*CAPACITY_BUFFER, scope="Namespaced")


def install_karpenter_crds(store: Store) -> list[str]:
    """Create every Karpenter CRD that is not there yet; returns the names created."""
    created = []
    for manifest in karpenter_crds():
        try:
            store.create(CRD_RESOURCE, manifest)
        except ApiError as error:
            if error.reason != "AlreadyExists":
                raise
            continue
        created.append(manifest["metadata"]["name"])
    return created
