"""The OpenAPI documents kube-apiserver serves, made from what sim knows.

kubectl reads them before it sends anything: `kubectl apply` (whose `--validate` is `strict` by
default) fetches `/openapi/v3`, then the document of the object's group-version, and looks for a
PATCH operation for the object's group-version-kind that takes a `fieldValidation` query parameter.
When it finds one it leaves validation to the server (and sends `fieldValidation=Strict`); otherwise
it falls back to `/openapi/v2` and validates on the client. `kubectl explain` reads the same v3
documents' schemas, found by their `x-kubernetes-group-version-kind`.

The built-in kinds' schemas are made from the official `kubernetes` Python client's models: each
model class lists its fields (`attribute_map`: the JSON names) and their types (`openapi_types`),
which is the OpenAPI schema without its descriptions. They are built once per process. A custom
resource's schema is its CRD's `openAPIV3Schema` for that version, with the standard `apiVersion`,
`kind` and `metadata` fields; its documents are rebuilt only when the CRD changes.

`unknown_fields` walks an object against these schemas as kube-apiserver's strict decoding does, so
that `fieldValidation=Strict` refuses what kube-apiserver refuses.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from kubernetes.client import models

from .patches import MERGE_KEYS, MERGED_SCALAR_LISTS
from .resources import BUILTINS, ResourceType

SERVER_GIT_VERSION = "v1.31.0-eks-sim"
V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# The apimachinery types every group uses (the Python client names them V1<Kind>, like the group types).
_META_MODELS = frozenset({
    "V1ObjectMeta", "V1ListMeta", "V1LabelSelector", "V1LabelSelectorRequirement", "V1OwnerReference",
    "V1ManagedFieldsEntry", "V1Condition", "V1Status", "V1StatusDetails", "V1StatusCause", "V1DeleteOptions",
    "V1Preconditions", "V1APIResource", "V1APIResourceList", "V1APIGroup", "V1APIGroupList",
    "V1GroupVersionForDiscovery", "V1ServerAddressByClientCIDR", "V1WatchEvent",
})
_GROUP_PACKAGES = {
    "": "io.k8s.api.core", "apps": "io.k8s.api.apps", "batch": "io.k8s.api.batch", "policy": "io.k8s.api.policy",
    "coordination.k8s.io": "io.k8s.api.coordination", "events.k8s.io": "io.k8s.api.events",
    "storage.k8s.io": "io.k8s.api.storage", "rbac.authorization.k8s.io": "io.k8s.api.rbac",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}
# Fields the client types as `object` that kube-apiserver's schema types as IntOrString.
_INT_OR_STRING_FIELDS = frozenset({"maxSurge", "maxUnavailable", "minAvailable", "port", "targetPort"})
_MODEL_PREFIX = re.compile(r"^(?:[A-Z][a-z]+)*?V\d+(?:(?:alpha|beta)\d+)?(?=[A-Z])")
_LIST = re.compile(r"^(?:List|list)\[(.+)\]$")
_DICT = re.compile(r"^(?:Dict|dict)\[str, (.+)\]$|^dict\(str, (.+)\)$")
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"}, "int": {"type": "integer", "format": "int64"}, "bool": {"type": "boolean"},
    "float": {"type": "number", "format": "double"}, "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"}, "bytes": {"type": "string", "format": "byte"},
}
_INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}


# ------------------------------------------------------------------------------------------- built-in models


def model_class_name(rt: ResourceType) -> str | None:
    """The Python client's model for a built-in kind (`V1Pod`, `CoreV1Event`, `EventsV1Event`)."""
    version = rt.version[0].upper() + rt.version[1:]
    prefix = (rt.group.split(".")[0] or "core").capitalize()
    for candidate in (f"{prefix}{version}{rt.kind}", f"{version}{rt.kind}"):
        if isinstance(getattr(models, candidate, None), type):
            return candidate
    return None


class _ModelCatalog:
    """Schemas of the client's models, named as kube-apiserver names its definitions."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # model class -> definition name
        self.deps: dict[str, set[str]] = {}  # model class -> model classes it refers to
        self.roots: dict[tuple[str, str, str], str] = {}  # (group, version, kind) -> model class
        # Core first (PodTemplate among it, for PodTemplateSpec), so shared types land in core.
        for group, version, kind in [(rt.group, rt.version, rt.kind) for rt in BUILTINS]:
            rt = ResourceType(group, version, "", kind, True)
            model = model_class_name(rt)
            if model is None:
                continue
            self.roots[(group, version, kind)] = model
            self._walk(model, _GROUP_PACKAGES.get(group, "io.k8s.api." + group.split(".")[0]) + "." + version)

    def _walk(self, model: str, package: str) -> None:
        stack = [model]
        while stack:
            name = stack.pop()
            if name in self.names:
                continue
            short = _MODEL_PREFIX.sub("", name)
            self.names[name] = (_META if name in _META_MODELS else package + ".") + short
            refs = {ref for t in getattr(models, name).openapi_types.values() for ref in _model_refs(t)}
            self.deps[name] = refs
            stack.extend(sorted(refs - self.names.keys()))

    def closure(self, models_: Iterable[str]) -> list[str]:
        seen: set[str] = set()
        stack = list(models_)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(self.deps.get(name, ()))
        return sorted(seen)

    def schema(self, model: str, prefix: str) -> dict[str, Any]:
        cls = getattr(models, model)
        properties = {
            cls.attribute_map[attr]: self._type_schema(t, prefix, cls.attribute_map[attr])
            for attr, t in cls.openapi_types.items()
        }
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        gvks = [{"group": g, "version": v, "kind": k} for (g, v, k), m in self.roots.items() if m == model]
        if gvks:
            schema["x-kubernetes-group-version-kind"] = gvks
        return schema

    def _type_schema(self, type_name: str, prefix: str, field: str = "") -> dict[str, Any]:
        if type_name in _SCALARS:
            return dict(_SCALARS[type_name])
        if type_name == "object":
            return dict(_INT_OR_STRING) if field in _INT_OR_STRING_FIELDS else {}
        if match := _LIST.match(type_name):
            schema = {"type": "array", "items": self._type_schema(match.group(1), prefix)}
            # The strategic-merge-patch metadata kubectl apply's three-way diff reads (the same lists sim merges).
            if field in MERGE_KEYS and _model_refs(match.group(1)):
                schema.update({"x-kubernetes-patch-merge-key": MERGE_KEYS[field], "x-kubernetes-patch-strategy": "merge"})
            elif field in MERGED_SCALAR_LISTS:
                schema["x-kubernetes-patch-strategy"] = "merge"
            return schema
        if match := _DICT.match(type_name):
            return {"type": "object", "additionalProperties": self._type_schema(match.group(1) or match.group(2), prefix)}
        return {"$ref": prefix + self.names[type_name]}


def _model_refs(type_name: str) -> list[str]:
    if match := _LIST.match(type_name):
        return _model_refs(match.group(1))
    if match := _DICT.match(type_name):
        return _model_refs(match.group(1) or match.group(2))
    return [type_name] if type_name not in _SCALARS and type_name != "object" else []


@lru_cache(maxsize=1)
def catalog() -> _ModelCatalog:
    return _ModelCatalog()


def builtin_definitions(prefix: str, model_names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Definitions (by their kube-apiserver names) of the given models and everything they refer to."""
    cat = catalog()
    wanted = cat.closure(model_names if model_names is not None else cat.roots.values())
    return {cat.names[m]: cat.schema(m, prefix) for m in wanted}


# ------------------------------------------------------------------------------------------- custom resources


def crd_schema(crd: dict[str, Any], version: str, prefix: str) -> dict[str, Any] | None:
    """A custom resource's schema for one served version, as kube-apiserver publishes it."""
    spec = crd.get("spec") or {}
    for entry in spec.get("versions") or []:
        if entry.get("name") != version or not entry.get("served", True):
            continue
        schema = json.loads(json.dumps(((entry.get("schema") or {}).get("openAPIV3Schema")) or {"type": "object"}))
        properties = schema.setdefault("properties", {})
        properties["apiVersion"] = {"type": "string"}
        properties["kind"] = {"type": "string"}
        properties["metadata"] = {"$ref": prefix + _META + "ObjectMeta"}
        schema["x-kubernetes-group-version-kind"] = [
            {"group": spec.get("group", ""), "version": version, "kind": (spec.get("names") or {}).get("kind", "")}
        ]
        return schema
    return None


def crd_definition_name(rt: ResourceType) -> str:
    """`sh.karpenter.v1.NodePool` for karpenter.sh/v1 NodePool: the group reversed, then version and kind."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


# ------------------------------------------------------------------------------------------- paths


def _parameter(name: str, where: str, v3: bool, required: bool = False, kind: str = "string") -> dict[str, Any]:
    param: dict[str, Any] = {"name": name, "in": where}
    if required:
        param["required"] = True
    if v3:
        param["schema"] = {"type": kind, "uniqueItems": True}
    else:
        param["type"] = kind
        param["uniqueItems"] = True
    return param


def _operation(rt: ResourceType, action: str, ref: str, v3: bool) -> dict[str, Any]:
    scope = "Namespaced" if rt.namespaced else ""
    group = (rt.group.split(".")[0] or "core").capitalize()
    verb = {"get": "read", "put": "replace", "post": "create"}.get(action, action)
    operation_id = f"{verb}{group}{rt.version.capitalize()}{scope}{rt.kind}"
    params = [_parameter("pretty", "query", v3)]
    if action in ("post", "put", "patch"):
        params += [_parameter(n, "query", v3) for n in ("dryRun", "fieldManager", "fieldValidation")]
    if action == "patch":
        params.append(_parameter("force", "query", v3, kind="boolean"))
    if action == "list":
        params += [_parameter(n, "query", v3) for n in ("labelSelector", "fieldSelector", "continue")]
        params.append(_parameter("limit", "query", v3, kind="integer"))
    schema = {"$ref": ref}
    response = {"description": "OK"}
    if v3:
        response["content"] = {"application/json": {"schema": schema}}
    else:
        response["schema"] = schema
    verbs = {"get": "get", "list": "list", "post": "post", "put": "put", "patch": "patch", "delete": "delete"}
    operation: dict[str, Any] = {
        "operationId": operation_id, "parameters": params, "responses": {"200": response},
        "x-kubernetes-action": verbs[action],
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    }
    if action in ("post", "put", "patch") and v3:
        media = ["application/json"] if action != "patch" else [
            "application/json-patch+json", "application/merge-patch+json",
            "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
        operation["requestBody"] = {"content": {m: {"schema": schema if action != "patch" else {}} for m in media},
                                    "required": True}
    return operation


def resource_paths(rt: ResourceType, ref: str, v3: bool) -> dict[str, Any]:
    """The collection's and the object's paths of one resource, with the operations sim serves."""
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else "/api/v1"
    collection = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    path_params = [_parameter("namespace", "path", v3, required=True)] if rt.namespaced else []
    return {
        collection: {
            "get": _operation(rt, "list", ref, v3), "post": _operation(rt, "post", ref, v3),
            "parameters": path_params,
        },
        collection + "/{name}": {
            **{verb: _operation(rt, verb, ref, v3) for verb in ("get", "put", "patch", "delete")},
            "parameters": [_parameter("name", "path", v3, required=True), *path_params],
        },
    }


# ------------------------------------------------------------------------------------------- documents


def _digest(doc: dict[str, Any]) -> tuple[bytes, str]:
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return text, hashlib.sha512(text).hexdigest().upper()[:128]


def gv_path(group: str, version: str) -> str:
    """The key of a group-version in `/openapi/v3`: `api/v1`, `apis/apps/v1`."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


class OpenApiDocuments:
    """Builds, caches and serves the v2 document and the v3 index and per-group-version documents.

    `resources` lists the served resource types; `crds` lists the stored CRDs. Both are called per
    request (cheap); a document is rebuilt only when what it is made of changed.
    """

    def __init__(self, resources: Callable[[], list[ResourceType]], crds: Callable[[], list[dict[str, Any]]]) -> None:
        self._resources = resources
        self._crds = crds
        self._lock = threading.Lock()
        self._cache: dict[Any, tuple[bytes, str, dict[str, Any]]] = {}

    def _cached(self, key: Any, build: Callable[[], dict[str, Any]]) -> tuple[bytes, str, dict[str, Any]]:
        with self._lock:
            hit = self._cache.get(key)
        if hit is None:
            doc = build()
            hit = (*_digest(doc), doc)
            with self._lock:
                if len(self._cache) > 256:
                    self._cache.clear()
                self._cache[key] = hit
        return hit

    def _crd_fingerprint(self, group: str | None = None) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(
            ((c.get("metadata") or {}).get("name", ""), (c.get("metadata") or {}).get("resourceVersion", ""))
            for c in self._crds() if group is None or (c.get("spec") or {}).get("group") == group
        ))

    def group_versions(self) -> list[tuple[str, str]]:
        return sorted({(rt.group, rt.version) for rt in self._resources()})

    def v3_index(self) -> bytes:
        """`/openapi/v3`: every group-version's document, by a URL that changes when the document does."""
        paths = {}
        for group, version in self.group_versions():
            _, digest, _ = self._v3(group, version) or (b"", "", {})
            paths[gv_path(group, version)] = {"serverRelativeURL": f"/openapi/v3/{gv_path(group, version)}?hash={digest}"}
        return json.dumps({"paths": paths}, separators=(",", ":")).encode()

    def v3_document(self, group: str, version: str) -> bytes | None:
        """One group-version's OpenAPI 3.0 document (JSON), or None when it is not served."""
        found = self._v3(group, version)
        return found[0] if found else None

    def _v3(self, group: str, version: str) -> tuple[bytes, str, dict[str, Any]] | None:
        served = [rt for rt in self._resources() if rt.group == group and rt.version == version]
        if not served:
            return None
        key = ("v3", group, version, tuple(sorted(rt.key for rt in served)), self._crd_fingerprint(group))
        return self._cached(key, lambda: self._build_v3(served))

    def v2_document(self) -> bytes:
        """`/openapi/v2` (JSON): every definition and path."""
        served = self._resources()
        key = ("v2", tuple(sorted(rt.key for rt in served)), self._crd_fingerprint())
        return self._cached(key, lambda: self._build_v2(served))[0]

    def _schemas(self, served: list[ResourceType], prefix: str) -> tuple[dict[str, Any], dict[str, str]]:
        """Definitions for the served types, and each type's definition name."""
        cat = catalog()
        roots = {rt.key: cat.roots[(rt.group, rt.version, rt.kind)] for rt in served
                 if rt.builtin and (rt.group, rt.version, rt.kind) in cat.roots}
        definitions = builtin_definitions(prefix, roots.values())
        names = {key: cat.names[model] for key, model in roots.items()}
        crds = {
            ((c.get("spec") or {}).get("group"), ((c.get("spec") or {}).get("names") or {}).get("plural")): c
            for c in self._crds()
        }
        custom = [rt for rt in served if not rt.builtin]
        for rt in custom:
            schema = crd_schema(crds.get((rt.group, rt.plural)) or {}, rt.version, prefix)
            if schema is not None:
                names[rt.key] = crd_definition_name(rt)
                definitions[names[rt.key]] = schema
        if custom:
            definitions.update(builtin_definitions(prefix, ["V1ObjectMeta"]))
        return definitions, names

    def _build_v3(self, served: list[ResourceType]) -> dict[str, Any]:
        schemas, names = self._schemas(served, V3_PREFIX)
        paths: dict[str, Any] = {}
        for rt in sorted(served, key=lambda r: r.plural):
            if rt.key in names:
                paths.update(resource_paths(rt, V3_PREFIX + names[rt.key], v3=True))
        return {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": SERVER_GIT_VERSION.split("-")[0]},
            "paths": paths,
            "components": {"schemas": schemas},
        }

    def _build_v2(self, served: list[ResourceType]) -> dict[str, Any]:
        definitions, names = self._schemas(served, V2_PREFIX)
        paths: dict[str, Any] = {}
        for rt in sorted(served, key=lambda r: r.key):
            if rt.key in names:
                paths.update(resource_paths(rt, V2_PREFIX + names[rt.key], v3=False))
        return {
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": SERVER_GIT_VERSION.split("-")[0]},
            "paths": paths,
            "definitions": definitions,
        }

    def schema_for(self, rt: ResourceType) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The v3 schema of a served type and the components its references resolve in."""
        found = self._v3(rt.group, rt.version)
        if found is None:
            return None
        doc = found[2]
        for operations in doc["paths"].values():
            patch = operations.get("patch")
            if patch and patch["x-kubernetes-group-version-kind"]["kind"] == rt.kind:
                ref = patch["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
                schemas = doc["components"]["schemas"]
                return schemas[ref.removeprefix(V3_PREFIX)], schemas
        return None
