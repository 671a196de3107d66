"""The local scheduler counts its own binds at once: the events of a big pass wait behind thousands of others
in the controllers' queue, and the next pass must not place pods in room (or beside pods) it already gave."""

from __future__ import annotations

from sim.clock import Clock
from sim.kube.scheduler import Scheduler
from sim.kube.store import Store

READY = [{"type": "Ready", "status": "True"}]


def _node(store: Store, name: str) -> None:
    store.create("v1/nodes", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                              "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                                         "conditions": READY}})


def _pod(store: Store, name: str, anti: bool = False) -> tuple[str, str]:
    spec: dict = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "edge"}}}]}}
    store.create("v1/pods", {"metadata": {"name": name, "labels": {"app": "edge" if anti else "web"}},
                             "spec": spec}, "default")
    return ("default", name)


def _on_nodes(store: Store) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod in store.snapshot("v1/pods", "default"):
        if pod["spec"].get("nodeName"):
            out.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    return out


def test_a_second_pass_before_the_first_ones_events_does_not_overfill_a_node() -> None:
    store = Store(Clock())
    scheduler = Scheduler(store)  # no events delivered at all: as if the queue had not reached them yet
    _node(store, "n1")
    first = [_pod(store, f"a{i}") for i in range(2)]
    assert scheduler.schedule(first) == 2
    second = [_pod(store, f"b{i}") for i in range(2)]
    assert scheduler.schedule(second) == 0  # n1's 2 CPUs are taken
    assert sorted(_on_nodes(store)["n1"]) == ["a0", "a1"]


def test_a_second_pass_before_the_first_ones_events_keeps_anti_affinity() -> None:
    store = Store(Clock())
    scheduler = Scheduler(store)
    _node(store, "n1")
    _node(store, "n2")
    assert scheduler.schedule([_pod(store, "e0", anti=True)]) == 1
    assert scheduler.schedule([_pod(store, "e1", anti=True), _pod(store, "e2", anti=True)]) == 1
    assert sorted(len(pods) for pods in _on_nodes(store).values()) == [1, 1]


def test_an_older_event_arriving_late_does_not_undo_a_bind() -> None:
    store = Store(Clock())
    scheduler = Scheduler(store)
    _node(store, "n1")
    key = _pod(store, "late-0")
    pending_state = store.get("v1/pods", key[1], key[0])
    assert scheduler.schedule([key]) == 1
    scheduler.observe("ADDED", pending_state)  # the creation event, delivered only now
    assert scheduler.schedule([_pod(store, "late-1"), _pod(store, "late-2")]) == 1
