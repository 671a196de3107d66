"""sim's API answers reviews, aggregates ClusterRoles and reads `watch` as kube-apiserver does (#28, Kubernetes).

Driven through the official `kubernetes` client as the functions (their token, the stack's RBAC
manifest applied) and as the administrator.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sim.aws.constants import KUBE_ADMIN_TOKEN, KUBE_FUNCTIONS_TOKEN, KUBE_FUNCTIONS_USER
from sim.environment import RBAC_MANIFEST
from sim.kube.auth import request_attributes
from sim.kube.controllers import Controllers
from sim.kube.rbac import CLUSTER_ROLES, apply_manifest
from sim.kube.server import KubeServer
from sim.kube.store import Store

pytestmark = pytest.mark.integration


class Cluster:
    def __init__(self) -> None:
        self.store = Store()
        apply_manifest(self.store, RBAC_MANIFEST)
        self.server = KubeServer(self.store).start()
        self.controllers = Controllers(self.store).start()
        self.admin = self._client(KUBE_ADMIN_TOKEN)
        self.functions = self._client(KUBE_FUNCTIONS_TOKEN)

    def _client(self, token: str) -> client.ApiClient:
        configuration = client.Configuration(host=self.server.url)
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(configuration)

    def stop(self) -> None:
        self.admin.close()
        self.functions.close()
        self.controllers.stop()
        self.server.stop()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    running = Cluster()
    try:
        yield running
    finally:
        running.stop()


def _can(api: client.ApiClient, verb: str, resource: str, subresource: str = "", namespace: str = "default") -> Any:
    review = {"spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource,
                                              "subresource": subresource}}}
    return client.AuthorizationV1Api(api).create_self_subject_access_review(review).status


# ------------------------------------------------------------------------------------- #28 point 2


def test_self_subject_access_review_answers_what_a_request_would_meet(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): `can-i` for the functions: evictions yes (and which binding says so),
    secrets no."""
    eviction = _can(cluster.functions, "create", "pods", "eviction")
    assert eviction.allowed is True
    assert eviction.reason == ('RBAC: allowed by ClusterRoleBinding "nodescale" of ClusterRole "nodescale" '
                               'to Group "nodescale-functions"')
    secrets = _can(cluster.functions, "list", "secrets")
    assert secrets.allowed is False
    # And a real request agrees with the review.
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(cluster.functions).list_namespaced_secret("default")
    assert denied.value.status == 403
    non_resource = client.AuthorizationV1Api(cluster.functions).create_self_subject_access_review(
        {"spec": {"nonResourceAttributes": {"path": "/version", "verb": "get"}}}).status
    assert non_resource.allowed is True


def test_a_review_asking_about_both_or_neither_kind_of_attributes_is_invalid(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): ValidateSelfSubjectAccessReviewSpec's rule, a 422 naming the field."""
    with pytest.raises(ApiException) as refused:
        client.AuthorizationV1Api(cluster.functions).create_self_subject_access_review({"spec": {}})
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "spec.resourceAttributes"


def test_self_subject_review_says_who_the_caller_is(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): `kubectl auth whoami`'s request."""
    answer = client.AuthenticationV1Api(cluster.functions).create_self_subject_review({"metadata": {}})
    assert answer.status.user_info.username == KUBE_FUNCTIONS_USER
    assert set(answer.status.user_info.groups) == {"nodescale-functions", "system:authenticated"}


def test_self_subject_rules_review_lists_the_callers_rules(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): `kubectl auth can-i --list`'s request."""
    status = client.AuthorizationV1Api(cluster.functions).create_self_subject_rules_review(
        {"spec": {"namespace": "default"}}).status
    assert status.incomplete is False
    assert any(r.resources == ["pods/eviction"] and r.verbs == ["create"] for r in status.resource_rules)
    assert not any("secrets" in (r.resources or []) for r in status.resource_rules)
    assert any("/version" in r.non_resource_urls for r in status.non_resource_rules)


def test_subject_access_review_is_for_an_admin_asking_about_another_user(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): SubjectAccessReview decides for the user and groups it names; the
    functions may not ask it."""
    spec = {"user": KUBE_FUNCTIONS_USER, "groups": ["nodescale-functions"],
            "resourceAttributes": {"verb": "create", "resource": "pods", "subresource": "eviction",
                                   "namespace": "kube-system"}}
    api = client.AuthorizationV1Api(cluster.admin)
    assert api.create_subject_access_review({"spec": spec}).status.allowed is True
    no_group = {**spec, "groups": []}
    assert api.create_subject_access_review({"spec": no_group}).status.allowed is False
    with pytest.raises(ApiException) as denied:
        client.AuthorizationV1Api(cluster.functions).create_subject_access_review({"spec": spec})
    assert denied.value.status == 403


def test_discovery_serves_the_review_groups(cluster: Cluster) -> None:
    """#28 (Kubernetes, reviews): kubectl finds the review resources by discovery."""
    groups = {g.name for g in client.ApisApi(cluster.functions).get_api_versions().groups}
    assert {"authorization.k8s.io", "authentication.k8s.io"} <= groups
    resources = {r.name: r.verbs for r in client.AuthorizationV1Api(cluster.functions).get_api_resources().resources}
    assert resources["selfsubjectaccessreviews"] == ["create"]


# ------------------------------------------------------------------------------------- #28 point 3


def test_aggregated_cluster_role_gets_and_keeps_the_rules_of_the_roles_it_selects(cluster: Cluster) -> None:
    """#28 (Kubernetes, aggregation): an `aggregationRule` ClusterRole carries the rules of the
    ClusterRoles its selectors match, and follows their changes."""
    rbac = client.RbacAuthorizationV1Api(cluster.admin)
    rbac.create_cluster_role({"metadata": {"name": "agg"}, "rules": [],
                              "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}})
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    nodes = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
    rbac.create_cluster_role({"metadata": {"name": "agg-b", "labels": {"agg": "yes"}}, "rules": [nodes]})
    rbac.create_cluster_role({"metadata": {"name": "agg-a", "labels": {"agg": "yes"}}, "rules": [pods, nodes]})
    rbac.create_cluster_role({"metadata": {"name": "other"}, "rules": [{**pods, "verbs": ["delete"]}]})

    def rules() -> list[dict[str, Any]]:
        assert cluster.controllers.wait_idle()
        return cluster.store.get(CLUSTER_ROLES, "agg").get("rules") or []

    assert rules() == [pods, nodes]  # by role name, each rule once
    rbac.patch_cluster_role("agg-a", {"metadata": {"labels": {"agg": "no"}}})
    assert rules() == [nodes]
    rbac.patch_cluster_role("other", {"metadata": {"labels": {"agg": "yes"}}})
    assert rules() == [nodes, {**pods, "verbs": ["delete"]}]
    # A hand edit of the aggregated role is put back, as the controller does.
    rbac.patch_cluster_role("agg", {"rules": []})
    assert rules() == [nodes, {**pods, "verbs": ["delete"]}]


# ------------------------------------------------------------------------------------- #28 point 4


@pytest.mark.parametrize("spelling", ["true", "1", "yes", "True", "t", ""])
def test_any_watch_value_but_false_or_0_is_a_watch(cluster: Cluster, spelling: str) -> None:
    """#28 (Kubernetes, watch): kube-apiserver decodes `watch` with apimachinery's
    Convert_Slice_string_To_bool: only "false" (any case) and "0" are false."""
    assert request_attributes("GET", "/api/v1/pods", {"watch": spelling}).verb == "watch"
    url = f"{cluster.server.url}/api/v1/namespaces/default/configmaps?watch={spelling}&timeoutSeconds=1"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {KUBE_ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers.get("Transfer-Encoding") == "chunked"
        lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert all("type" in line for line in lines)


@pytest.mark.parametrize("spelling", ["false", "FALSE", "0"])
def test_watch_false_or_0_is_a_list(cluster: Cluster, spelling: str) -> None:
    """#28 (Kubernetes, watch): the false spellings still list."""
    assert request_attributes("GET", "/api/v1/pods", {"watch": spelling}).verb == "list"
    url = f"{cluster.server.url}/api/v1/namespaces/default/configmaps?watch={spelling}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {KUBE_ADMIN_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["kind"] == "ConfigMapList"
