"""Every `nodescale ... -o json` prints one JSON document on stdout and nothing else (issue 12).

Each command runs as a subprocess the way an operator's shell runs it: the environment's settings (its
`.env`), metrics not turned off, and logging at the level the stack gives the functions (INFO). Metric
(EMF) lines and log lines must stay off stdout, so that `nodescale status -o json | jq` works.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodescale import cli
from nodescale.k8s.raw import request_json
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env, stack_log_level
from tests.integration.helpers import EXAMPLES, ROOT, new_namespace, put_pool
from tests.integration.test_static_capacity import STATIC_POOL

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("cli-json")

EVENTS = ROOT / "tests" / "fixtures" / "events"
POOL = EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml"
INFLATE = EXAMPLES / "workloads" / "inflate.yaml"

# Every command with `-o json`, in an order that gives each something to do: plan offline, the provisioner's
# dry run and real pass (watch mode too), the disruption run, a replayed event, status, explain, scale.
CASES: list[tuple[str, ...]] = [
    ("plan", "-f", str(POOL), "-f", str(INFLATE)),
    ("provision", "--once", "--dry-run"),
    ("provision", "--dry-run"),  # watch mode, for NODESCALE_WATCH_SECONDS
    ("provision", "--once"),
    ("disrupt", "--once", "--dry-run"),
    ("disrupt", "--once"),
    ("replay", str(EVENTS / "spot-interruption-warning.json"), str(EVENTS / "rebalance-recommendation.json")),
    ("status",),
    ("explain", "{pod}"),
    ("scale", "nodepool", "static", "--replicas", "1", "--dry-run"),
]


@pytest.fixture(scope="module")
def scene(env: Environment) -> dict[str, Any]:
    """The default spot NodePool, a static one of no nodes (for `scale`), and two pending `inflate` pods."""
    put_pool(env, POOL.read_text(), "default")
    put_pool(env, STATIC_POOL.replace("replicas: 2", "replicas: 0"), "static")
    api = env.kube_api_client()
    ns = new_namespace(api)
    doc = yaml.safe_load(INFLATE.read_text())
    doc["metadata"]["namespace"] = ns
    doc["spec"]["replicas"] = 2
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
    pods = helpers.wait_for("the inflate pods", lambda: helpers.pods(env, ns) if len(helpers.pods(env, ns)) == 2
                            else None)
    return {"pod": f"{ns}/{pods[0]['metadata']['name']}"}


def run_cli(sim: Environment, *args: str, **env_changes: str | None) -> subprocess.CompletedProcess[str]:
    """`nodescale ARGS` in a shell holding the environment's settings, as deployed (see deployed_env)."""
    return subprocess.run([sys.executable, "-m", "nodescale.cli", *args], capture_output=True, text=True,
                          env=deployed_env(sim, **env_changes), timeout=180, cwd=ROOT)


def one_json_document(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Logging error" not in done.stderr, done.stderr[-3000:]
    # json.loads takes exactly one document: a metric or log line before or after it fails here.
    return json.loads(done.stdout)


def commands_with_json_output() -> set[str]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, p in sub.choices.items() if any("--output" in a.option_strings for a in p._actions)}


def test_the_cases_cover_every_command_with_json_output() -> None:
    assert {case[0] for case in CASES} == commands_with_json_output()


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c[:3]).replace(str(ROOT) + "/", "") for c in CASES])
def test_json_output_is_one_document_on_stdout(env: Environment, scene: dict[str, Any], args: tuple[str, ...]) -> None:
    assert stack_log_level() == "INFO"
    argv = [a.format(**scene) for a in args]
    done = run_cli(env, *argv, "-o", "json", NODESCALE_WATCH_SECONDS="2")

    document = one_json_document(done)

    assert document not in (None, {}, [])
    if argv[0] == "replay":
        assert [Path(s["source"]).name for s in document] == [Path(a).name for a in argv[1:]]
    if argv[0] == "provision" and "--dry-run" not in argv:
        assert document["launches"], document  # the pass really ran (and logged at INFO, to stderr)
