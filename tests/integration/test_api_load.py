"""The provisioner's load on the API server, by sim's counters (`/sim/v1/stats`).

Several provisioner runs in one warm process list every pod at most once; the rest is watch events
(from the last resourceVersion) and field-selected lists of the pending pods.
"""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from nodescale.k8s import podcache
from nodescale.k8s.listing import PENDING_FIELD_SELECTOR
from nodescale.k8s.raw import request_json
from nodescale.usecases import world
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("apiload")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

PODS = 2_000
NODES = 20
RUNS = 4


def stats(sim: Environment, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(f"{sim.kube_url}/sim/v1/stats", method=method)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def pod_doc(name: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name}, "spec": spec}


def create_pods(sim: Environment, ns: str, names: list[str], nodes: bool = True) -> None:
    api = sim.kube_api_client()

    def create(index_name: tuple[int, str]) -> None:
        index, name = index_name
        node = f"ghost-{index % NODES}" if nodes else None
        request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod_doc(name, node))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, enumerate(names)))


def test_warm_runs_list_pods_once_then_watch(sim: Environment, rt: Any, ns: str) -> None:
    create_pods(sim, ns, [f"p-{i}" for i in range(PODS)])
    podcache.forget_all()
    stats(sim, "DELETE")
    for run in range(RUNS):
        if run:
            # Churn between runs: new pods bound, some gone, as a minute of a live cluster brings.
            create_pods(sim, ns, [f"new-{run}-{i}" for i in range(10)])
            request_json(sim.kube_api_client(), "DELETE", f"/api/v1/namespaces/{ns}/pods/p-{run}",
                         body={"gracePeriodSeconds": 0})
        provisioning.provision_once(rt)
    pods = stats(sim)["resources"]["pods"]
    assert pods["list"]["fullLists"] == 1, pods
    assert pods["watch"]["requests"] >= RUNS - 1, pods
    # Every other pod list was field-selected (the pending pods): one page each, never the bound pods; two
    # a run: the wait for a burst to settle (#32 Bursts) and the world's read.
    assert pods["list"]["requests"] == 1 + (PODS // 500 - 1) + 2 * RUNS, pods
    assert pods["list"]["objects"] <= PODS + RUNS * 5, pods
    assert pods["list"]["fromCache"] == pods["list"]["requests"] - (PODS // 500 - 1), pods
    assert pods["watch"]["events"] >= (RUNS - 1) * 10, pods


def test_cached_world_matches_a_full_list(sim: Environment, rt: Any, ns: str) -> None:
    create_pods(sim, ns, [f"p-{i}" for i in range(200)])
    create_pods(sim, ns, [f"pending-{i}" for i in range(3)], nodes=False)
    podcache.forget_all()
    read_world(rt, pod_cache=True)  # cold: lists
    create_pods(sim, ns, [f"late-{i}" for i in range(20)])
    request_json(sim.kube_api_client(), "DELETE", f"/api/v1/namespaces/{ns}/pods/p-0", body={"gracePeriodSeconds": 0})
    cached = read_world(rt, pod_cache=True)  # warm: watches
    listed = read_world(rt)
    assert {k: sorted(p.key for p in v) for k, v in cached.pods_by_node.items()} == {
        k: sorted(p.key for p in v) for k, v in listed.pods_by_node.items()
    }
    assert sorted(p.key for p in cached.pending) == sorted(p.key for p in listed.pending)


def test_expired_version_lists_again(sim: Environment, rt: Any, ns: str) -> None:
    cache = podcache.PodCache()
    cache.sync(rt.api)
    cache.resource_version = "-5"  # older than anything sim still holds: the watch answers 410 Gone
    report = cache.sync(rt.api)
    assert report.how == "relist"
    assert cache.resource_version and int(cache.resource_version) > 0


def test_a_warm_cache_ahead_of_the_server_lists_its_current_state(sim: Environment, rt: Any, ns: str) -> None:
    """A warm pod cache whose version the server has not reached (etcd restored from a backup, or a new cluster at
    the same address) made every pass fail with 504 "Too large resource version" (a whole test module failed once a
    new sim took a previous one's port); the pass now lists the server's current state instead."""
    cache = podcache.shared(rt.api)
    world.read_pods_cached(rt)
    cache.resource_version = str(int(cache.resource_version) + 100_000)
    world.read_pods_cached(rt)
    assert 0 < int(cache.resource_version) < 100_000


def test_list_resource_version_rules(sim: Environment, rt: Any) -> None:
    api = sim.kube_api_client()
    current = request_json(api, "GET", "/api/v1/pods", {"limit": 1})["metadata"]["resourceVersion"]
    for query, status in (
        ({"resourceVersionMatch": "NotOlderThan"}, 400),
        ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, 400),
        ({"resourceVersion": "5", "continue": "abc"}, 400),
        ({"resourceVersion": str(int(current) + 1000), "resourceVersionMatch": "NotOlderThan"}, 504),
        ({"resourceVersion": "1", "resourceVersionMatch": "Exact"}, 410),
    ):
        with pytest.raises(Exception) as caught:
            request_json(api, "GET", "/api/v1/pods", query)
        assert getattr(caught.value, "status", None) == status, query
    page = request_json(api, "GET", "/api/v1/pods", {"resourceVersion": current,
                                                     "resourceVersionMatch": "NotOlderThan",
                                                     "fieldSelector": PENDING_FIELD_SELECTOR})
    assert int(page["metadata"]["resourceVersion"]) >= int(current)


def test_the_cache_keeps_pods_without_what_no_decision_reads(sim: Environment, rt: Any, ns: str) -> None:
    """Listed (cold) and watched (warm) alike: the container's runtime fields are gone, its requests kept."""
    def create(name: str) -> None:
        doc = pod_doc(name, "ghost-0")
        doc["spec"]["containers"][0] |= {"env": [{"name": "A", "value": "1"}], "command": ["/pause"],
                                         "livenessProbe": {"exec": {"command": ["true"]}}}
        request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=doc)

    cache = podcache.PodCache()
    create("listed")
    assert cache.sync(rt.api).how == "list"
    create("watched")
    assert cache.sync(rt.api).how == "watch"
    for name in ("listed", "watched"):
        [container] = cache.pods[f"{ns}/{name}"]["spec"]["containers"]
        assert container == {"name": "c", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}, container
