"""NodePools, node classes and NodeOverlays kept in the cluster as Karpenter's custom resources, in every API
generation; and CapacityBuffers (autoscaling.x-k8s.io), namespaced, listed across every namespace."""

from __future__ import annotations

from typing import Any

from ..config.loader import ConfigResult, load

# (group, version, plural, kind), newest version of a kind first: the API server serves one object
# at every version of its CRD, so an object already seen at a newer version is not read again.
CLUSTER_KINDS = (
    ("karpenter.sh", "v1", "nodepools", "NodePool"),
    ("karpenter.sh", "v1beta1", "nodepools", "NodePool"),
    ("karpenter.sh", "v1alpha5", "provisioners", "Provisioner"),
    ("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass"),
    ("karpenter.k8s.aws", "v1beta1", "ec2nodeclasses", "EC2NodeClass"),
    ("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates", "AWSNodeTemplate"),
    ("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay"),
    ("autoscaling.x-k8s.io", "v1", "capacitybuffers", "CapacityBuffer"),
    ("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", "CapacityBuffer"),
    ("autoscaling.x-k8s.io", "v1alpha1", "capacitybuffers", "CapacityBuffer"),
)
_PAGE = 500


def read_cluster_documents(custom_objects_api: Any) -> list[tuple[str, dict]]:
    """The configuration objects in the cluster, as ``("cluster:<Kind>/<name>", object)``.

    A kind whose CRD is not installed (404) is simply absent. Any other API error is raised: an
    unreadable cluster must not look like a cluster without NodePools.
    """
    docs: list[tuple[str, dict]] = []
    seen: set[tuple[str, str]] = set()
    for group, version, plural, kind in CLUSTER_KINDS:
        for obj in _list_all(custom_objects_api, group, version, plural):
            meta = obj.get("metadata") or {}
            name = meta.get("name") or ""
            if meta.get("namespace"):  # a namespaced kind (CapacityBuffer): its name is unique per namespace
                name = f"{meta['namespace']}/{name}"
            if (kind, name) in seen:
                continue
            seen.add((kind, name))
            obj = dict(obj)
            obj.setdefault("apiVersion", f"{group}/{version}")
            obj.setdefault("kind", kind)
            docs.append((f"cluster:{kind}/{name}", obj))
    return docs


def _list_all(api: Any, group: str, version: str, plural: str) -> list[dict]:
    out: list[dict] = []
    token = None
    while True:
        kwargs: dict[str, Any] = {"limit": _PAGE}
        if token:
            kwargs["_continue"] = token
        try:
            page = api.list_cluster_custom_object(group, version, plural, **kwargs)
        except Exception as exc:
            if getattr(exc, "status", None) == 404:
                return out
            raise
        out.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return out


def load_from_cluster(custom_objects_api: Any) -> ConfigResult:
    return load(read_cluster_documents(custom_objects_api))
