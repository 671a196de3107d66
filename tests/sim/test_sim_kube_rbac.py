"""sim's RBAC authorizer: kube-apiserver's rule matching, binding scopes and denial messages."""

from __future__ import annotations

from typing import Any

import pytest

from sim.kube.auth import ADMIN, ANONYMOUS, FUNCTIONS, User, authenticate, request_attributes
from sim.kube.errors import ApiError
from sim.kube.rbac import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
    RbacAuthorizer,
    install_bootstrap_policy,
)
from sim.kube.store import Store

GROUP = "rbac.authorization.k8s.io"
ALICE = User("alice", ("devs", "system:authenticated"))


def role(store: Store, rules: list[dict[str, Any]], name: str = "r", namespace: str | None = None) -> None:
    if namespace:
        store.create(ROLES, {"metadata": {"name": name}, "rules": rules}, namespace)
    else:
        store.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})


def bind(store: Store, subjects: list[dict[str, Any]], role_name: str = "r", role_kind: str = "ClusterRole",
         namespace: str | None = None, name: str = "b") -> None:
    body = {"metadata": {"name": name}, "subjects": subjects,
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role_name}}
    if namespace:
        store.create(ROLE_BINDINGS, body, namespace)
    else:
        store.create(CLUSTER_ROLE_BINDINGS, body)


USER_ALICE = [{"kind": "User", "apiGroup": GROUP, "name": "alice"}]


@pytest.fixture
def store() -> Store:
    s = Store()
    install_bootstrap_policy(s)
    for ns in ("team", "other"):
        s.create("v1/namespaces", {"metadata": {"name": ns}})
    return s


def allowed(store: Store, user: User, method: str, path: str, **query: str) -> bool:
    return RbacAuthorizer(store).allowed(user, request_attributes(method, path, query))[0]


def denial(store: Store, user: User, method: str, path: str, **query: str) -> ApiError:
    with pytest.raises(ApiError) as info:
        RbacAuthorizer(store).authorize(user, request_attributes(method, path, query))
    return info.value


# ------------------------------------------------------------------------------------------ attributes


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/team/pods", {}, ("list", "", "team", "pods", "", "")),
    ("GET", "/api/v1/namespaces/team/pods", {"watch": "true"}, ("watch", "", "team", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/team/pods", {}, ("watch", "", "team", "pods", "", "")),
    ("GET", "/api/v1/pods", {"fieldSelector": "metadata.name=web-1"}, ("list", "", "", "pods", "", "web-1")),
    ("GET", "/api/v1/namespaces/team/pods/web-1", {}, ("get", "", "team", "pods", "", "web-1")),
    ("POST", "/api/v1/namespaces/team/pods/web-1/eviction", {}, ("create", "", "team", "pods", "eviction", "web-1")),
    ("PATCH", "/api/v1/nodes/n1/status", {}, ("patch", "", "", "nodes", "status", "n1")),
    ("PUT", "/apis/apps/v1/namespaces/team/deployments/web/scale", {},
     ("update", "apps", "team", "deployments", "scale", "web")),
    ("DELETE", "/api/v1/namespaces/team/pods", {}, ("deletecollection", "", "team", "pods", "", "")),
    ("DELETE", "/api/v1/namespaces/team/pods/web-1", {}, ("delete", "", "team", "pods", "", "web-1")),
    # A namespace is its own namespace, as in kube-apiserver's RequestInfo.
    ("GET", "/api/v1/namespaces/team", {}, ("get", "", "team", "namespaces", "", "team")),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "", "namespaces", "", "")),
])
def test_request_attributes_follow_kube_apiserver(method, path, query, expected) -> None:
    a = request_attributes(method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.namespace, a.resource, a.subresource, a.name) == expected


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version", "/healthz"])
def test_discovery_and_info_paths_are_non_resource_requests(path: str) -> None:
    a = request_attributes("GET", path, {})
    assert not a.resource_request and a.verb == "get" and a.path == path


def test_authentication_by_token() -> None:
    assert authenticate("Bearer sim-admin-token", "/api/v1/pods") == ADMIN
    assert authenticate("Bearer sim-functions-token", "/api/v1/pods") == FUNCTIONS
    assert authenticate(None, "/healthz") == ANONYMOUS
    for header, path in ((None, "/api/v1/pods"), (None, "/version"), ("Bearer nope", "/healthz"),
                         ("Basic sim-admin-token", "/api/v1/pods")):
        with pytest.raises(ApiError) as info:
            authenticate(header, path)
        assert (info.value.status, info.value.reason, info.value.message) == (401, "Unauthorized", "Unauthorized")


# ------------------------------------------------------------------------------------------- matching


def test_masters_may_do_anything_without_any_binding() -> None:
    empty = Store()
    assert allowed(empty, ADMIN, "DELETE", "/api/v1/namespaces/team/secrets")
    assert allowed(empty, ADMIN, "GET", "/anything/at/all")
    assert not allowed(empty, ALICE, "GET", "/api/v1/pods")


def test_verbs_groups_and_resources_with_wildcards(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                 {"apiGroups": ["*"], "resources": ["deployments"], "verbs": ["*"]}])
    bind(store, USER_ALICE)
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/team/pods")
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/team/pods/web-1")
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/team/pods", watch="1")
    assert not allowed(store, ALICE, "DELETE", "/api/v1/namespaces/team/pods/web-1")
    assert not allowed(store, ALICE, "GET", "/apis/apps/v1/namespaces/team/replicasets")
    assert allowed(store, ALICE, "DELETE", "/apis/apps/v1/namespaces/team/deployments")
    assert allowed(store, ALICE, "PATCH", "/apis/extensions.example/v1/namespaces/team/deployments/x")
    # The core group is "", not a wildcard: pods of another group are not pods.
    assert not allowed(store, ALICE, "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/team/pods")


def test_subresources_are_granted_by_name_or_by_star_slash(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]},
                 {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                 {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["update"]}])
    bind(store, USER_ALICE)
    # `pods` does not cover `pods/eviction`.
    assert not allowed(store, ALICE, "POST", "/api/v1/namespaces/team/pods/web-1/eviction")
    assert allowed(store, ALICE, "PATCH", "/api/v1/nodes/n1/status")
    assert not allowed(store, ALICE, "PATCH", "/api/v1/nodes/n1")
    assert allowed(store, ALICE, "PUT", "/apis/apps/v1/namespaces/team/deployments/web/scale")
    assert allowed(store, ALICE, "PUT", "/apis/apps/v1/namespaces/team/statefulsets/db/scale")
    assert not allowed(store, ALICE, "PUT", "/apis/apps/v1/namespaces/team/deployments/web")


def test_a_star_resource_covers_subresources(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["*"], "verbs": ["create"]}])
    bind(store, USER_ALICE)
    assert allowed(store, ALICE, "POST", "/api/v1/namespaces/team/pods/web-1/eviction")


def test_resource_names_apply_to_named_requests_only(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"],
                  "verbs": ["get", "list", "watch", "create", "update"]}])
    bind(store, USER_ALICE)
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps/settings")
    assert allowed(store, ALICE, "PUT", "/api/v1/namespaces/team/configmaps/settings")
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps/other")
    # A list, a watch or a create names no object, so resourceNames cannot grant them...
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps")
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps", watch="true")
    assert not allowed(store, ALICE, "POST", "/api/v1/namespaces/team/configmaps")
    # ...unless a field selector pins the name, as kube-apiserver reads it.
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps", watch="true",
                   fieldSelector="metadata.name=settings")


def test_a_role_binding_grants_in_its_own_namespace_only(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}], name="secret-reader")
    bind(store, USER_ALICE, "secret-reader", namespace="team")
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/team/secrets")
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/other/secrets")
    assert not allowed(store, ALICE, "GET", "/api/v1/secrets")  # across namespaces is cluster scope
    # A namespaced Role works the same way, and only where it lives.
    role(store, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}], name="cm", namespace="other")
    bind(store, USER_ALICE, "cm", role_kind="Role", namespace="other", name="cm")
    assert allowed(store, ALICE, "GET", "/api/v1/namespaces/other/configmaps")
    assert not allowed(store, ALICE, "GET", "/api/v1/namespaces/team/configmaps")


def test_subjects_user_group_and_service_account(store: Store) -> None:
    role(store, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    bind(store, [{"kind": "Group", "apiGroup": GROUP, "name": "devs"}], name="g")
    bind(store, [{"kind": "ServiceAccount", "name": "builder"}], namespace="team", name="sa")
    assert allowed(store, ALICE, "GET", "/api/v1/pods")
    assert not allowed(store, User("bob", ("system:authenticated",)), "GET", "/api/v1/pods")
    robot = User("system:serviceaccount:team:builder", ("system:serviceaccounts", "system:authenticated"))
    assert allowed(store, robot, "GET", "/api/v1/namespaces/team/pods")
    elsewhere = User("system:serviceaccount:other:builder", ("system:authenticated",))
    assert not allowed(store, elsewhere, "GET", "/api/v1/namespaces/team/pods")


def test_rules_are_read_live(store: Store) -> None:
    assert not allowed(store, ALICE, "GET", "/api/v1/nodes")
    role(store, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}])
    bind(store, USER_ALICE)
    assert allowed(store, ALICE, "GET", "/api/v1/nodes")
    store.delete(CLUSTER_ROLE_BINDINGS, "b")
    assert not allowed(store, ALICE, "GET", "/api/v1/nodes")


def test_non_resource_urls_from_the_default_roles(store: Store) -> None:
    for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/healthz", "/openapi/v2"):
        assert allowed(store, ALICE, "GET", path), path
    assert not allowed(store, ALICE, "GET", "/metrics")
    assert not allowed(store, ALICE, "POST", "/api")
    # Unauthenticated clients see only the public information.
    assert allowed(store, ANONYMOUS, "GET", "/healthz")
    assert not allowed(store, ANONYMOUS, "GET", "/api")
    role(store, [{"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}], name="metrics")
    bind(store, USER_ALICE, "metrics", name="metrics")
    assert allowed(store, ALICE, "GET", "/metrics")
    assert allowed(store, ALICE, "GET", "/debug/pprof/heap")
    assert not allowed(store, ALICE, "GET", "/debugging")


# --------------------------------------------------------------------------------------------- denials


def test_denial_messages_are_kube_apiservers(store: Store) -> None:
    user = User("nodescale-functions", ("nodescale-functions", "system:authenticated"))
    cases = [
        (("GET", "/api/v1/namespaces/default/pods"),
         'pods is forbidden: User "nodescale-functions" cannot list resource "pods" in API group "" '
         'in the namespace "default"', {"kind": "pods"}),
        (("GET", "/api/v1/nodes"),
         'nodes is forbidden: User "nodescale-functions" cannot list resource "nodes" in API group "" '
         "at the cluster scope", {"kind": "nodes"}),
        (("DELETE", "/api/v1/namespaces/x/pods/web-1"),
         'pods "web-1" is forbidden: User "nodescale-functions" cannot delete resource "pods" in API group "" '
         'in the namespace "x"', {"name": "web-1", "kind": "pods"}),
        (("POST", "/api/v1/namespaces/x/pods/web-1/eviction"),
         'pods "web-1" is forbidden: User "nodescale-functions" cannot create resource "pods/eviction" '
         'in API group "" in the namespace "x"', {"name": "web-1", "kind": "pods"}),
        (("PATCH", "/apis/apps/v1/namespaces/x/deployments/web/scale"),
         'deployments.apps "web" is forbidden: User "nodescale-functions" cannot patch resource '
         '"deployments/scale" in API group "apps" in the namespace "x"',
         {"name": "web", "group": "apps", "kind": "deployments"}),
        (("GET", "/metrics"), 'forbidden: User "nodescale-functions" cannot get path "/metrics"', None),
    ]
    for (method, path), message, details in cases:
        error = denial(store, user, method, path)
        status = error.to_status()
        assert (status["kind"], status["status"], status["reason"], status["code"]) == \
            ("Status", "Failure", "Forbidden", 403)
        assert status["message"] == message
        assert status.get("details") == details


def test_a_binding_to_a_missing_role_is_named_in_the_denial(store: Store) -> None:
    bind(store, USER_ALICE, "gone")
    error = denial(store, ALICE, "GET", "/api/v1/nodes")
    assert error.message == ('nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" '
                             f'at the cluster scope: RBAC: clusterrole.{GROUP} "gone" not found')
