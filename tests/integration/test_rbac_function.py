"""The stack's RBAC function (`-c applyRbac=true`) on sim/: applied at Create, the functions can work, gone at Delete.

It runs with the identity the stack gives it: sim's `rbac-kubeconfig`, a user in no Kubernetes group,
authorized only by the EKS access policy its access entry holds (AmazonEKSClusterAdminPolicy), as on EKS
before any RBAC exists. The environment starts with the manifest applied (as the deploy guide's manual
step does); the module removes it first, so the function's Create is what grants the functions' group.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale import settings
from nodescale.k8s.client import client_from_kubeconfig
from nodescale.k8s.raw import request_json
from nodescale.usecases import rbac
from sim.environment import RBAC_MANIFEST, Environment
from tests.integration import helpers
from tests.integration.helpers import load_handler, use_settings

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("rbac-function")
CONTEXT = SimpleNamespace(function_name="nodescale-demo-cluster-rbac", memory_limit_in_mb=256, aws_request_id="req-1",
                          invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:nodescale-demo-cluster-rbac")
# What the functions do in the cluster, one request each (what infra/manifests/rbac.yaml grants them).
FUNCTIONS_WORK = (
    ("GET", "/api/v1/nodes"),
    ("GET", "/api/v1/pods"),
    ("GET", "/apis/apps/v1/daemonsets"),
    ("GET", "/apis/policy/v1/poddisruptionbudgets"),
)


def event(request: str, cluster: str) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": {"ClusterName": cluster},
            "PhysicalResourceId": None if request == "Create" else f"nodescale-rbac-{cluster}"}


def functions_may_work(sim: Environment) -> bool:
    """Whether every request of FUNCTIONS_WORK is allowed to the functions' identity (DIR/env)."""
    api = sim.functions_kube_api_client()
    try:
        for method, path in FUNCTIONS_WORK:
            request_json(api, method, path)
    except ApiException as exc:
        assert exc.status == 403, exc
        return False
    return True


def rbac_objects(sim: Environment) -> set[str]:
    api = sim.kube_api_client()
    found = set()
    for plural in ("clusterroles", "clusterrolebindings"):
        path = f"/apis/rbac.authorization.k8s.io/v1/{plural}/nodescale"
        try:
            request_json(api, "GET", path)
            found.add(plural)
        except ApiException as exc:
            assert exc.status == 404
    return found


@pytest.fixture
def without_rbac(env: Environment) -> Environment:
    """The cluster as a fresh deploy finds it: no nodescale RBAC (removed by the administrator)."""
    rbac.remove(env.kube_api_client(), rbac.load(RBAC_MANIFEST), wait_seconds=0)
    assert not rbac_objects(env) and not functions_may_work(env)
    return env


def test_create_applies_the_rbac_update_keeps_it_and_delete_removes_it(
    without_rbac: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = without_rbac
    use_settings(sim, monkeypatch)
    monkeypatch.setenv(settings.KUBECONFIG, sim.rbac_applier_kubeconfig)  # the identity the stack gives it
    handler = load_handler("rbac").handler

    created = handler(event("Create", sim.cluster), CONTEXT)

    assert created["PhysicalResourceId"] == f"nodescale-rbac-{sim.cluster}"
    assert created["Data"]["Objects"] == "ClusterRole/nodescale, ClusterRoleBinding/nodescale"
    assert rbac_objects(sim) == {"clusterroles", "clusterrolebindings"}
    assert functions_may_work(sim)

    updated = handler(event("Update", sim.cluster), CONTEXT)
    assert updated["PhysicalResourceId"] == created["PhysicalResourceId"] and functions_may_work(sim)

    deleted = handler(event("Delete", sim.cluster), CONTEXT)

    assert deleted["Data"]["Objects"] == "ClusterRoleBinding/nodescale, ClusterRole/nodescale"
    assert not rbac_objects(sim) and not functions_may_work(sim)
    again = handler(event("Delete", sim.cluster), CONTEXT)  # a repeated Delete finds nothing and succeeds
    assert again["Data"]["Objects"] == ""


def test_without_the_access_policy_applying_rbac_is_refused(without_rbac: Environment) -> None:
    """The functions' own identity (a STANDARD entry, its group only) cannot grant itself anything."""
    api = client_from_kubeconfig(without_rbac.kubeconfig)
    with pytest.raises(rbac.RbacError, match=r"apply ClusterRole/nodescale: 403 .*nodescale-functions"):
        rbac.apply(api, rbac.load(RBAC_MANIFEST), wait_seconds=0)
    assert not rbac_objects(without_rbac)


def test_a_manifest_with_another_kind_is_refused_before_any_request(tmp_path: Any) -> None:
    manifest = tmp_path / "rbac.yaml"
    manifest.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: default}\n")
    with pytest.raises(rbac.RbacError, match=r"document 0: 'Secret' \('v1'\) is not a kind nodescale applies"):
        rbac.load(manifest)
