"""The provisioner's per-minute load on the API server, by sim's counters (`/sim/v1/stats`).

A cluster of `PODS` pods on `PODS // 10` nodes is served by sim's API server; each simulated minute
changes `CHURN` of the pods (rescheduled: deleted and created elsewhere, and a few pending ones
added), then reads the pods as the provisioner does (`read_pods_cached`: its warm pod cache synced
by a watch, plus the field-selected list of pending pods). The first minute is a cold container (one
full list); the next ones are warm. The figure printed is what one warm minute costs the API server,
next to what listing every pod each minute would.

`python -m bench.apiload [PODS]` (default 100,000).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

from bench import print_lines
from bench.scale import listing_server, node_name, seed_store

PODS = 100_000
MINUTES = 4
CHURN = 0.01  # share of the pods replaced each minute
PENDING_PER_MINUTE = 20


def _churn(store: Any, minute: int, pods: int, nodes: int) -> None:
    changes = max(1, int(pods * CHURN))
    for i in range(changes):
        index = (minute * changes + i) % pods
        name = f"app-{index}"
        if store.peek("v1/pods", name, "default") is not None:
            store.delete("v1/pods", name, "default", grace_period_seconds=0)
        store.create("v1/pods", {
            "metadata": {"name": f"m{minute}-{i}", "labels": {"app": f"app-{i % 100}"}},
            "spec": {"nodeName": node_name((index + 1) % nodes),
                     "containers": [{"name": "app", "image": "nginx",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        }, "default")
    for i in range(PENDING_PER_MINUTE):
        store.create("v1/pods", {"metadata": {"name": f"pending-{minute}-{i}"},
                                 "spec": {"containers": [{"name": "app", "image": "nginx"}]}}, "default")


def _minute(server: Any, api: Any) -> dict[str, Any]:
    from nodescale.k8s import listing, podcache

    server.stats.reset()
    started = time.perf_counter()
    cache = podcache.shared(api)
    report = cache.sync(api)
    version = cache.resource_version
    listing.list_pods(api, field_selector=listing.PENDING_FIELD_SELECTOR, resource_version=version,
                      resource_version_match="NotOlderThan")
    pods = server.stats.report()["resources"].get("pods", {})
    listed, watched = pods.get("list", {}), pods.get("watch", {})
    return {"how": report.how, "seconds": round(time.perf_counter() - started, 2),
            "fullLists": listed.get("fullLists", 0), "listRequests": listed.get("requests", 0),
            "listObjects": listed.get("objects", 0), "listBytes": listed.get("bytes", 0),
            "watchRequests": watched.get("requests", 0), "watchEvents": watched.get("events", 0),
            "watchBytes": watched.get("bytes", 0), "cached": len(cache.pods)}


def measure(pods: int = PODS, minutes: int = MINUTES) -> list[dict[str, Any]]:
    from kubernetes import client

    from sim.aws.constants import KUBE_FUNCTIONS_TOKEN
    from sim.clock import Clock
    from sim.kube.store import Store

    store = Store(Clock())
    nodes = max(1, pods // 10)
    seed_store(store, nodes=nodes, pods=pods)
    server = listing_server(store)
    try:
        config = client.Configuration()
        config.host = server.url
        config.api_key = {"authorization": KUBE_FUNCTIONS_TOKEN}
        config.api_key_prefix = {"authorization": "Bearer"}
        api = client.ApiClient(config)
        out = []
        for minute in range(minutes):
            if minute:
                _churn(store, minute, pods, nodes)
            out.append(_minute(server, api))
        return out
    finally:
        server.stop()


def run(pods: int = PODS) -> Iterator[str]:
    started = time.perf_counter()
    minutes = measure(pods)
    cold, warm = minutes[0], minutes[1:]
    worst = max(warm, key=lambda m: m["listBytes"] + m["watchBytes"])
    yield (f"api load: {pods:,} pods, {int(pods * CHURN):,} replaced + {PENDING_PER_MINUTE} pending a minute; "
           f"cold minute {cold['fullLists']} full list ({cold['listObjects']:,} objects, "
           f"{cold['listBytes'] / 2**20:.1f} MiB, {cold['seconds']} s); warm minute (worst of {len(warm)}): "
           f"{worst['fullLists']} full lists, {worst['listRequests']} field-selected list "
           f"({worst['listObjects']} objects, {worst['listBytes'] / 2**10:.1f} KiB), {worst['watchRequests']} watch "
           f"({worst['watchEvents']:,} events, {worst['watchBytes'] / 2**20:.2f} MiB), {worst['seconds']} s "
           f"(bench {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and not sys.argv[1].isdigit()):
        sys.exit(f"usage: python -m bench.apiload [PODS]  (a whole number; default {PODS:,})")
    count = int(sys.argv[1]) if len(sys.argv) > 1 else PODS
    print_lines(lambda: run(count))
