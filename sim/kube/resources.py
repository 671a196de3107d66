"""Which resources the API serves: group, version, plural, kind and scope.

Built-in kinds are registered up front; CustomResourceDefinitions add and remove their own
resources at run time (see `Registry.register_crd`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_status: bool = True
    builtin: bool = True
    extra_subresources: tuple[str, ...] = field(default=())
    # A CRD version's additionalPrinterColumns (the columns `kubectl get` shows for it).
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def key(self) -> str:
        return f"{self.group}/{self.version}/{self.plural}" if self.group else f"{self.version}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool, *short: str, **kw: Any) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, kind.lower(), tuple(short), **kw)


BUILTINS: tuple[ResourceType, ...] = (
    _rt("", "v1", "namespaces", "Namespace", False, "ns"),
    _rt("", "v1", "nodes", "Node", False, "no"),
    _rt("", "v1", "pods", "Pod", True, "po", extra_subresources=("binding", "eviction")),
    _rt("", "v1", "events", "Event", True, "ev", has_status=False),
    _rt("", "v1", "services", "Service", True, "svc"),
    _rt("", "v1", "configmaps", "ConfigMap", True, "cm", has_status=False),
    _rt("", "v1", "podtemplates", "PodTemplate", True, has_status=False),
    _rt("", "v1", "secrets", "Secret", True, has_status=False),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", True, "sa", has_status=False),
    _rt("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, "pvc"),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, "pv"),
    _rt("apps", "v1", "deployments", "Deployment", True, "deploy", extra_subresources=("scale",)),
    _rt("apps", "v1", "replicasets", "ReplicaSet", True, "rs", extra_subresources=("scale",)),
    _rt("apps", "v1", "daemonsets", "DaemonSet", True, "ds"),
    _rt("apps", "v1", "statefulsets", "StatefulSet", True, "sts", extra_subresources=("scale",)),
    _rt("batch", "v1", "jobs", "Job", True),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, "pdb"),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", True, has_status=False),
    _rt("events.k8s.io", "v1", "events", "Event", True, "ev", has_status=False),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "sc", has_status=False),
    _rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False),
    _rt("storage.k8s.io", "v1", "csinodes", "CSINode", False, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, has_status=False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, has_status=False),
    _rt("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, "crd", "crds"),
)

CRD_KEY = "apiextensions.k8s.io/v1/customresourcedefinitions"


class Registry:
    """Thread-safe lookup of served resources by key, by (group, version, plural) and by kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, ResourceType] = {}
        for rt in BUILTINS:
            self._by_key[rt.key] = rt

    def get(self, key: str) -> ResourceType | None:
        return self._by_key.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        key = f"{group}/{version}/{plural}" if group else f"{version}/{plural}"
        return self._by_key.get(key)

    def all(self) -> list[ResourceType]:
        return list(self._by_key.values())

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per group, newest registration last."""
        result: dict[str, list[str]] = {}
        for rt in self._by_key.values():
            versions = result.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._by_key.values() if rt.group == group and rt.version == version]

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._by_key.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def register_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        """Serve every version a CRD declares as served; returns the resource types added."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        added = []
        with self._lock:
            for version in spec.get("versions") or []:
                if not version.get("served", True):
                    continue
                rt = ResourceType(
                    group=spec["group"],
                    version=version["name"],
                    plural=names["plural"],
                    kind=names["kind"],
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    singular=names.get("singular") or names["kind"].lower(),
                    short_names=tuple(names.get("shortNames") or ()),
                    has_status="status" in (version.get("subresources") or {}),
                    builtin=False,
                    extra_subresources=("scale",) if "scale" in (version.get("subresources") or {}) else (),
                    printer_columns=tuple(c for c in version.get("additionalPrinterColumns") or ()
                                          if isinstance(c, dict)),
                )
                self._by_key[rt.key] = rt
                added.append(rt)
        return added

    def unregister_crd(self, crd: dict[str, Any]) -> list[str]:
        spec = crd.get("spec") or {}
        plural = (spec.get("names") or {}).get("plural")
        removed = []
        with self._lock:
            for key, rt in list(self._by_key.items()):
                if not rt.builtin and rt.group == spec.get("group") and rt.plural == plural:
                    del self._by_key[key]
                    removed.append(key)
        return removed


def validate_crd(crd: dict[str, Any]) -> str | None:
    """Why a CRD cannot be served, or None when it can."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return "spec: Required value"
    for field_name in ("group",):
        if not spec.get(field_name):
            return f"spec.{field_name}: Required value"
    names = spec.get("names") or {}
    for field_name in ("plural", "kind"):
        if not names.get(field_name):
            return f"spec.names.{field_name}: Required value"
    versions = spec.get("versions")
    if not versions or not all(isinstance(v, dict) and v.get("name") for v in versions):
        return "spec.versions: Required value: must have exactly one version marked as storage version"
    if spec.get("scope", "Namespaced") not in ("Namespaced", "Cluster"):
        return f'spec.scope: Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"'
    expected = f"{names['plural']}.{spec['group']}"
    name = (crd.get("metadata") or {}).get("name")
    if name != expected:
        return f'metadata.name: Invalid value: "{name}": must be spec.names.plural+"."+spec.group'
    return None
