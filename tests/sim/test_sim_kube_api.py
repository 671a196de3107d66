"""Conformance of the local Kubernetes API, driven through the official `kubernetes` client."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from sim.aws.constants import KUBE_ADMIN_TOKEN
from sim.kube.server import KubeServer
from sim.kube.store import Store
from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _pod(name: str, labels: dict[str, str] | None = None, cpu: str = "100m", node: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def _status(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_client_built_from_a_kubeconfig_dict_reaches_the_server(kube: KubeHarness) -> None:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": kube.url}}],
        "users": [{"name": "sim", "user": {"token": KUBE_ADMIN_TOKEN}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
        "current-context": "sim",
    }
    api_client = config.new_client_from_config_dict(kubeconfig)
    namespaces = {ns.metadata.name for ns in client.CoreV1Api(api_client).list_namespace().items}
    assert {"default", "kube-system"} <= namespaces
    assert client.VersionApi(api_client).get_code().major == "1"
    api_client.close()


def test_discovery_lists_core_and_group_resources(kube: KubeHarness) -> None:
    core_resources = {r.name for r in kube.core.get_api_resources().resources}
    assert {"pods", "pods/eviction", "pods/binding", "nodes", "nodes/status", "namespaces", "events"} <= core_resources
    groups = {g.name for g in client.ApisApi(kube.api_client).get_api_versions().groups}
    assert {"apps", "batch", "policy", "coordination.k8s.io", "apiextensions.k8s.io"} <= groups


def test_node_create_get_list_patch_delete(kube: KubeHarness) -> None:
    kube.ready_node("crud-node-1", labels={"pool": "a"})
    node = kube.core.read_node("crud-node-1")
    assert node.metadata.uid and node.metadata.creation_timestamp is not None
    assert node.status.allocatable["cpu"] == "4"
    kube.core.patch_node("crud-node-1", {"metadata": {"labels": {"team": "x"}}})
    listed = kube.core.list_node(label_selector="pool=a,team=x").items
    assert [n.metadata.name for n in listed] == ["crud-node-1"]
    kube.core.delete_node("crud-node-1")
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_node("crud-node-1")
    assert excinfo.value.status == 404
    body = _status(excinfo.value)
    assert body["reason"] == "NotFound" and body["message"] == 'nodes "crud-node-1" not found'


def test_create_twice_is_already_exists_and_missing_name_is_invalid(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    assert excinfo.value.status == 409 and _status(excinfo.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map(ns, {"metadata": {}})
    assert excinfo.value.status == 422 and _status(excinfo.value)["reason"] == "Invalid"
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_config_map("no-such-namespace", {"metadata": {"name": "cm"}})
    assert excinfo.value.status == 404


def test_stale_update_is_a_conflict(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_pod(ns, _pod("p"))
    first = kube.core.read_namespaced_pod("p", ns)
    second = kube.core.read_namespaced_pod("p", ns)
    first.metadata.labels = {"writer": "first"}
    kube.core.replace_namespaced_pod("p", ns, first)
    second.metadata.labels = {"writer": "second"}
    with pytest.raises(ApiException) as excinfo:
        kube.core.replace_namespaced_pod("p", ns, second)
    assert excinfo.value.status == 409
    body = _status(excinfo.value)
    assert body["reason"] == "Conflict"
    assert "the object has been modified; please apply your changes to the latest version" in body["message"]
    assert kube.core.read_namespaced_pod("p", ns).metadata.labels == {"writer": "first"}


def test_resource_version_increases_with_every_write(kube: KubeHarness) -> None:
    ns = kube.namespace()
    created = kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "rv"}})
    patched = kube.core.patch_namespaced_config_map("rv", ns, {"data": {"k": "v"}})
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)


def test_label_and_field_selectors_filter_pods(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_pod(ns, _pod("web-1", {"app": "web", "tier": "front"}, node="sel-node"))
    kube.core.create_namespaced_pod(ns, _pod("web-2", {"app": "web"}))
    kube.core.create_namespaced_pod(ns, _pod("db-1", {"app": "db"}))

    def names(**kwargs: str) -> list[str]:
        return sorted(p.metadata.name for p in kube.core.list_namespaced_pod(ns, **kwargs).items)

    assert names(label_selector="app=web") == ["web-1", "web-2"]
    assert names(label_selector="app!=web") == ["db-1"]
    assert names(label_selector="app in (db, cache)") == ["db-1"]
    assert names(label_selector="app notin (db)") == ["web-1", "web-2"]
    assert names(label_selector="tier") == ["web-1"]
    assert names(label_selector="!tier") == ["db-1", "web-2"]
    assert names(field_selector="spec.nodeName=sel-node") == ["web-1"]
    assert names(field_selector="metadata.name!=web-1,status.phase=Pending") == ["db-1", "web-2"]
    everywhere = kube.core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns}").items
    assert len(everywhere) == 3
    with pytest.raises(ApiException) as excinfo:
        kube.core.list_namespaced_pod(ns, label_selector="app in web")
    assert excinfo.value.status == 400 and _status(excinfo.value)["reason"] == "BadRequest"


def test_pagination_returns_every_item_once(kube: KubeHarness) -> None:
    ns = kube.namespace()
    for index in range(7):
        kube.core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{index}"}})
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = kube.core.list_namespaced_config_map(ns, limit=3, _continue=token)
        seen += [cm.metadata.name for cm in page.items]
        pages += 1
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(seen)
    assert pages == 3 and sorted(seen) == [f"cm-{i}" for i in range(7)]


def test_strategic_merge_patch_cordons_and_taints_a_node(kube: KubeHarness) -> None:
    kube.ready_node("smp-node", taints=[{"key": "old", "value": "x", "effect": "NoSchedule"}])
    # What `kubectl cordon` sends.
    kube.core.patch_node("smp-node", {"spec": {"unschedulable": True}})
    node = kube.core.read_node("smp-node")
    assert node.spec.unschedulable is True
    assert [t.key for t in node.spec.taints] == ["old"]
    # Taints are an atomic list: the patch's list replaces the node's.
    kube.core.patch_node("smp-node", {"spec": {"taints": [
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}})
    node = kube.core.read_node("smp-node")
    assert [(t.key, t.effect) for t in node.spec.taints] == [("karpenter.sh/disrupted", "NoSchedule")]
    # Conditions merge by type on the status subresource.
    kube.core.patch_node_status("smp-node", {"status": {"conditions": [
        {"type": "MemoryPressure", "status": "False"}]}})
    types = {c.type: c.status for c in kube.core.read_node("smp-node").status.conditions}
    assert types == {"Ready": "True", "MemoryPressure": "False"}
    kube.core.patch_node("smp-node", {"spec": {"unschedulable": None}})
    assert kube.core.read_node("smp-node").spec.unschedulable is None


def test_json_and_merge_patches(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm", "labels": {"a": "1"}}, "data": {"x": "1"}})
    kube.core.patch_namespaced_config_map(
        "cm", ns, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}, {"op": "remove", "path": "/data/x"}]
    )
    cm = kube.core.read_namespaced_config_map("cm", ns)
    assert cm.metadata.labels == {"a": "1", "b": "2"} and not cm.data
    kube.core.patch_namespaced_config_map(
        "cm", ns, {"metadata": {"labels": {"a": None}}}, _content_type="application/merge-patch+json"
    )
    assert kube.core.read_namespaced_config_map("cm", ns).metadata.labels == {"b": "2"}


def test_dry_run_changes_nothing(kube: KubeHarness) -> None:
    ns = kube.namespace()
    created = kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}}, dry_run="All")
    assert created.metadata.name == "dry"
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespaced_config_map("dry", ns)
    assert excinfo.value.status == 404


def test_events_leases_and_namespaces(kube: KubeHarness) -> None:
    ns = kube.namespace()
    # A cluster-scoped object's events live in "default" (kube-apiserver's legacyValidateEvent refuses
    # them anywhere else).
    node = f"node-{ns}"
    kube.core.create_namespaced_event("default", {
        "metadata": {"name": f"{node}.17a"},
        "involvedObject": {"kind": "Node", "name": node},
        "reason": "RebalanceRecommendation", "message": "EC2 rebalance recommendation", "type": "Normal",
    })
    events = kube.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    assert [e.reason for e in events] == ["RebalanceRecommendation"]
    coordination = client.CoordinationV1Api(kube.api_client)
    coordination.create_namespaced_lease(ns, {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}})
    lease = coordination.read_namespaced_lease("leader", ns)
    lease.spec.holder_identity = "b"
    coordination.replace_namespaced_lease("leader", ns, lease)
    assert coordination.read_namespaced_lease("leader", ns).spec.holder_identity == "b"
    kube.core.delete_namespace(ns)
    wait_for(lambda: ns not in {n.metadata.name for n in kube.core.list_namespace().items})
    with pytest.raises(ApiException):
        coordination.read_namespaced_lease("leader", ns)


def test_watch_delivers_added_modified_deleted_in_order(kube: KubeHarness) -> None:
    ns = kube.namespace()
    start_rv = kube.core.list_namespaced_config_map(ns).metadata.resource_version
    events: list[tuple[str, str, str]] = []
    ready = threading.Event()

    def consume() -> None:
        stream = watch.Watch()
        ready.set()
        for event in stream.stream(
            kube.core.list_namespaced_config_map, ns, resource_version=start_rv, timeout_seconds=5
        ):
            obj = event["object"]
            events.append((event["type"], obj.metadata.name, (obj.data or {}).get("v", "")))
            if event["type"] == "DELETED":
                stream.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    ready.wait()
    kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"v": "1"}})
    kube.core.patch_namespaced_config_map("w", ns, {"data": {"v": "2"}})
    kube.core.delete_namespaced_config_map("w", ns)
    thread.join(timeout=10)
    assert events == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")]


def test_watch_with_selector_and_initial_list(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_pod(ns, _pod("keep", {"app": "a"}))
    kube.core.create_namespaced_pod(ns, _pod("skip", {"app": "b"}))
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(kube.core.list_namespaced_pod, ns, label_selector="app=a", timeout_seconds=1)
    ]
    # The initial list arrives as ADDED, and only what the selector matches; sim's scheduler may also mark
    # the pod unschedulable within the second, which arrives as MODIFIED of the same pod.
    assert seen[0] == ("ADDED", "keep")
    assert {name for _, name in seen} == {"keep"}


def test_watch_from_a_compacted_resource_version_is_gone() -> None:
    server = KubeServer(Store(watch_history=5)).start()
    configuration = client.Configuration(host=server.url)
    configuration.api_key = {"authorization": KUBE_ADMIN_TOKEN}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    api_client = client.ApiClient(configuration)
    core = client.CoreV1Api(api_client)
    try:
        old_rv = core.list_namespaced_config_map("default").metadata.resource_version
        for index in range(8):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
        with pytest.raises(ApiException) as excinfo:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=2
            ):
                pass
        assert excinfo.value.status == 410
    finally:
        api_client.close()
        server.stop()


def test_custom_resource_definitions_serve_nodepools(kube: KubeHarness) -> None:
    ext = client.ApiextensionsV1Api(kube.api_client)
    ext.create_custom_resource_definition({
        "metadata": {"name": "nodepools.karpenter.sh"},
        "spec": {
            "group": "karpenter.sh",
            "scope": "Cluster",
            "names": {"plural": "nodepools", "singular": "nodepool", "kind": "NodePool", "listKind": "NodePoolList"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
                {"name": "v1beta1", "served": True, "storage": False, "subresources": {"status": {}},
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
            ],
        },
    })
    crd = ext.read_custom_resource_definition("nodepools.karpenter.sh")
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"requirements": []}}, "limits": {"cpu": "1000"}}}
    kube.custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", pool)
    got = kube.custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default")
    assert got["spec"]["limits"] == {"cpu": "1000"} and got["metadata"]["generation"] == 1
    # The same object through the other served version.
    old = kube.custom.get_cluster_custom_object("karpenter.sh", "v1beta1", "nodepools", "default")
    assert old["apiVersion"] == "karpenter.sh/v1beta1" and old["metadata"]["uid"] == got["metadata"]["uid"]
    kube.custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default", {"spec": {"weight": 10}})
    patched = kube.custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default")
    assert patched["spec"]["weight"] == 10 and patched["metadata"]["generation"] == 2
    kube.custom.patch_cluster_custom_object_status(
        "karpenter.sh", "v1", "nodepools", "default", {"status": {"resources": {"cpu": "4"}}}
    )
    listed = kube.custom.list_cluster_custom_object("karpenter.sh", "v1", "nodepools")
    assert listed["items"][0]["status"] == {"resources": {"cpu": "4"}}
    kube.custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", "default")
    assert kube.custom.list_cluster_custom_object("karpenter.sh", "v1", "nodepools")["items"] == []
    ext.delete_custom_resource_definition("nodepools.karpenter.sh")
    with pytest.raises(ApiException) as excinfo:
        kube.custom.list_cluster_custom_object("karpenter.sh", "v1", "nodepools")
    assert excinfo.value.status == 404


def test_finalizers_hold_deletion_until_removed(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.core.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
    kube.core.delete_namespaced_config_map("held", ns)
    held = kube.core.read_namespaced_config_map("held", ns)
    assert held.metadata.deletion_timestamp is not None
    kube.core.patch_namespaced_config_map(
        "held", ns, [{"op": "remove", "path": "/metadata/finalizers"}]
    )
    with pytest.raises(ApiException) as excinfo:
        kube.core.read_namespaced_config_map("held", ns)
    assert excinfo.value.status == 404


def test_graceful_pod_deletion_completes_after_the_grace_period(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("grace-node", labels={"grace": "yes"})
    pod = _pod("slow")
    pod["spec"]["nodeSelector"] = {"grace": "yes"}
    pod["spec"]["terminationGracePeriodSeconds"] = 60
    kube.core.create_namespaced_pod(ns, pod)
    wait_for(lambda: kube.core.read_namespaced_pod("slow", ns).status.phase == "Running")
    kube.core.delete_namespaced_pod("slow", ns)
    terminating = kube.core.read_namespaced_pod("slow", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 60
    kube.clock.advance(61)
    wait_for(lambda: not kube.core.list_namespaced_pod(ns, field_selector="metadata.name=slow").items)
    # Grace 0 removes at once.
    kube.core.create_namespaced_pod(ns, pod)
    wait_for(lambda: kube.core.read_namespaced_pod("slow", ns).spec.node_name)
    kube.core.delete_namespaced_pod("slow", ns, grace_period_seconds=0)
    assert not kube.core.list_namespaced_pod(ns).items


def _pdb_pods(kube: KubeHarness, ns: str, count: int, node: str) -> None:
    for index in range(count):
        pod = _pod(f"guarded-{index}", {"app": "guarded"})
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        kube.core.create_namespaced_pod(ns, pod)
    wait_for(lambda: sum(p.status.phase == "Running" for p in kube.core.list_namespaced_pod(ns).items) == count)


def test_eviction_respects_pod_disruption_budgets(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("pdb-node")
    _pdb_pods(kube, ns, 3, "pdb-node")
    kube.policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "guard"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
    })
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "guarded-0", "namespace": ns}}
    kube.core.create_namespaced_pod_eviction("guarded-0", ns, eviction)
    assert kube.core.read_namespaced_pod("guarded-0", ns).metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_pod_eviction(
            "guarded-1", ns, {**eviction, "metadata": {"name": "guarded-1", "namespace": ns}}
        )
    assert excinfo.value.status == 429
    body = _status(excinfo.value)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert kube.core.read_namespaced_pod("guarded-1", ns).metadata.deletion_timestamp is None
    status = kube.policy.read_namespaced_pod_disruption_budget("guard", ns).status
    assert (status.current_healthy, status.desired_healthy, status.disruptions_allowed, status.expected_pods) == (
        2, 2, 0, 3)


def test_eviction_with_percent_max_unavailable(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("pct-node")
    _pdb_pods(kube, ns, 4, "pct-node")
    kube.policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "half"},
        "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "guarded"}}},
    })
    allowed = []
    for index in range(4):
        try:
            kube.core.create_namespaced_pod_eviction(f"guarded-{index}", ns, {"metadata": {"name": f"guarded-{index}"}})
            allowed.append(index)
        except ApiException as exc:
            assert exc.status == 429
    assert allowed == [0, 1]


def test_binding_subresource_assigns_a_node(kube: KubeHarness) -> None:
    ns = kube.namespace()
    pod = _pod("bind-me")
    pod["spec"]["schedulerName"] = "custom-scheduler"
    kube.core.create_namespaced_pod(ns, pod)
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "bind-me"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "some-node"}}
    kube.core.create_namespaced_pod_binding("bind-me", ns, binding, _preload_content=False)
    assert kube.core.read_namespaced_pod("bind-me", ns).spec.node_name == "some-node"
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_pod_binding("bind-me", ns, binding, _preload_content=False)
    assert excinfo.value.status == 409


def test_injected_faults_fail_the_chosen_calls(kube: KubeHarness) -> None:
    def control(method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{kube.url}/sim/v1/{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    control("POST", "faults", {"status": 500, "verbs": ["list"], "resources": ["nodes"], "count": 2})
    for _ in range(2):
        with pytest.raises(ApiException) as excinfo:
            kube.core.list_node()
        assert excinfo.value.status == 500
    kube.core.list_node()
    control("POST", "faults", {"status": 429, "verbs": ["create"], "resources": ["pods/eviction"]})
    with pytest.raises(ApiException) as excinfo:
        kube.core.create_namespaced_pod_eviction("any", "default", {"metadata": {"name": "any"}})
    assert excinfo.value.status == 429
    report = control("GET", "faults")
    assert report["injected"] == 3
    control("DELETE", "faults")
    # A timeout holds the call past the client's deadline; urllib3's own retries meet it too.
    control("POST", "faults", {"status": "timeout", "verbs": ["get"], "resources": ["namespaces"],
                               "delaySeconds": 0.3})
    with pytest.raises(urllib3.exceptions.HTTPError):
        kube.core.read_namespace("default", _request_timeout=0.1)
    assert control("GET", "faults")["injected"] >= 1
    control("DELETE", "faults")
    assert control("GET", "faults")["rules"] == []
    clock = control("GET", "clock")
    advanced = control("POST", "clock/advance", {"seconds": 3600})
    assert advanced["elapsedSeconds"] >= clock["elapsedSeconds"] + 3600


def test_numeric_quantities_come_back_as_strings_the_client_can_read(kube: KubeHarness) -> None:
    # Manifests often say `cpu: 1`; the real server answers "1", and the client's models need a string.
    body = _pod("numeric-quantities")
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": 1, "memory": 0.5}, "limits": {"cpu": 1.5}}
    # kubectl sends such a manifest as it is; the typed client would refuse to, so send it raw.
    request = urllib.request.Request(
        f"{kube.url}/api/v1/namespaces/default/pods", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KUBE_ADMIN_TOKEN}"},
    )
    urllib.request.urlopen(request).close()
    pod = kube.core.read_namespaced_pod("numeric-quantities", "default")
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "500m"}
    assert pod.spec.containers[0].resources.limits == {"cpu": "1500m"}


def test_an_alias_bomb_in_a_yaml_body_is_a_bad_request_at_once(kube: KubeHarness) -> None:
    """#27.2: kube-apiserver's YAML decoder refuses excessive aliasing; sim's expanded it for minutes."""
    import time
    import urllib.error

    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: default}\ndata:\n"
    body += "".join(f"  {line}\n" for line in lines)
    request = urllib.request.Request(
        f"{kube.url}/api/v1/namespaces/default/configmaps/bomb?fieldManager=test", data=body.encode(),
        method="PATCH",
        headers={"Content-Type": "application/apply-patch+yaml", "Authorization": f"Bearer {KUBE_ADMIN_TOKEN}"},
    )
    start = time.monotonic()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10).close()
    assert time.monotonic() - start < 1
    assert refused.value.code == 400
    assert "excessive aliasing" in json.loads(refused.value.read())["message"]
