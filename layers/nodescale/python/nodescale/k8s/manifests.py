"""Objects of a manifest applied to, and removed from, the cluster: server-side apply and delete.

Only the kinds nodescale ships manifests for are known (RBAC: `infra/manifests/rbac.yaml`); anything
else is refused before a request is made, so a manifest cannot grow a kind the applier's access was
never meant to write.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from .http import ApiClient
from .raw import path_segment, request_json

APPLY_PATCH = "application/apply-patch+yaml"
FIELD_MANAGER = "nodescale"
_RBAC = "rbac.authorization.k8s.io/v1"
# (apiVersion, kind) -> (collection path, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    (_RBAC, "ClusterRole"): (f"/apis/{_RBAC}/clusterroles", False),
    (_RBAC, "ClusterRoleBinding"): (f"/apis/{_RBAC}/clusterrolebindings", False),
    (_RBAC, "Role"): (f"/apis/{_RBAC}/namespaces/{{namespace}}/roles", True),
    (_RBAC, "RoleBinding"): (f"/apis/{_RBAC}/namespaces/{{namespace}}/rolebindings", True),
}


class ManifestError(ValueError):
    """A document this module cannot apply; the message names it and what is allowed."""


def object_path(doc: dict[str, Any]) -> str:
    """The API path of the object a document describes."""
    if not isinstance(doc, dict):
        raise ManifestError("a manifest document must be an object")
    key = (doc.get("apiVersion"), doc.get("kind"))
    metadata = doc.get("metadata") or {}
    name = metadata.get("name")
    if key not in KINDS:
        allowed = ", ".join(f"{kind} ({version})" for version, kind in KINDS)
        raise ManifestError(f"{key[1]!r} ({key[0]!r}) is not a kind nodescale applies: allowed are {allowed}")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"a {key[1]} without metadata.name")
    collection, namespaced = KINDS[key]  # type: ignore[index]
    namespace = metadata.get("namespace") or "default"
    base = collection.format(namespace=path_segment(namespace)) if namespaced else collection
    return f"{base}/{path_segment(name)}"


def describe(doc: dict[str, Any]) -> str:
    metadata = doc.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{doc.get('kind')}/{where}{metadata.get('name')}"


def apply(api: ApiClient, doc: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply of one object (created when absent, its fields taken over when another manager
    wrote them: `force`), as `kubectl apply --server-side --force-conflicts` does."""
    return request_json(api, "PATCH", object_path(doc), query={"fieldManager": FIELD_MANAGER, "force": "true"},
                        body=doc, content_type=APPLY_PATCH)


def delete(api: ApiClient, doc: dict[str, Any]) -> bool:
    """Delete one object; False when it was already gone."""
    try:
        request_json(api, "DELETE", object_path(doc))
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
