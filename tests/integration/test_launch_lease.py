"""#27.7: the launch lease holds for a slow holder, and a holder that lost it launches nothing.

Its 60 s TTL was never renewed: a pass stalled under the lease before CreateFleet lost it to a second pass,
and both launched for the same two pods (4 instances where 2 were needed; sim's moto ignored the Fleet's
ClientToken, so the second request launched again). Here the environment's clock runs SPEED times faster
than real time, so the TTL is 3 s of real time; two `provision --once` processes run as two invocations.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
import yaml

from nodescale.k8s.raw import request_json
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env
from tests.integration.helpers import EXAMPLES, ROOT, new_namespace, put_pool

pytestmark = pytest.mark.integration

SPEED = 20.0  # the lease's 60 s TTL is 3 s of real time
# Real seconds the first pass is stuck: 300 s on the clock, five TTLs, and longer than the second pass takes
# to start and reach the lease on a busy machine (it waits for the lease 20 s at most).
STALL = 15.0

env = helpers.environment_fixture("launch-lease", speed=SPEED)
sim = helpers.emptied_environment_fixture(keep_pools=True)


@pytest.fixture(scope="module", autouse=True)
def pool(env: Environment) -> None:
    put_pool(env, (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "default")


def two_pending_pods(sim: Environment) -> list[str]:
    """Two inflate pods in a new namespace, pending: their "namespace/name" keys."""
    api = sim.kube_api_client()
    ns = new_namespace(api)
    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"]["namespace"] = ns
    doc["spec"]["replicas"] = 2
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
    helpers.wait_for("the pods", lambda: len(helpers.pods(sim, ns)) == 2)
    return sorted(f"{ns}/{p['metadata']['name']}" for p in helpers.pods(sim, ns))


def needed(sim: Environment) -> int:
    """What one pass launches for the pods (its dry run's plan)."""
    planned = subprocess.run([sys.executable, "-m", "nodescale.cli", "provision", "--once", "--dry-run", "-o", "json"],
                             capture_output=True, text=True, env=deployed_env(sim), timeout=180, cwd=ROOT)
    assert planned.returncode == 0, planned.stderr
    return len(json.loads(planned.stdout)["planned"])


def start_pass(sim: Environment) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nodescale.cli", "provision", "--once", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=deployed_env(sim), cwd=ROOT)


def summary(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    return json.loads(out)


def stall_first_pass_under_the_lease(sim: Environment, seconds: float = STALL) -> subprocess.Popen[str]:
    """A pass that holds the lease and is stuck in the last call before its CreateFleet (its launch
    template's look-up) for ``seconds``."""
    sim.add_aws_fault(kind="delay", service="ec2", action="DescribeLaunchTemplates", seconds=seconds, count=1)
    first = start_pass(sim)
    helpers.wait_for("the first pass to stall under the lease", lambda: any(
        c.get("delayed") for c in sim.aws_calls(service="ec2", action="DescribeLaunchTemplates")), timeout=60)
    return first


def fleets(sim: Environment) -> list[dict[str, Any]]:
    return sim.aws_calls(service="ec2", action="CreateFleet")


def test_a_slow_holder_keeps_the_lease_and_the_second_pass_launches_nothing(sim: Environment) -> None:
    """#27.7: the stalled pass renews its lease (on the simulated clock) through a stall of five TTLs, so the
    second pass waits for it, then finds its instances in flight and launches nothing: what one pass
    launches for 2 pods, in one pass's CreateFleet calls. Before, the second pass took the expired lease
    and launched too (4 instances for 2 pods; on an EC2 that honours the ClientToken, a second CreateFleet
    answered with the first one's instances)."""
    two_pending_pods(sim)
    want = needed(sim)
    before = set(helpers.instance_ids(sim))
    sim.clear_aws_calls()

    first = stall_first_pass_under_the_lease(sim)
    second = start_pass(sim)
    slow, other = summary(first), summary(second)

    new = set(helpers.instance_ids(sim)) - before
    assert len(new) == len(slow["launches"]) == want >= 1, (slow, other)
    assert {x["instanceId"] for x in slow["launches"]} == new
    assert other["launches"] == [] and "LeaseLost" not in slow["errors"], other
    assert not any(c.get("idempotentReplay") for c in fleets(sim)), "a second pass sent the same CreateFleet"


def test_a_holder_frozen_past_its_ttl_does_not_launch_after_another_took_the_lease(sim: Environment) -> None:
    """#27.7: a pass frozen (SIGSTOP: its heartbeat stops too) for two TTLs while holding the lease loses
    it to a second pass, which launches for the 2 pods; once thawed, the frozen pass's check before
    CreateFleet finds the lease taken and it launches nothing (LeaseLost), so the total is what one pass
    launches. Before, it launched as well."""
    two_pending_pods(sim)
    want = needed(sim)
    before = set(helpers.instance_ids(sim))
    sim.clear_aws_calls()

    first = stall_first_pass_under_the_lease(sim, seconds=2.0)
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = start_pass(sim)
        taker = summary(second)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    frozen = summary(first)

    new = set(helpers.instance_ids(sim)) - before
    assert len(new) == len(taker["launches"]) == want >= 1, (taker, frozen)
    assert frozen["launches"] == [] and frozen["errors"].get("LeaseLost") == 1, frozen
    assert not any(c.get("idempotentReplay") for c in fleets(sim)), "the frozen pass sent its CreateFleet"
