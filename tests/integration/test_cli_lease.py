"""The CLI and the functions share one launch lease (issue 12): the stack's DynamoDB table.

`provision`, `disrupt` and `replay` use NODESCALE_TABLE, else the name the stack gives the table for
CLUSTER_NAME (sim/ seeds it under that name); without a table that answers they refuse, unless --no-lease.
Before, a shell without NODESCALE_TABLE took an in-process lease only, and two `provision --once` started
together launched twice the capacity needed in about half the trials.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from nodescale import names
from nodescale.k8s.raw import request_json
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env
from tests.integration.helpers import EXAMPLES, ROOT, new_namespace, put_pool

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("cli-lease")

TRIALS = 3
EVENT = ROOT / "tests" / "fixtures" / "events" / "spot-interruption-warning.json"


@pytest.fixture(scope="module")
def pool(env: Environment) -> None:
    put_pool(env, (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "default")


def pending_inflate(sim: Environment, replicas: int) -> str:
    api = sim.kube_api_client()
    ns = new_namespace(api)
    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"]["namespace"] = ns
    doc["spec"]["replicas"] = replicas
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
    helpers.wait_for("the pods", lambda: len(helpers.pods(sim, ns)) == replicas)
    return ns


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nodescale.cli", *args]


def run(sim: Environment, *args: str, **env_changes: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, env=deployed_env(sim, **env_changes),
                          timeout=180, cwd=ROOT)


def fleets(sim: Environment) -> int:
    return len(sim.aws_calls(service="ec2", action="CreateFleet"))


def test_the_sim_table_is_the_one_the_stack_would_name(env: Environment) -> None:
    assert env.env["NODESCALE_TABLE"] == names.table_name(env.cluster)


def test_two_passes_started_together_without_a_table_named_launch_what_one_pass_needs(
    env: Environment, pool: None
) -> None:
    shell = deployed_env(env, NODESCALE_TABLE=None)  # the default: the stack's table, found by its name
    for trial in range(TRIALS):
        pending_inflate(env, 5 + trial)
        planned = run(env, "provision", "--once", "--dry-run", "-o", "json", NODESCALE_TABLE=None)
        assert planned.returncode == 0, planned.stderr
        needed = len(json.loads(planned.stdout)["planned"])
        assert needed >= 1
        before = set(helpers.instance_ids(env))
        # The first CreateFleet calls are throttled (boto3 retries them with backoff), so whichever pass
        # launches first is still launching while the other reads the world: the race the lease closes.
        env.add_aws_fault(kind="error", service="ec2", action="CreateFleet", code="throttling", count=3)

        both = [subprocess.Popen(command("provision", "--once", "-o", "json"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=shell, cwd=ROOT) for _ in range(2)]
        results = [(p.communicate(timeout=180), p.returncode) for p in both]
        env.clear_aws_faults()

        for (_, err), code in results:
            assert code == 0, err
        launched = [x for (out, _), _ in results for x in json.loads(out)["launches"]]
        # Without the lease both passes launch for the same pods (twice what is needed). Fewer than planned
        # is possible: a throttled CreateFleet may exhaust its retries, or capacity launched by an earlier
        # trial may register between the dry run and these passes.
        assert 1 <= len(launched) <= needed, f"trial {trial}: {len(launched)} launched for {needed} needed"
        assert len(set(helpers.instance_ids(env)) - before) == len(launched)


@pytest.mark.parametrize(("args", "table"), [
    (("provision", "--once"), "no-such-table"),
    (("provision", "--once"), None),
    (("disrupt", "--once"), "no-such-table"),
    (("replay", str(EVENT)), None),
], ids=["provision-named", "provision-default", "disrupt-named", "replay-default"])
def test_without_a_table_that_answers_a_mutating_command_refuses_naming_the_setting(
    env: Environment, pool: None, args: tuple[str, ...], table: str | None
) -> None:
    pending_inflate(env, 1)
    env.clear_aws_calls()
    # No table set: the default name for another cluster's stack, which does not exist here.
    changes: dict[str, str | None] = {"NODESCALE_TABLE": table} if table else {
        "NODESCALE_TABLE": None, "CLUSTER_NAME": "cluster-without-a-stack"}

    done = run(env, *args, "-o", "json", **changes)

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "NODESCALE_TABLE" in done.stderr, done.stderr
    assert "--no-lease" in done.stderr and "Traceback" not in done.stderr
    missing = table or names.table_name("cluster-without-a-stack")
    assert missing in done.stderr
    assert fleets(env) == 0


def test_no_lease_runs_without_the_table_and_says_so(env: Environment, pool: None) -> None:
    pending_inflate(env, 1)

    done = run(env, "provision", "--once", "--no-lease", "-o", "json", NODESCALE_TABLE="no-such-table")

    assert done.returncode == 0, done.stderr
    assert "--no-lease" in done.stderr and "lease" in done.stderr.split("--no-lease", 1)[1]
    summary: dict[str, Any] = json.loads(done.stdout)
    assert summary["launches"] or summary["waitingForInFlight"]


def test_a_dry_run_needs_no_lease(env: Environment, pool: None) -> None:
    done = run(env, "provision", "--once", "--dry-run", "-o", "json", NODESCALE_TABLE=None,
               CLUSTER_NAME="cluster-without-a-stack")

    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
