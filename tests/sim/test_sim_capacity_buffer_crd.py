"""sim serves the CapacityBuffer CRD namespaced, PodTemplates as a built-in kind, and refuses to list
buffers to anyone RBAC does not grant them (the functions get exactly infra/manifests/rbac.yaml's rules)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sim.kube.auth import FUNCTIONS, User, request_attributes
from sim.kube.crds import CRD_RESOURCE, capacity_buffer_crd
from sim.kube.rbac import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, RbacAuthorizer, install_bootstrap_policy
from sim.kube.store import Store

RBAC = Path(__file__).resolve().parents[2] / "infra" / "manifests" / "rbac.yaml"
BOB = User("bob", ("system:authenticated",))


@pytest.fixture
def store() -> Store:
    s = Store()
    install_bootstrap_policy(s)
    s.create("v1/namespaces", {"metadata": {"name": "shop"}})
    s.create(CRD_RESOURCE, capacity_buffer_crd())
    role, binding = yaml.safe_load_all(RBAC.read_text())
    s.create(CLUSTER_ROLES, role)
    s.create(CLUSTER_ROLE_BINDINGS, binding)
    return s


def allowed(store: Store, user: User, method: str, path: str) -> bool:
    return RbacAuthorizer(store).allowed(user, request_attributes(method, path, {}))[0]


def test_buffers_are_namespaced_in_every_served_version(store: Store) -> None:
    store.create("autoscaling.x-k8s.io/v1beta1/capacitybuffers",
                 {"metadata": {"name": "b"}, "spec": {"podTemplateRef": {"name": "t"}, "replicas": 1}}, "shop")
    for version in ("v1", "v1beta1", "v1alpha1"):
        (item,) = store.list(f"autoscaling.x-k8s.io/{version}/capacitybuffers")
        assert item["metadata"]["namespace"] == "shop"
    store.create("v1/podtemplates", {"metadata": {"name": "t"}, "template": {"spec": {"containers": []}}}, "shop")
    assert store.get("v1/podtemplates", "t", "shop")["metadata"]["name"] == "t"


def test_listing_buffers_needs_the_rbac_rule(store: Store) -> None:
    for path in ("/apis/autoscaling.x-k8s.io/v1/capacitybuffers", "/apis/autoscaling.x-k8s.io/v1/namespaces/shop/capacitybuffers",
                 "/api/v1/namespaces/shop/podtemplates/t"):
        assert allowed(store, FUNCTIONS, "GET", path), path
        assert not allowed(store, BOB, "GET", path), path  # no rule grants bob anything
    assert not allowed(store, FUNCTIONS, "POST", "/apis/autoscaling.x-k8s.io/v1/namespaces/shop/capacitybuffers")
    assert not allowed(store, FUNCTIONS, "GET", "/apis/apps/v1/namespaces/shop/deployments")  # get only, not list
    assert allowed(store, FUNCTIONS, "GET", "/apis/apps/v1/namespaces/shop/deployments/web")
