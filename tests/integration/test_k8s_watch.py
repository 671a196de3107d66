"""Watching for provisionable pods in batches, and big paginated lists, against the local API server."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from nodescale.k8s import listing
from nodescale.k8s.watch import PendingWatchReader, settled_pending_pods, watch_pending_pods
from sim.kube.store import Store
from tests.integration import helpers
from tests.integration.helpers import create_pod, new_namespace, serve

pytestmark = pytest.mark.integration


sim = helpers.kube_api_fixture("sim")


def unschedulable(ns: str, name: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }


def collect(api, ns: str, seconds: float, **kwargs) -> tuple[list, threading.Thread, list]:
    """Run the watch in a thread; batches land in the returned list with their arrival time."""
    batches: list = []
    errors: list = []

    def run() -> None:
        try:
            for batch in watch_pending_pods(api, time.monotonic() + seconds, namespace=ns, **kwargs):
                batches.append((time.monotonic(), sorted(p["metadata"]["name"] for p in batch.new), batch))
        except Exception as exc:  # noqa: BLE001 - surfaced by the test's assertion
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return batches, thread, errors


def test_pods_arrive_in_batches_closed_by_a_quiet_second(sim):
    store, _, api, admin = sim
    ns = new_namespace(admin, "w-")
    create_pod(admin, unschedulable(ns, "early"))
    start = time.monotonic()
    batches, thread, errors = collect(api, ns, 4.5)
    time.sleep(2.0)
    for i in range(3):
        create_pod(admin, unschedulable(ns, f"burst-{i}"))
        last_at = time.monotonic()
        time.sleep(0.1)
    # Not provisionable: the provisioner must not be woken for it.
    create_pod(admin, {**unschedulable(ns, "other"), "spec": {"schedulerName": "x", "containers": [{"name": "c", "image": "x"}]}})
    thread.join(10)
    assert not errors and not thread.is_alive()
    assert [names for _, names, _ in batches] == [["early"], ["burst-0", "burst-1", "burst-2"]]
    first_at, _, _ = batches[0]
    assert first_at - start < 2.5
    second_at, _, second = batches[1]
    print(f"\nburst batch delivered {second_at - last_at:.2f}s after its last pod")
    assert 0.8 <= second_at - last_at < 2.0
    assert sorted(p["metadata"]["name"] for p in second.pending) == ["burst-0", "burst-1", "burst-2", "early"]
    assert time.monotonic() - start < 6.5  # stopped at its deadline


def test_a_steady_trickle_is_cut_at_the_maximum_batch_time(sim):
    _, _, api, admin = sim
    ns = new_namespace(admin, "w-")
    batches, thread, errors = collect(api, ns, 3.5, quiet=0.5, max_wait=1.2)
    time.sleep(0.3)
    for i in range(8):
        create_pod(admin, unschedulable(ns, f"p{i}"))
        time.sleep(0.3)
    thread.join(10)
    assert not errors
    assert len(batches) >= 2
    for _, _, batch in batches:
        assert batch.closed_at - batch.opened_at <= 1.2 + 0.3
    assert sorted(n for _, names, _ in batches for n in names) == [f"p{i}" for i in range(8)]


def test_an_expired_resource_version_leads_to_a_relist(tmp_path):
    store = Store(watch_history=5)
    server, api, admin = serve(store, tmp_path)
    try:
        for i in range(20):
            store.create("v1/pods", unschedulable("default", f"p{i}"))
        messages: queue.Queue = queue.Queue()
        reader = PendingWatchReader(api, "default", "2", time.monotonic() + 3, messages, time.monotonic)
        reader.start()
        kind, items = messages.get(timeout=3)
        reader.halt()
        reader.join(3)
    finally:
        api.close()
        admin.close()
        server.stop()
    assert kind == "list"
    assert len(items) == 20
    assert not reader.is_alive()


def test_listing_many_pods_page_by_page(tmp_path):
    store = Store()
    count = 5_000
    for n in range(10):
        store.create("v1/namespaces", {"metadata": {"name": f"ns{n}"}})
    for i in range(count):
        store.create("v1/pods", {
            "metadata": {"name": f"p{i:05d}", "namespace": f"ns{i % 10}", "labels": {"app": f"a{i % 7}"}},
            "spec": {"nodeName": f"n{i % 500}", "containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
            "status": {"phase": "Running"},
        })
    server, api, admin = serve(store, tmp_path)
    try:
        start = time.monotonic()
        result = listing.list_pods(api)
        seconds = time.monotonic() - start
        print(f"\nlisted {len(result.items)} pods in {seconds:.2f}s ({len(result.items) / seconds:.0f} pods/s)")
        grouped = listing.group_by_node(result.items)
    finally:
        api.close()
        admin.close()
        server.stop()
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in result.items}) == count
    assert len(grouped) == 500 and all(len(v) == 10 for v in grouped.values())


def test_settled_pending_pods_returns_a_burst_arriving_in_two_halves_as_one_batch(sim):
    """#32 Bursts: the one-pass provisioner's wait is the watch's first batch: pods created 0.5 s after it
    started join the ones pending then, and it returns a quiet second after the last of them."""
    _, _, api, admin = sim
    ns = new_namespace(admin, "w-")
    create_pod(admin, unschedulable(ns, "first"))

    def second_half() -> None:
        create_pod(admin, unschedulable(ns, "second"))
        created.append(time.monotonic())

    created: list[float] = []
    timer = threading.Timer(0.5, second_half)
    timer.start()
    batch = settled_pending_pods(api, time.monotonic() + 5.0, namespace=ns)
    returned = time.monotonic()
    timer.join()

    assert batch is not None
    assert sorted(p["metadata"]["name"] for p in batch.pending) == ["first", "second"]
    assert 0.8 <= returned - created[0] < 2.5


def test_settled_pending_pods_returns_none_at_once_when_nothing_is_pending(sim):
    """#32 Bursts: with no pod pending there is no burst to wait for."""
    _, _, api, admin = sim
    ns = new_namespace(admin, "w-")
    started = time.monotonic()
    assert settled_pending_pods(api, time.monotonic() + 5.0, namespace=ns) is None
    assert time.monotonic() - started < 0.8  # less than the quiet second a batch waits for
