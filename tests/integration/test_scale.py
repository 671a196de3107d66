"""Scale (issue 8): listing a big cluster, and 1,000 `inflate` pods scaled out and back in on `sim/`.

The 2,000-pod run with hostname spread takes a node per pod and lives in `bench/scale.py` (make bench).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import scale
from nodescale.k8s.raw import request_json
from sim.clock import Clock
from sim.kube.store import Store

pytestmark = pytest.mark.integration

# The targets are 10 s and 1 GiB on an idle machine; the suite runs beside other tests on 2 cores,
# so the time bound here only catches a regression of the kind that builds model objects (~10 s more).
LIST_SECONDS_BOUND = 30.0


@pytest.fixture(scope="module")
def big_api() -> Iterator[str]:
    store = Store(Clock())
    scale.seed_store(store)
    server = scale.listing_server(store)
    try:
        yield server.url
    finally:
        server.stop()


def test_listing_50000_pods_and_5000_nodes_makes_plain_dicts_within_memory(big_api: str) -> None:
    report = scale.list_in_fresh_process(big_api)
    print(f"\nlisted {report['nodes']} nodes and {report['pods']} pods in {report['seconds']:.2f} s, "
          f"peak RSS {report['peakRssBytes'] / 2**20:.0f} MiB")
    assert (report["nodes"], report["pods"], report["distinctPods"]) == (scale.NODES, scale.PODS, scale.PODS)
    assert report["itemsArePlainDicts"] and report["deserializeCalls"] == 0
    assert report["peakRssBytes"] < scale.LIST_TARGET_BYTES
    assert report["seconds"] < LIST_SECONDS_BOUND


def test_1000_inflate_pods_run_within_2_minutes_and_scale_in_removes_every_node() -> None:
    with tempfile.TemporaryDirectory(prefix="scale-test-") as tmp, \
            scale.sim_runtime(Path(tmp), cpu_limit=10_000) as sim:
        run = scale.scale_out_and_in(sim.env, sim.rt, 1000, spread=False, cap=scale.SCALE_OUT_TARGET_SECONDS)
        print(f"\n1000 pods Running in {run.out_seconds} s on {run.nodes} nodes; scaled in in {run.in_seconds} s")
        assert run.out_seconds is not None, f"only {run.running} of 1000 pods Running after 2 minutes"
        assert run.running == 1000 and run.nodes == run.launches > 0
        assert run.in_seconds is not None, f"{run.nodes_left} nodes left after scale-in"
        ec2 = sim.env.boto3_client("ec2")
        live = ec2.describe_instances(Filters=[
            {"Name": "tag:nodescale.io/cluster", "Values": [sim.env.cluster]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
        assert live == []
        deadline = time.monotonic() + 10
        while request_json(sim.env.kube_api_client(), "GET", "/api/v1/namespaces/default/pods")["items"]:
            assert time.monotonic() < deadline, "inflate's pods never went"
            time.sleep(0.2)
