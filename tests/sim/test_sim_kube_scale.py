"""The local Kubernetes API at the scale the product must handle: 5,000 nodes and 50,000 pods.

Timings are printed (run with `-s` to see them), not asserted: the machine's load decides them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from sim.aws.constants import KUBE_ADMIN_TOKEN
from sim.clock import Clock
from sim.kube.server import KubeServer
from sim.kube.store import Store

pytestmark = pytest.mark.integration

NODES = 5_000
PODS = 50_000


@pytest.fixture(scope="module")
def big_cluster() -> Iterator[client.CoreV1Api]:
    store = Store(Clock())
    started = time.perf_counter()
    for index in range(NODES):
        store.create("v1/nodes", {
            "metadata": {"name": f"ip-10-0-{index // 250}-{index % 250}.ec2.internal",
                         "labels": {"karpenter.sh/nodepool": f"pool-{index % 4}"}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
    for index in range(PODS):
        node = index % NODES
        store.create("v1/pods", {
            "metadata": {"name": f"app-{index}", "labels": {"app": f"app-{index % 100}"}},
            "spec": {"nodeName": f"ip-10-0-{node // 250}-{node % 250}.ec2.internal", "containers": [
                {"name": "app", "image": "public.ecr.aws/nginx/nginx:1.27",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        }, "default")
    print(f"\nseeded {NODES} nodes and {PODS} pods in {time.perf_counter() - started:.1f} s")
    server = KubeServer(store).start()
    configuration = client.Configuration(host=server.url)
    configuration.api_key = {"authorization": KUBE_ADMIN_TOKEN}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    api_client = client.ApiClient(configuration)
    try:
        yield client.CoreV1Api(api_client)
    finally:
        api_client.close()
        server.stop()


def test_listing_fifty_thousand_pods(big_cluster: client.CoreV1Api) -> None:
    for attempt in ("first (serializes)", "second (cached)"):
        started = time.perf_counter()
        response = big_cluster.list_pod_for_all_namespaces(_preload_content=False)
        body = response.data
        fetched = time.perf_counter() - started
        items = json.loads(body)["items"]
        print(f"list {len(items)} pods, {attempt}: {fetched:.2f} s over HTTP, "
              f"{time.perf_counter() - started:.2f} s with json.loads ({len(body) / 1e6:.0f} MB)")
        assert len(items) == PODS
        assert len({item["metadata"]["name"] for item in items}) == PODS


def test_paging_and_selectors_at_scale(big_cluster: client.CoreV1Api) -> None:
    started = time.perf_counter()
    seen, token, pages = 0, None, 0
    while True:
        page = json.loads(big_cluster.list_namespaced_pod(
            "default", limit=5_000, _continue=token, _preload_content=False).data)
        seen += len(page["items"])
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
    print(f"paged {seen} pods in {pages} pages: {time.perf_counter() - started:.2f} s")
    assert (seen, pages) == (PODS, 10)
    started = time.perf_counter()
    on_node = json.loads(big_cluster.list_pod_for_all_namespaces(
        field_selector="spec.nodeName=ip-10-0-0-7.ec2.internal", _preload_content=False).data)["items"]
    by_label = json.loads(big_cluster.list_namespaced_pod(
        "default", label_selector="app=app-7", _preload_content=False).data)["items"]
    nodes = json.loads(big_cluster.list_node(
        label_selector="karpenter.sh/nodepool=pool-1", _preload_content=False).data)["items"]
    print(f"field selector, label selector and node list: {time.perf_counter() - started:.2f} s")
    assert len(on_node) == PODS // NODES
    assert len(by_label) == PODS // 100
    assert len(nodes) == NODES // 4
