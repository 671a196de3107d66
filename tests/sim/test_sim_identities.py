"""sim/ holds each client to its identity: DIR/env's kubeconfig to `infra/manifests/rbac.yaml`, DIR/admin.env's
to nothing, and a client without a token to nothing at all."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sim.environment import Environment
from sim.kube.rbac import GROUP

pytestmark = pytest.mark.integration


@pytest.fixture
def namespace(sim: Environment):
    admin = client.CoreV1Api(sim.kube_api_client())
    name = f"t-rbac-{uuid.uuid4().hex[:6]}"
    admin.create_namespace({"metadata": {"name": name}})
    yield name
    admin.delete_namespace(name)


def functions(sim: Environment) -> client.CoreV1Api:
    """The official client, from DIR/env's kubeconfig, as the functions and the CLI build theirs."""
    return client.CoreV1Api(config.new_client_from_config(config_file=sim.env["KUBECONFIG"]))


def test_the_functions_may_not_read_secrets(sim: Environment) -> None:
    with pytest.raises(ApiException) as info:
        functions(sim).list_namespaced_secret("default")
    assert info.value.status == 403 and info.value.reason == "Forbidden"
    status = json.loads(info.value.body)
    assert status["reason"] == "Forbidden"
    assert status["message"] == ('secrets is forbidden: User "nodescale-functions" cannot list resource "secrets" '
                                 'in API group "" in the namespace "default"')
    # The administrator may.
    client.CoreV1Api(sim.kube_api_client()).list_namespaced_secret("default")


def test_the_functions_may_delete_a_pod(sim: Environment, namespace: str) -> None:
    admin = client.CoreV1Api(sim.kube_api_client())
    admin.create_namespaced_pod(namespace, {"metadata": {"name": "victim"},
                                            "spec": {"containers": [{"name": "c", "image": "x"}]}})
    functions(sim).delete_namespaced_pod("victim", namespace, grace_period_seconds=0)
    assert "victim" not in {p.metadata.name for p in admin.list_namespaced_pod(namespace).items}


def test_the_functions_may_not_create_pods_or_touch_deployments(sim: Environment, namespace: str) -> None:
    api = functions(sim)
    with pytest.raises(ApiException) as info:
        api.create_namespaced_pod(namespace, {"metadata": {"name": "p"},
                                              "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert info.value.status == 403
    with pytest.raises(ApiException) as info:
        client.AppsV1Api(api.api_client).patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 0}})
    assert info.value.status == 403
    assert json.loads(info.value.body)["message"].startswith(
        'deployments.apps "web" is forbidden: User "nodescale-functions" cannot patch resource "deployments/scale"')


def test_rules_the_admin_adds_take_effect_at_once(sim: Environment, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(sim.kube_api_client())
    api = functions(sim)
    with pytest.raises(ApiException):
        api.list_namespaced_config_map(namespace)
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "read-configmaps"},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "read-configmaps"},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": "nodescale-functions"}],
    })
    rbac.create_cluster_role({"metadata": {"name": "read-configmaps"},
                              "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    try:
        api.list_namespaced_config_map(namespace)
        # A RoleBinding to a ClusterRole grants in its own namespace only.
        with pytest.raises(ApiException) as info:
            api.list_namespaced_config_map("default")
        assert info.value.status == 403
    finally:
        rbac.delete_cluster_role("read-configmaps")
    with pytest.raises(ApiException) as info:
        api.list_namespaced_config_map(namespace)
    assert info.value.status == 403
    assert json.loads(info.value.body)["message"].endswith(f'RBAC: clusterrole.{GROUP} "read-configmaps" not found')


def test_sim_holds_the_manifest_the_stack_applies(sim: Environment) -> None:
    rbac = client.RbacAuthorizationV1Api(sim.kube_api_client())
    binding = rbac.read_cluster_role_binding("nodescale")
    assert [(s.kind, s.name) for s in binding.subjects] == [("Group", "nodescale-functions")]
    assert binding.role_ref.name == "nodescale"
    assert any("delete" in r.verbs and "pods" in r.resources for r in rbac.read_cluster_role("nodescale").rules)


def test_without_a_token_the_api_answers_401(sim: Environment) -> None:
    for path in ("/api/v1/namespaces/default/pods", "/version"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(sim.kube_url + path, timeout=10)
        assert info.value.code == 401
        assert json.loads(info.value.read())["reason"] == "Unauthorized"
    # A token nobody was given is no better.
    bad = client.Configuration(host=sim.kube_url)
    bad.api_key, bad.api_key_prefix = {"authorization": "stolen"}, {"authorization": "Bearer"}
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(client.ApiClient(bad)).list_node()
    assert exc.value.status == 401
    # Health checks and the environment's own clock need none.
    with urllib.request.urlopen(sim.kube_url + "/readyz", timeout=10) as response:
        assert response.status == 200
    with urllib.request.urlopen(sim.kube_url + "/sim/v1/clock", timeout=10) as response:
        assert "now" in json.loads(response.read())
