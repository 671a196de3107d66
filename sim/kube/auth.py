"""Who is asking, and what for: authentication by bearer token and kube-apiserver's request attributes.

Each identity sim writes a kubeconfig for has its own token (`sim.aws.constants`): the admin
(`system:masters`, what tests, fixtures and kubectl use), the functions (the group
`infra/manifests/rbac.yaml` binds) and the stack's RBAC function (`-c applyRbac=true`: no group, an EKS
access policy). A request without a token is anonymous only on the health
endpoints, as kube-apiserver's anonymous authenticator is configured to allow on EKS-like clusters
(`anonymous.conditions`: /healthz, /livez, /readyz); anywhere else, and with an unknown token, the
answer is 401 Unauthorized.

`request_attributes` turns a method, path and query into the attributes the authorizer sees,
following kube-apiserver's `RequestInfoFactory`: the verb (a GET of a collection is `list`, with
`watch=true` it is `watch`, a DELETE of a collection `deletecollection`), the API group, namespace,
resource, subresource and name, or a non-resource path (discovery, /version, /healthz).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sim.aws.constants import (
    KUBE_ADMIN_TOKEN,
    KUBE_FUNCTIONS_GROUP,
    KUBE_FUNCTIONS_TOKEN,
    KUBE_FUNCTIONS_USER,
    KUBE_RBAC_APPLIER_ACCESS_POLICY,
    KUBE_RBAC_APPLIER_TOKEN,
    KUBE_RBAC_APPLIER_USER,
)

from .errors import ApiError

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
ANONYMOUS_USER = "system:anonymous"
ADMIN_USER = "sim-admin"
# Paths an unauthenticated client may still ask for (and RBAC then decides, via system:public-info-viewer).
ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    # EKS access policies associated with the user's access entry (see `rbac.ACCESS_POLICIES`).
    access_policies: tuple[str, ...] = ()


ADMIN = User(ADMIN_USER, (MASTERS, AUTHENTICATED))
FUNCTIONS = User(KUBE_FUNCTIONS_USER, (KUBE_FUNCTIONS_GROUP, AUTHENTICATED))
RBAC_APPLIER = User(KUBE_RBAC_APPLIER_USER, (AUTHENTICATED,), (KUBE_RBAC_APPLIER_ACCESS_POLICY,))
ANONYMOUS = User(ANONYMOUS_USER, (UNAUTHENTICATED,))
TOKENS: dict[str, User] = {KUBE_ADMIN_TOKEN: ADMIN, KUBE_FUNCTIONS_TOKEN: FUNCTIONS, KUBE_RBAC_APPLIER_TOKEN: RBAC_APPLIER}


def unauthorized() -> ApiError:
    """kube-apiserver's answer to a request it cannot authenticate."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def authenticate(authorization: str | None, path: str, tokens: Mapping[str, User] = TOKENS) -> User:
    """The user behind an `Authorization` header, or a 401 `ApiError`."""
    if not authorization:
        if path in ANONYMOUS_PATHS:
            return ANONYMOUS
        raise unauthorized()
    scheme, _, token = authorization.strip().partition(" ")
    user = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise unauthorized()
    return user


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, as kube-apiserver's authorizers see it."""

    verb: str
    path: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


_SPECIAL_VERBS = ("proxy", "watch")
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def query_bool(value: str | None) -> bool:
    """A boolean query parameter as kube-apiserver decodes it (apimachinery's
    `Convert_Slice_string_To_bool`): absent, "0" or any case of "false" is false; anything else,
    "yes" and the empty string included, is true."""
    return value is not None and value != "0" and value.lower() != "false"


def _name_from_field_selector(selector: str) -> str:
    """`metadata.name=x` (or `==`) in a field selector names the object a list or watch is about."""
    for term in selector.split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and "!" not in key:
                return value.strip()
    return ""


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request, as kube-apiserver's `RequestInfoFactory.NewRequestInfo` works them out."""
    non_resource = Attributes(verb=method.lower(), path=path, resource_request=False)
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(parts) < 3:
            return non_resource
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    if parts and parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            return non_resource
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), method.lower())
    namespace = ""
    if parts and parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0] if parts else ""
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 else ""
    if not name and verb == "get":
        verb = "watch" if query_bool(query.get("watch")) else "list"
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        verb=verb, path=path, resource_request=True, api_group=group, api_version=version,
        namespace=namespace, resource=resource, subresource=subresource, name=name,
    )
