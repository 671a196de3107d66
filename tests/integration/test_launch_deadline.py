"""#32, 10,000 nodes with the stack's default sizes: a provisioner pass starts no Fleet request past its time.

One pass planned and launched 10,000 nodes in 512 s against the function's 180 s timeout; Lambda would have
ended it mid-launch, its summary and the NodePools' status never written. Now each pass stops starting Fleet
requests ``LAUNCH_RESERVE_SECONDS`` (or a fifth of a shorter invocation's time) before it must end, and leaves the pods it did not launch for
to the next run, which launches for them.
"""

from __future__ import annotations

import time

import pytest

from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, put_pool
from tests.integration.test_launch_lease import two_pending_pods

pytestmark = pytest.mark.integration

STALL = 4.0  # real seconds the pass's last look-up before its CreateFleet takes

env = helpers.environment_fixture("launch-deadline")
sim = helpers.emptied_environment_fixture(keep_pools=True)
rt = helpers.runtime_fixture()


@pytest.fixture(scope="module", autouse=True)
def pool(env: Environment) -> None:
    put_pool(env, (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "default")


def test_a_pass_out_of_time_starts_no_fleet_and_the_next_run_launches_for_its_pods(
        sim: Environment, rt: Runtime) -> None:
    pods = two_pending_pods(sim)
    # The pass reaches its CreateFleet after its invocation's launching time has run out.
    sim.add_aws_fault(kind="delay", service="ec2", action="DescribeLaunchTemplates", seconds=STALL, count=1)
    # The invocation's end such that its last moment to launch falls in the middle of the stall.
    now = time.monotonic()
    deadline = now + (STALL / 2) / (1 - provisioning.LAUNCH_RESERVE_SHARE)
    assert provisioning.launch_cutoff(deadline, now) == pytest.approx(now + STALL / 2)
    late = provisioning.provision_once(rt, deadline=deadline)

    assert late.launches == [] and late.errors.get("OutOfTime") == 1, late
    assert sorted(u.pod for u in late.unschedulable) == pods
    assert all("ran out of time" in u.reason and "next run" in u.reason for u in late.unschedulable)
    assert sim.aws_calls(service="ec2", action="CreateFleet") == []

    following = provisioning.provision_once(rt)
    assert sorted(p for launch in following.launches for p in launch.pods) == pods, following
