"""The review APIs kube-apiserver serves without storing anything: "may I?" and "who am I?".

- `authorization.k8s.io/v1` SelfSubjectAccessReview (`kubectl auth can-i VERB RESOURCE`),
  SelfSubjectRulesReview (`kubectl auth can-i --list`), SubjectAccessReview (cluster-wide, for
  another user: an admin asking about someone) and LocalSubjectAccessReview (the same, in one
  namespace);
- `authentication.k8s.io/v1` SelfSubjectReview (`kubectl auth whoami`).

Each is decided by the same authorizer that decides real requests (`rbac.RbacAuthorizer`), for the
caller or for the user the review names, so `can-i` answers exactly what a request would meet. The
answer is the posted object with its `status` filled in, `201 Created`, as the registries in
`pkg/registry/authorization/*` and `pkg/registry/authentication/selfsubjectreview` answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import errors
from .auth import Attributes, User
from .errors import ApiError
from .rbac import RbacAuthorizer

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
# group -> version -> (plural, kind, namespaced)
RESOURCES: dict[str, dict[str, tuple[tuple[str, str, bool], ...]]] = {
    AUTHORIZATION: {"v1": (
        ("localsubjectaccessreviews", "LocalSubjectAccessReview", True),
        ("selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
        ("selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
        ("subjectaccessreviews", "SubjectAccessReview", False),
    )},
    AUTHENTICATION: {"v1": (("selfsubjectreviews", "SelfSubjectReview", False),)},
}


def groups() -> dict[str, list[str]]:
    """The review groups and their versions, for `/apis` discovery."""
    return {group: list(versions) for group, versions in RESOURCES.items()}


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    """The APIResourceList of a review group-version (only `create` is served), or None."""
    entries = RESOURCES.get(group, {}).get(version)
    if entries is None:
        return None
    resources = [{"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                  "verbs": ["create"]} for plural, kind, namespaced in entries]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
            "resources": resources}


def review_path(path: str) -> tuple[str, str, str, str] | None:
    """(group, version, plural, namespace) when `path` is a review collection, else None."""
    parts = [p for p in path.split("/") if p]
    if len(parts) < 4 or parts[0] != "apis" or parts[1] not in RESOURCES:
        return None
    group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    if len(rest) == 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if len(rest) != 1:
        return None
    for plural, _kind, namespaced in RESOURCES[group].get(version, ()):
        if plural == rest[0] and namespaced == bool(namespace):
            return group, version, plural, namespace
    return None


# --------------------------------------------------------------------------------- protobuf bodies
# kubectl's typed clients send built-in kinds as protobuf (and accept JSON back); a review's body is
# decoded from the fields `k8s.io/api/authorization/v1/generated.proto` numbers, nothing more.
PROTOBUF = "application/vnd.kubernetes.protobuf"
_PROTOBUF_MAGIC = b"k8s\x00"
_Schema = dict[int, tuple[str, Any]]  # field number -> (JSON name, "str" | "strs" | a nested schema)
_RESOURCE_ATTRIBUTES: _Schema = {1: ("namespace", "str"), 2: ("verb", "str"), 3: ("group", "str"),
                                 4: ("version", "str"), 5: ("resource", "str"), 6: ("subresource", "str"),
                                 7: ("name", "str")}
_NON_RESOURCE_ATTRIBUTES: _Schema = {1: ("path", "str"), 2: ("verb", "str")}
_ACCESS_SPEC: _Schema = {1: ("resourceAttributes", _RESOURCE_ATTRIBUTES),
                         2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES),
                         3: ("user", "str"), 4: ("groups", "strs"), 6: ("uid", "str")}
_SPECS: dict[str, _Schema] = {
    "selfsubjectaccessreviews": _ACCESS_SPEC, "subjectaccessreviews": _ACCESS_SPEC,
    "localsubjectaccessreviews": _ACCESS_SPEC, "selfsubjectrulesreviews": {1: ("namespace", "str")},
    "selfsubjectreviews": {},
}
_UNKNOWN: _Schema = {1: ("typeMeta", {1: ("apiVersion", "str"), 2: ("kind", "str")}), 2: ("raw", "bytes")}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _message(data: bytes, schema: _Schema) -> dict[str, Any]:
    """The fields of one protobuf message that `schema` names (others are skipped by wire type)."""
    out: dict[str, Any] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, at = _varint(data, at)
            continue
        if wire in (1, 5):
            at += 8 if wire == 1 else 4
            continue
        if wire != 2:
            raise ValueError(f"unsupported wire type {wire}")
        length, at = _varint(data, at)
        chunk, at = data[at:at + length], at + length
        if len(chunk) != length:
            raise ValueError("truncated field")
        if number not in schema:
            continue
        name, kind = schema[number]
        if kind == "bytes":
            out[name] = chunk
        elif kind == "str":
            out[name] = chunk.decode("utf-8")
        elif kind == "strs":
            out.setdefault(name, []).append(chunk.decode("utf-8"))
        else:
            out[name] = _message(chunk, kind)
    return out


def decode_protobuf(raw: bytes, plural: str) -> dict[str, Any]:
    """A review posted as `application/vnd.kubernetes.protobuf`, as the JSON object it stands for."""
    if not raw.startswith(_PROTOBUF_MAGIC):
        raise errors.bad_request("the request body is not valid application/vnd.kubernetes.protobuf: no k8s prefix")
    try:
        envelope = _message(raw[len(_PROTOBUF_MAGIC):], _UNKNOWN)
        body = _message(envelope.get("raw", b""), {2: ("spec", _SPECS[plural])})
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"the request body is not valid application/vnd.kubernetes.protobuf: {exc}") from exc
    type_meta = envelope.get("typeMeta") or {}
    return {"kind": type_meta.get("kind") or None, "spec": body.get("spec") or {}}


def _invalid(kind: str, field: str, message: str) -> ApiError:
    return errors.invalid(kind, "", "", field, message)


def _attributes(kind: str, spec: Mapping[str, Any], namespace: str = "") -> Attributes:
    """The authorizer attributes a review's spec asks about (`authorizationutil.ResourceAttributesFrom`)."""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        # ValidateSelfSubjectAccessReviewSpec: exactly one of the two.
        message = ("Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be "
                   "specified")
        raise _invalid(kind, "spec.resourceAttributes", message)
    if resource:
        if not isinstance(resource, dict):
            raise _invalid(kind, "spec.resourceAttributes", "Invalid value: must be an object")
        if namespace and resource.get("namespace", "") != namespace:
            # ValidateLocalSubjectAccessReview: the namespace asked about is the URL's.
            raise _invalid(kind, "spec.resourceAttributes.namespace",
                           f"Invalid value: {resource.get('namespace', '')!r}: must match metadata.namespace")
        return Attributes(
            verb=str(resource.get("verb") or ""), path="", resource_request=True,
            api_group=str(resource.get("group") or ""), api_version=str(resource.get("version") or ""),
            namespace=str(resource.get("namespace") or ""), resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""), name=str(resource.get("name") or ""),
        )
    if not isinstance(non_resource, dict):
        raise _invalid(kind, "spec.nonResourceAttributes", "Invalid value: must be an object")
    return Attributes(verb=str(non_resource.get("verb") or ""), path=str(non_resource.get("path") or ""),
                      resource_request=False)


def _decision(authorizer: RbacAuthorizer, user: User, attrs: Attributes) -> dict[str, Any]:
    allowed, reason = authorizer.decide(user, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return status


def _answer(body: dict[str, Any], group: str, version: str, kind: str, status: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(body.get("metadata") or {}) if isinstance(body.get("metadata"), dict) else {}
    metadata.setdefault("creationTimestamp", None)
    return {"kind": kind, "apiVersion": f"{group}/{version}", "metadata": metadata,
            "spec": body.get("spec") or {}, "status": status}


def _user_from_spec(spec: Mapping[str, Any], known: Mapping[str, User]) -> User:
    """The user a SubjectAccessReview asks about: its name and groups as given (kube adds none)."""
    name = spec.get("user") or ""
    given = tuple(str(g) for g in spec.get("groups") or ())
    if not name and not given:
        # ValidateSubjectAccessReviewSpec
        raise _invalid("SubjectAccessReview", "spec.user", "Invalid value: \"\": at least one of user or group "
                       "must be specified")
    # EKS's authorizer webhook decides by the user's access entry, whatever groups the review names.
    policies = next((u.access_policies for u in known.values() if u.name == name), ())
    return User(str(name), given, policies)


def rules_status(authorizer: RbacAuthorizer, user: User, namespace: str) -> dict[str, Any]:
    """A SelfSubjectRulesReview's status: every rule that applies to `user` in `namespace`."""
    resource_rules, non_resource_rules, problems = authorizer.rules_for(user, namespace)
    status: dict[str, Any] = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                              "incomplete": bool(problems)}
    if problems:
        status["evaluationError"] = ", ".join(problems)
    return status


def review(
    authorizer: RbacAuthorizer, caller: User, known: Mapping[str, User], group: str, version: str, plural: str,
    namespace: str, body: Any,
) -> dict[str, Any]:
    """The answer to a review POSTed by `caller` (already authorized to create it)."""
    kind = next(k for p, k, _ in RESOURCES[group][version] if p == plural)
    if not isinstance(body, dict):
        raise errors.bad_request(f"the request body must be a {kind} object")
    if body.get("kind") not in (None, kind):
        raise errors.bad_request(f"the kind of the provided object ({body.get('kind')}) does not match the "
                                 f"resource ({kind})")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise _invalid(kind, "spec", "Invalid value: must be an object")
    if plural == "selfsubjectreviews":
        user_info: dict[str, Any] = {"username": caller.name, "groups": list(caller.groups)}
        return _answer(body, group, version, kind, {"userInfo": user_info})
    if plural == "selfsubjectrulesreviews":
        if not spec.get("namespace"):
            raise _invalid(kind, "spec.namespace", "Required value")
        return _answer(body, group, version, kind, rules_status(authorizer, caller, str(spec["namespace"])))
    if plural == "selfsubjectaccessreviews":
        return _answer(body, group, version, kind, _decision(authorizer, caller, _attributes(kind, spec)))
    subject = _user_from_spec(spec, known)
    return _answer(body, group, version, kind, _decision(authorizer, subject, _attributes(kind, spec, namespace)))
