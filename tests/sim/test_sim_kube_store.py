"""The local Kubernetes API's store: versions, conflicts, deletion, watches, pagination."""

from __future__ import annotations

import pytest

from sim.clock import Clock
from sim.kube.crds import install_karpenter_crds
from sim.kube.errors import ApiError
from sim.kube.store import Store


@pytest.fixture
def store() -> Store:
    return Store(Clock())


def _pod(name: str, node: str | None = None, **labels: str) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def test_every_write_gets_a_higher_resource_version(store: Store) -> None:
    first = store.create("v1/pods", _pod("a"), "default")
    second = store.patch("v1/pods", "a", {"metadata": {"labels": {"x": "y"}}}, "default")
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    assert first["status"]["phase"] == "Pending" and first["spec"]["schedulerName"] == "default-scheduler"


def test_returned_objects_are_copies(store: Store) -> None:
    created = store.create("v1/pods", _pod("a"), "default")
    created["metadata"]["labels"]["mutated"] = "yes"
    assert "mutated" not in store.get("v1/pods", "a", "default")["metadata"]["labels"]


def test_update_with_a_stale_resource_version_conflicts(store: Store) -> None:
    pod = store.create("v1/pods", _pod("a"), "default")
    store.patch("v1/pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
    with pytest.raises(ApiError) as excinfo:
        store.update("v1/pods", pod, "default")
    assert excinfo.value.status == 409 and excinfo.value.reason == "Conflict"
    assert "the object has been modified" in excinfo.value.message


def test_status_and_spec_writes_are_separate(store: Store) -> None:
    created = store.create("apps/v1/deployments", {
        "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}},
        "default")
    assert created["metadata"]["generation"] == 1
    created["status"] = {"replicas": 99}
    created["spec"]["replicas"] = 2
    updated = store.update("apps/v1/deployments", created, "default")
    assert updated["metadata"]["generation"] == 2 and "replicas" not in (updated.get("status") or {})
    updated["status"] = {"replicas": 2}
    updated["spec"]["replicas"] = 5
    status_written = store.update_status("apps/v1/deployments", updated, "default")
    assert status_written["status"] == {"replicas": 2} and status_written["spec"]["replicas"] == 2
    assert status_written["metadata"]["generation"] == 2


def test_namespaced_and_cluster_scoped_lists(store: Store) -> None:
    store.create("v1/namespaces", {"metadata": {"name": "other"}})
    store.create("v1/pods", _pod("a"), "default")
    store.create("v1/pods", _pod("a"), "other")
    store.create("v1/nodes", {"metadata": {"name": "n"}})
    assert len(store.list("v1/pods")) == 2
    assert [p["metadata"]["namespace"] for p in store.list("v1/pods", "other")] == ["other"]
    assert "namespace" not in store.get("v1/nodes", "n")["metadata"]
    with pytest.raises(ApiError) as excinfo:
        store.create("v1/pods", _pod("a"), "missing")
    assert excinfo.value.status == 404


def test_generate_name_and_invalid_names(store: Store) -> None:
    created = store.create("v1/pods", {"metadata": {"generateName": "web-"}, "spec": _pod("x")["spec"]}, "default")
    assert created["metadata"]["name"].startswith("web-") and len(created["metadata"]["name"]) == 9
    with pytest.raises(ApiError) as excinfo:
        store.create("v1/pods", {"metadata": {"name": "Bad_Name"}}, "default")
    assert excinfo.value.status == 422 and "metadata.name" in excinfo.value.message


def test_graceful_pod_deletion_marks_then_waits(store: Store) -> None:
    store.create("v1/pods", _pod("bound", node="n1"), "default")
    store.create("v1/pods", _pod("unbound"), "default")
    terminating = store.delete("v1/pods", "bound", "default", grace_period_seconds=20)
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 20
    assert store.get("v1/pods", "bound", "default")["metadata"]["deletionTimestamp"]
    store.delete("v1/pods", "unbound", "default")
    assert store.peek("v1/pods", "unbound", "default") is None
    store.delete("v1/pods", "bound", "default", grace_period_seconds=0)
    assert store.peek("v1/pods", "bound", "default") is None


def test_a_pods_int64_grace_is_taken_as_kube_apiserver_takes_it(store: Store) -> None:
    """A tenant may set any int64 terminationGracePeriodSeconds (#27.1 tried 2^63-1 on the product); the API
    server multiplies it into a Go Duration, which wraps, and answers. sim raised OverflowError (a 500)."""
    pod = _pod("forever", node="n1")
    pod["spec"]["terminationGracePeriodSeconds"] = 2**63 - 1
    store.create("v1/pods", pod, "default")
    terminating = store.delete("v1/pods", "forever", "default")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 2**63 - 1
    assert terminating["metadata"]["deletionTimestamp"]


def test_finalizers_keep_an_object_until_removed(store: Store) -> None:
    store.create("v1/configmaps", {"metadata": {"name": "c", "finalizers": ["a/b"]}}, "default")
    store.delete("v1/configmaps", "c", "default")
    assert store.get("v1/configmaps", "c", "default")["metadata"]["deletionTimestamp"]
    store.patch("v1/configmaps", "c", {"metadata": {"finalizers": None}}, "default")
    assert store.peek("v1/configmaps", "c", "default") is None


def test_deleting_a_namespace_removes_its_objects(store: Store) -> None:
    store.create("v1/namespaces", {"metadata": {"name": "doomed"}})
    store.create("v1/configmaps", {"metadata": {"name": "c"}}, "doomed")
    store.delete("v1/namespaces", "doomed")
    assert store.list("v1/configmaps", "doomed") == []


def test_watch_replays_from_a_resource_version_in_order(store: Store) -> None:
    start = store.resource_version
    store.create("v1/pods", _pod("a", app="x"), "default")
    store.patch("v1/pods", "a", {"metadata": {"labels": {"app": "y"}}}, "default")
    store.create("v1/pods", _pod("b", app="x"), "default")
    store.delete("v1/pods", "b", "default")
    watch = store.watch("v1/pods", "default", label_selector="app=x", resource_version=start)
    events = []
    while (event := watch.next(timeout=0.05)) is not None:
        events.append((event[0], event[1]["metadata"]["name"]))
    watch.close()
    # `a` stopped matching the selector: watchers see it leave as DELETED.
    assert events == [("ADDED", "a"), ("DELETED", "a"), ("ADDED", "b"), ("DELETED", "b")]


def test_watch_from_a_compacted_version_is_gone() -> None:
    store = Store(Clock(), watch_history=3)
    start = store.resource_version
    for index in range(5):
        store.create("v1/configmaps", {"metadata": {"name": f"c{index}"}}, "default")
    with pytest.raises(ApiError) as excinfo:
        store.watch("v1/configmaps", resource_version=start)
    assert excinfo.value.status == 410 and "too old resource version" in excinfo.value.message


def test_pages_cover_the_list_exactly_once(store: Store) -> None:
    for index in range(10):
        store.create("v1/configmaps", {"metadata": {"name": f"c{index:02d}"}}, "default")
    names, token = [], ""
    while True:
        texts, _, token, remaining = store.list_page("v1/configmaps", "default", limit=4, continue_token=token)
        names += [text.split('"name":"')[1].split('"')[0] for text in texts]
        if not token:
            break
        assert remaining == 10 - len(names)
    assert names == [f"c{index:02d}" for index in range(10)]
    with pytest.raises(ApiError) as excinfo:
        store.list_page("v1/configmaps", "default", limit=4, continue_token="not-a-token")
    assert excinfo.value.status == 400


def test_crds_register_and_unregister_their_resources(store: Store) -> None:
    crd = {"metadata": {"name": "provisioners.karpenter.sh"}, "spec": {
        "group": "karpenter.sh", "scope": "Cluster",
        "names": {"plural": "provisioners", "kind": "Provisioner"},
        "versions": [{"name": "v1alpha5", "served": True, "storage": True, "subresources": {"status": {}}}]}}
    store.create("apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    store.create("karpenter.sh/v1alpha5/provisioners", {"metadata": {"name": "default"}, "spec": {"ttl": 30}})
    assert store.get("karpenter.sh/v1alpha5/provisioners", "default")["kind"] == "Provisioner"
    with pytest.raises(ApiError) as excinfo:
        store.patch("karpenter.sh/v1alpha5/provisioners", "default", {"spec": {}}, patch_type="strategic")
    assert excinfo.value.status == 415
    store.delete("apiextensions.k8s.io/v1/customresourcedefinitions", "provisioners.karpenter.sh")
    with pytest.raises(ApiError) as excinfo:
        store.list("karpenter.sh/v1alpha5/provisioners")
    assert excinfo.value.status == 404


def test_bad_crd_is_invalid(store: Store) -> None:
    with pytest.raises(ApiError) as excinfo:
        store.create("apiextensions.k8s.io/v1/customresourcedefinitions", {
            "metadata": {"name": "wrong.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1"}]}})
    assert excinfo.value.status == 422 and "spec.names.plural" in excinfo.value.message


def test_binding_twice_conflicts(store: Store) -> None:
    store.create("v1/pods", _pod("a"), "default")
    store.bind("a", "default", "n1")
    assert store.get("v1/pods", "a", "default")["spec"]["nodeName"] == "n1"
    assert [p["metadata"]["name"] for p in store.pods_on_node("n1")] == ["a"]
    with pytest.raises(ApiError) as excinfo:
        store.bind("a", "default", "n2")
    assert excinfo.value.status == 409


def test_karpenter_crds_serve_every_generation(store: Store) -> None:
    assert len(install_karpenter_crds(store)) == 7  # NodePool, Provisioner, NodeOverlay and the node classes
    assert install_karpenter_crds(store) == []  # idempotent
    for resource in ("karpenter.sh/v1/nodepools", "karpenter.sh/v1beta1/nodepools",
                     "karpenter.k8s.aws/v1/ec2nodeclasses", "karpenter.k8s.aws/v1beta1/ec2nodeclasses",
                     "karpenter.sh/v1alpha5/provisioners", "karpenter.k8s.aws/v1alpha1/awsnodetemplates",
                     "karpenter.sh/v1alpha1/nodeoverlays"):
        assert store.list(resource) == []
    store.create("karpenter.sh/v1beta1/nodepools", {"metadata": {"name": "old"}, "spec": {}})
    assert store.get("karpenter.sh/v1/nodepools", "old")["apiVersion"] == "karpenter.sh/v1"
