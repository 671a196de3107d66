"""Scale (issues 8 and 18): listing a big cluster, 1,000 `inflate` pods scaled out and back in on `sim/`,
and the large scale run of bench/scalerun.py at a small size.

The 2,000-pod run with hostname spread takes a node per pod and lives in `bench/scale.py` (make bench).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import scale, scalerun
from nodescale.interruption.queue import BATCH_SIZE
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


def test_the_scale_run_at_small_size_completes_within_the_stacks_limits_and_slices_its_disruption_passes() -> None:
    """bench/scalerun.py (issue 18) at 16 nodes, so it cannot rot: scale-out of the mix, an interruption
    wave, scale-in to 30% and consolidation until quiet, with the disruption pass split (threshold 8
    nodes) into slices of NodePools, each slice run through the handler as its asynchronous invocation."""
    result = scalerun.scale_run(16, cap_seconds=600, slice_nodes=8)
    for line in scalerun.report_lines(result):
        print(line)
    assert [(p.name, p.done) for p in result.phases] == [
        ("scale-out", True), ("interruption", True), ("scale-in and consolidation", True)]
    assert result.peak_pods >= 16 * 10 and result.interrupted >= 1
    assert result.final_nodes < result.peak_nodes  # consolidation removed what scale-in left over
    # As kube-scheduler places them: never two pods of a hostname anti-affinity Deployment on one node, so the
    # consolidation could not go below one node per such pod.
    assert result.crowded == 0
    edge = sum(max(1, int(d["spec"]["replicas"] * scalerun.SCALE_IN_SHARE)) for d in scalerun.workloads(16)
               if d["metadata"]["name"].endswith("-edge"))
    assert result.final_nodes >= edge
    figures = scalerun.function_figures(result)
    assert set(figures) == {"provisioner", "interruption", "disruption"}
    assert all(f["withinTimeout"] and f["withinMemory"] for f in figures.values()), figures
    assert figures["provisioner"]["fullPodListsTotal"] <= 1  # one cold list; watches after
    # The wave came as the stack delivers it: SQS batches of the queue's batch size, one invocation each.
    wave = [i for i in result.invocations if i.function == "interruption" and i.phase == "interruption"]
    assert len(wave) == -(-result.interrupted // BATCH_SIZE)
    assert all(i.summary["batchItemFailures"] == [] for i in wave), [i.summary for i in wave]
    assert sum(len(i.summary["events"]) for i in wave) == result.interrupted
    disruption = [i for i in result.invocations if i.function == "disruption"]
    fanned = [i for i in disruption if len(i.summary["slices"]) > 1]
    slices = [i for i in disruption if len(i.summary["slices"]) == 1]
    assert fanned and len(slices) >= len(fanned) * 2
    assert all(not i.summary["decisions"] for i in fanned)  # the scheduled run only cleans up and fans out
    decided = [(i, d) for i in slices for d in i.summary["decisions"]]
    assert decided, "no slice made a decision"
    for invocation, decision in decided:
        pools = {result.pool_of.get(n, "?") for n in decision["nodes"]}
        assert pools <= set(invocation.summary["slices"][0]), (decision, invocation.summary["slices"])


def test_the_scale_run_checks_against_the_sizes_a_deploy_would_set() -> None:
    """`--function-memory` / `--function-timeout` take what `cdk deploy -c functionMemory=...` takes."""
    from infra.config import ConfigError
    from infra.function_specs import DISRUPTION

    timeouts, memories = scalerun.function_limits("provisioner=3008", "interruption=300")
    assert (memories["provisioner"], timeouts["interruption"]) == (3008, 300)
    assert (memories["disruption"], timeouts["disruption"]) == (DISRUPTION.memory_mb, DISRUPTION.timeout_seconds)
    with pytest.raises(ConfigError, match="allowed is a whole number of MB from 128 to 10240"):
        scalerun.function_limits("provisioner=20000")
