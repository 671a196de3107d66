"""How a pass registers the nodes of a burst (#33, found by the 10,000-node run): each node's registration
(labels, its pool's taints, ``karpenter.sh/unregistered`` removed) carries the termination finalizer in the
same write, and the nodes are written side by side. One node at a time, with the finalizer read and written
apart, a pass that found 5,000 new nodes spent about 800 s writing them before it planned anything, far past
the provisioner's 180 s timeout."""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from nodescale.k8s import finalizers as k8s_finalizers
from nodescale.k8s import nodes as k8s_nodes
from nodescale.model import labels as wk
from nodescale.usecases.provision.registration import sync_nodes
from nodescale.usecases.world import World
from tests.builders import cluster_nodes
from tests.unit.test_world import world  # noqa: F401  (the fixture: nodes "ready" and "booting", both ours)


class FakeNodes:
    """The API server's nodes, answering GET and PATCH slowly enough that writes made side by side overlap."""

    def __init__(self, read: World) -> None:
        self.nodes = {n.name: copy.deepcopy(n.raw) for n in read.nodes}
        for i, node in enumerate(self.nodes.values()):
            node["metadata"]["resourceVersion"] = str(10 + i)
        self.calls: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def request_json(self, api: Any, method: str, path: str, query: Any = None, body: Any = None,
                     content_type: str | None = None, timeout: Any = None) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, path, body))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(0.05)
        with self.lock:
            self.in_flight -= 1
        node = self.nodes[path.rsplit("/", 1)[-1]]
        if method == "PATCH" and isinstance(body, list):  # the finalizer's JSON patch: test, then add
            test, add = body
            assert test["op"] == "test" and add["op"] == "add"
            node["metadata"]["finalizers"] = [*node["metadata"].get("finalizers", []), wk.TERMINATION_FINALIZER]
        elif method == "PATCH":
            meta = body.get("metadata") or {}
            if meta.get("resourceVersion") != node["metadata"]["resourceVersion"]:
                raise AssertionError("a write not guarded by the version it read")
            node["metadata"].setdefault("labels", {}).update(meta.get("labels") or {})
            if "finalizers" in meta:
                node["metadata"]["finalizers"] = meta["finalizers"]
            if "taints" in (body.get("spec") or {}):
                node["spec"]["taints"] = body["spec"]["taints"]
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(node)


@pytest.fixture
def fake(world: World, monkeypatch: pytest.MonkeyPatch) -> FakeNodes:  # noqa: F811
    api = FakeNodes(world)
    monkeypatch.setattr(k8s_nodes, "request_json", api.request_json)
    monkeypatch.setattr(k8s_finalizers, "request_json", api.request_json)
    return api


def test_a_registering_node_gets_its_labels_and_its_termination_finalizer_in_one_write(
        world: World, fake: FakeNodes) -> None:  # noqa: F811
    synced = sync_nodes(SimpleNamespace(api=None), world)  # type: ignore[arg-type]
    for name in ("ready", "booting"):
        writes = [body for method, path, body in fake.calls if method == "PATCH" and path.endswith("/" + name)]
        assert len(writes) == 1, f"{name}: {len(writes)} writes"
        assert writes[0]["metadata"]["labels"][wk.REGISTERED] == "true"
        assert writes[0]["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
        assert fake.nodes[name]["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
        assert synced.node(name).labels[wk.REGISTERED] == "true"
    # the two nodes' reads and writes overlapped instead of queueing one after the other
    assert fake.most_in_flight >= 2


def test_a_node_registered_before_gets_only_the_finalizer_it_lacks(world: World, fake: FakeNodes) -> None:  # noqa: F811
    """A node registered by an older release (labels synced, no finalizer) still gets the finalizer, on its own."""
    sync_nodes(SimpleNamespace(api=None), world)  # type: ignore[arg-type]
    for node in fake.nodes.values():
        node["metadata"]["finalizers"] = []
    registered = replace(world, nodes=cluster_nodes(*(copy.deepcopy(n) for n in fake.nodes.values())))
    fake.calls.clear()
    sync_nodes(SimpleNamespace(api=None), registered)  # type: ignore[arg-type]
    writes = [body for method, _path, body in fake.calls if method == "PATCH"]
    assert len(writes) == 2 and all(isinstance(body, list) for body in writes)  # one JSON patch each
    assert all(n["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER] for n in fake.nodes.values())
