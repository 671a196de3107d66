"""kube-apiserver's RBAC authorizer over the Roles, ClusterRoles and bindings in a `Store`.

The rules are read from the store on every request, so a test (as the admin) can add or remove a
rule through the API and the next request is decided by it. Semantics follow
`plugin/pkg/auth/authorizer/rbac` and `pkg/apis/rbac/v1/evaluation_helpers.go`:

- ClusterRoleBindings grant their ClusterRole's rules everywhere; a RoleBinding grants its Role's or
  ClusterRole's rules in its own namespace only;
- subjects: `User` by name, `Group` by membership, `ServiceAccount` as
  `system:serviceaccount:<namespace>:<name>` (a RoleBinding's own namespace when the subject gives none);
- a rule matches on verbs (`*`), API groups (`*`), resources (`*`, `pods/eviction`, `*/scale`; a bare
  `pods` does not cover `pods/eviction`) and, when it lists any, resourceNames (so never a list, watch or
  create that names no object); non-resource rules match URLs exactly or by a trailing `*`;
- `system:masters` is allowed everything before RBAC is asked, as kube-apiserver's privileged-groups
  authorizer does;
- a user whose EKS access entry has access policies is allowed what their rules allow, as EKS's
  authorizer webhook does beside RBAC (`ACCESS_POLICIES`: the ones sim's identities use).

A denial is a 403 `Status` worded as kube-apiserver's `responsewriters.Forbidden` words it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .auth import AUTHENTICATED, MASTERS, UNAUTHENTICATED, Attributes, User
from .errors import ApiError, qualified
from .selectors import compile_label_selector_object
from .store import Store

GROUP = "rbac.authorization.k8s.io"
ROLES = f"{GROUP}/v1/roles"
CLUSTER_ROLES = f"{GROUP}/v1/clusterroles"
ROLE_BINDINGS = f"{GROUP}/v1/rolebindings"
CLUSTER_ROLE_BINDINGS = f"{GROUP}/v1/clusterrolebindings"
_RESOURCE_OF_KIND = {
    "Role": ROLES, "ClusterRole": CLUSTER_ROLES, "RoleBinding": ROLE_BINDINGS,
    "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
}


# ------------------------------------------------------------------------------------------- matching


def _verb_matches(rule: dict[str, Any], verb: str) -> bool:
    return any(v in ("*", verb) for v in rule.get("verbs") or ())


def _group_matches(rule: dict[str, Any], group: str) -> bool:
    return any(g in ("*", group) for g in rule.get("apiGroups") or ())


def _resource_matches(rule: dict[str, Any], combined: str, subresource: str) -> bool:
    for resource in rule.get("resources") or ():
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _name_matches(rule: dict[str, Any], name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def _url_matches(rule: dict[str, Any], path: str) -> bool:
    for url in rule.get("nonResourceURLs") or ():
        if url in ("*", path):
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    """Whether one PolicyRule covers the request (kube's `RuleAllows`)."""
    if not isinstance(rule, dict):
        return False
    if attrs.resource_request:
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        return (
            _verb_matches(rule, attrs.verb)
            and _group_matches(rule, attrs.api_group)
            and _resource_matches(rule, combined, attrs.subresource)
            and _name_matches(rule, attrs.name)
        )
    return _verb_matches(rule, attrs.verb) and _url_matches(rule, attrs.path)


def _subject_applies(subject: dict[str, Any], user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == f"system:serviceaccount:{namespace}:{name}"
    return False


def _applying_subject(binding: dict[str, Any], user: User, namespace: str) -> dict[str, Any] | None:
    """The first of the binding's subjects that is `user` (kube's `appliesTo`), or None."""
    for subject in binding.get("subjects") or ():
        if isinstance(subject, dict) and _subject_applies(subject, user, namespace):
            return subject
    return None


def _describe(binding: dict[str, Any], subject: dict[str, Any], namespace: str) -> str:
    """Which binding granted a request, worded as kube's `clusterRoleBindingDescriber` and
    `roleBindingDescriber` word it in an allow's reason."""
    ref = binding.get("roleRef") or {}
    name = (binding.get("metadata") or {}).get("name", "")
    if subject.get("kind") == "ServiceAccount":
        who = f'ServiceAccount {json.dumps(subject.get("name", "") + "/" + (subject.get("namespace") or namespace))}'
    else:
        who = f'{subject.get("kind")} {json.dumps(subject.get("name", ""))}'
    if namespace:
        return (f'RoleBinding {json.dumps(name + "/" + namespace)} of {ref.get("kind")} '
                f'{json.dumps(ref.get("name", ""))} to {who}')
    return f'ClusterRoleBinding {json.dumps(name)} of {ref.get("kind")} {json.dumps(ref.get("name", ""))} to {who}'


# ------------------------------------------------------------------------------------------ authorizer

# EKS access policies (Amazon EKS User Guide, "Review access policy permissions"), by name: their rules.
ACCESS_POLICIES: dict[str, tuple[dict[str, Any], ...]] = {
    "AmazonEKSClusterAdminPolicy": (
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ),
}


class RbacAuthorizer:
    """Decides each request from the RBAC objects in `store`, read live."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _role_rules(self, ref: dict[str, Any], namespace: str, errors: list[str]) -> list[Any]:
        kind, name = ref.get("kind"), ref.get("name") or ""
        if kind == "ClusterRole":
            role = self.store.peek(CLUSTER_ROLES, name)
            missing = f'clusterrole.{GROUP} "{name}" not found'
        elif kind == "Role" and namespace:
            role = self.store.peek(ROLES, name, namespace)
            missing = f'role.{GROUP} "{name}" not found'
        else:
            return []
        if role is None:
            errors.append(missing)
            return []
        return list(role.get("rules") or [])

    def _rules(self, user: User, namespace: str, errors: list[str]) -> Iterator[tuple[str, list[Any]]]:
        """(which binding, its rule list) for each binding that applies to `user` in `namespace`
        (cluster-wide ones first), as kube's `VisitRulesFor` visits them."""
        for binding in self.store.snapshot(CLUSTER_ROLE_BINDINGS):
            subject = _applying_subject(binding, user, "")
            if subject is not None:
                yield _describe(binding, subject, ""), self._role_rules(binding.get("roleRef") or {}, "", errors)
        if namespace:
            for binding in self.store.snapshot(ROLE_BINDINGS, namespace):
                subject = _applying_subject(binding, user, namespace)
                if subject is not None:
                    rules = self._role_rules(binding.get("roleRef") or {}, namespace, errors)
                    yield _describe(binding, subject, namespace), rules

    def decide(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) as a SubjectAccessReview reports them: an allow names the binding that
        granted it ("RBAC: allowed by ..."); a denial lists bindings whose role is missing."""
        if MASTERS in user.groups:
            return True, ""  # the privileged-group authorizer gives no reason
        if any(rule_allows(rule, attrs) for policy in user.access_policies for rule in ACCESS_POLICIES[policy]):
            return True, ""
        errors: list[str] = []
        with self.store.lock:
            for source, rules in self._rules(user, attrs.namespace, errors):
                if any(rule_allows(rule, attrs) for rule in rules):
                    return True, f"RBAC: allowed by {source}"
        unique = list(dict.fromkeys(errors))
        if not unique:
            return False, ""
        return False, "RBAC: " + (unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]")

    def allowed(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the reason lists bindings whose role is missing, as kube's RBAC reports them."""
        allowed, reason = self.decide(user, attrs)
        return allowed, "" if allowed else reason

    def rules_for(self, user: User, namespace: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        """(resource rules, non-resource rules, errors) that apply to `user` in `namespace`, as kube's
        `RulesFor` collects them for a SelfSubjectRulesReview (EKS access policies included)."""
        errors: list[str] = []
        rules: list[Any] = [dict(r) for policy in user.access_policies for r in ACCESS_POLICIES[policy]]
        with self.store.lock:
            for _source, found in self._rules(user, namespace, errors):
                rules.extend(found)
        resource_rules, non_resource_rules = [], []
        for rule in rules:
            if not isinstance(rule, dict):
                continue
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
            else:
                entry = {k: list(rule.get(k) or []) for k in ("verbs", "apiGroups", "resources", "resourceNames")
                         if rule.get(k) or k == "verbs"}
                resource_rules.append(entry)
        return resource_rules, non_resource_rules, list(dict.fromkeys(errors))

    def authorize(self, user: User, attrs: Attributes) -> None:
        """Nothing when allowed; a 403 `ApiError` worded as kube-apiserver words it when not."""
        allowed, reason = self.allowed(user, attrs)
        if not allowed:
            raise forbidden(user, attrs, reason)


def forbidden_message(user: User, attrs: Attributes) -> str:
    """kube-apiserver's `forbiddenMessage`."""
    if not attrs.resource_request:
        return f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'


def forbidden(user: User, attrs: Attributes, reason: str = "") -> ApiError:
    """The 403 `Status` of `apierrors.NewForbidden(groupResource, name, message)`."""
    message = forbidden_message(user, attrs)
    if reason:
        message = f"{message}: {reason}"
    if not attrs.resource_request:
        return ApiError(403, "Forbidden", f"forbidden: {message}", {})
    subject = qualified(attrs.resource, attrs.api_group)
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
        text = f'{subject} "{attrs.name}" is forbidden: {message}'
    else:
        text = f"{subject} is forbidden: {message}"
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return ApiError(403, "Forbidden", text, details)


# ------------------------------------------------------------------------------------------ aggregation


def _aggregated_rules(role: dict[str, Any], roles: list[dict[str, Any]]) -> list[Any]:
    """The rules an aggregated ClusterRole gets: those of every other ClusterRole matching any of its
    selectors, selector by selector, roles by name, each rule once (kube-controller-manager's
    `ClusterRoleAggregationController.syncClusterRole`)."""
    name = (role.get("metadata") or {}).get("name")
    rules: list[Any] = []
    for selector in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or ():
        if not isinstance(selector, dict):
            continue
        try:
            matches = compile_label_selector_object(selector)
        except ApiError:
            continue  # validation refuses such a selector; nothing to aggregate from it
        for other in sorted(roles, key=lambda r: (r.get("metadata") or {}).get("name", "")):
            metadata = other.get("metadata") or {}
            if metadata.get("name") == name or not matches(metadata.get("labels") or {}):
                continue
            for rule in other.get("rules") or ():
                if rule not in rules:
                    rules.append(rule)
    return rules


def aggregate_cluster_roles(store: Store) -> list[str]:
    """Bring every ClusterRole with an `aggregationRule` up to date; returns the names rewritten."""
    roles = store.snapshot(CLUSTER_ROLES)
    changed = []
    for role in roles:
        if not isinstance(role.get("aggregationRule"), dict):
            continue
        wanted = _aggregated_rules(role, roles)
        if (role.get("rules") or []) == wanted:
            continue

        def set_rules(current: dict[str, Any], wanted: list[Any] = wanted) -> bool:
            if not isinstance(current.get("aggregationRule"), dict):
                return False  # the aggregation rule went away meanwhile
            current["rules"] = wanted
            return True

        if store.modify(CLUSTER_ROLES, role["metadata"]["name"], None, set_rules) is not None:
            changed.append(role["metadata"]["name"])
    return changed


# ---------------------------------------------------------------------------------------- the objects


def _bootstrap_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                     "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "rules": rules,
    }


def _bootstrap_binding(name: str, groups: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                     "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


_PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
# kube-apiserver's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), the part any client meets.
BOOTSTRAP_POLICY: tuple[dict[str, Any], ...] = (
    _bootstrap_role("cluster-admin", [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ]),
    _bootstrap_role("system:discovery", [{
        "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                            "/readyz", "/version", "/version/"],
        "verbs": ["get"],
    }]),
    _bootstrap_role("system:basic-user", [{
        "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        "verbs": ["create"],
    }, {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
    _bootstrap_role("system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_INFO, "verbs": ["get"]}]),
    _bootstrap_binding("cluster-admin", [MASTERS]),
    _bootstrap_binding("system:discovery", [AUTHENTICATED]),
    _bootstrap_binding("system:basic-user", [AUTHENTICATED]),
    _bootstrap_binding("system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]),
)


class ManifestError(ValueError):
    """An RBAC manifest that cannot be applied; the message names the file and the document."""


def apply_objects(store: Store, objects: list[dict[str, Any]], replace: bool = True) -> list[str]:
    """Create (or, with `replace`, overwrite) RBAC objects in the store; returns `kind/name` of each."""
    applied = []
    for obj in objects:
        resource = _RESOURCE_OF_KIND[obj["kind"]]
        metadata = obj.get("metadata") or {}
        current = store.peek(resource, metadata.get("name", ""), metadata.get("namespace"))
        if current is None:
            store.create(resource, obj, metadata.get("namespace"))
        elif replace:
            body = {**obj, "metadata": {**metadata, "resourceVersion": current["metadata"]["resourceVersion"]}}
            store.update(resource, body, metadata.get("namespace"))
        applied.append(f"{obj['kind']}/{metadata.get('name')}")
    return applied


def install_bootstrap_policy(store: Store) -> list[str]:
    """The default ClusterRoles and bindings kube-apiserver creates at start-up (kept if already there)."""
    return apply_objects(store, list(BOOTSTRAP_POLICY), replace=False)


def load_manifest(path: Path) -> list[dict[str, Any]]:
    """The RBAC objects of a YAML file, checked to be ones this server can hold."""
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError(f"{path}: cannot read the RBAC manifest: {exc}") from None
    for index, doc in enumerate(documents):
        if not isinstance(doc, dict) or doc.get("kind") not in _RESOURCE_OF_KIND:
            raise ManifestError(f"{path}: document {index + 1} is not a Role, ClusterRole or binding")
        if doc.get("apiVersion") != f"{GROUP}/v1":
            raise ManifestError(f"{path}: document {index + 1}: apiVersion must be {GROUP}/v1")
        if not (doc.get("metadata") or {}).get("name"):
            raise ManifestError(f"{path}: document {index + 1}: metadata.name is required")
    return documents


def apply_manifest(store: Store, path: Path) -> list[str]:
    """`kubectl apply -f path` as the admin would: every object created or replaced."""
    return apply_objects(store, load_manifest(path))
