"""The node roles the stack lets the functions pass, on `sim/` (#28.1).

sim's functions run with the IAM policies of the stack as docs/deploy.md's one command deploys it
(sim/aws/iam_policies.py reads the command from the document): the stack's own node role and the role the
command's NodePool file names. A pool naming that role launches; a pool naming another role, which exists
in the account but which the stack was not told of, fails, and the CLI, `status`, `explain`, the pods'
events and the record in the state table all say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from sim.aws import iam_policies
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env
from tests.integration.helpers import EXAMPLES, ROOT, new_namespace, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("node-roles")

SYSTEM_POOL = EXAMPLES / "karpenter-v1" / "system.yaml"
DENIED_ROLE = "SomeoneElsesNodeRole"
DENIED_POOL = SYSTEM_POOL.read_text().replace("name: system", "name: denied").replace(
    "KarpenterNodeRole-demo-cluster", DENIED_ROLE).replace("pool-purpose: system", "pool-purpose: denied")


def run_cli(sim: Environment, *args: str) -> subprocess.CompletedProcess[str]:
    """`nodescale ARGS` in a shell holding the functions' settings, as deployed."""
    return subprocess.run([sys.executable, "-m", "nodescale.cli", *args], capture_output=True, text=True,
                          env=deployed_env(sim), timeout=180, cwd=ROOT)


def pending_pod(sim: Environment, ns: str, name: str, purpose: str) -> None:
    body = {"metadata": {"name": name, "namespace": ns},
            "spec": {"nodeSelector": {"nodescale.io/pool-purpose": purpose},
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]}}
    api = sim.kube_api_client()
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=body)
    wait_for(f"{name} unschedulable", lambda: is_provisionable(
        request_json(api, "GET", f"/api/v1/namespaces/{ns}/pods/{name}")) or None)


def test_sim_deploys_the_stack_as_the_docs_say() -> None:
    """#28.1: sim's IAM is the stack's as docs/deploy.md's command synthesizes it, not with a node role sim
    picked: its context is the command's, and the command's NodePool file's role is what may be passed."""
    context = iam_policies.deploy_context("demo-cluster")
    assert {k: v for k, v in context.items() if k != "windows"} == iam_policies.docs_deploy_context()
    assert "nodeRoleArn" not in context and "nodeRoles" not in context
    granted = [s for s in iam_policies.policies_for("demo-cluster", "us-east-1")["provisioner"]
               if s["Action"] == "iam:PassRole"]
    assert [r.rsplit("/", 1)[-1] for s in granted for r in s["Resource"]] == [
        "nodescale-demo-cluster-node", "nodescale-demo-cluster-windows-node", "KarpenterNodeRole-demo-cluster"]


def test_the_docs_nodepool_launches_and_another_role_is_a_failing_launch_everyone_sees(env: Environment) -> None:
    """#28.1: following docs/deploy.md (its NodePool file, whose EC2NodeClass names KarpenterNodeRole-demo-cluster,
    in SSM as the stack writes it) `nodescale provision` launches. A pool naming a role the stack cannot pass:
    `provision` exits 3 with one JSON document on stdout and the denial on stderr; `status` and `explain`
    say "launch failing: AccessDenied: ..." for the pool and its pod; the pod has a Warning event."""
    ns = new_namespace(env.kube_api_client())
    put_pool(env, SYSTEM_POOL.read_text(), "system")
    pending_pod(env, ns, "dns", "system")
    done = run_cli(env, "provision", "--once", "-o", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert [launch["nodePool"] for launch in summary["launches"]] == ["system"]
    assert summary["launchFailing"] == []

    iam = env.boto3_client("iam")
    iam.create_role(RoleName=DENIED_ROLE, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}))
    iam.create_instance_profile(InstanceProfileName=DENIED_ROLE)
    iam.add_role_to_instance_profile(InstanceProfileName=DENIED_ROLE, RoleName=DENIED_ROLE)
    put_pool(env, DENIED_POOL, "denied")
    pending_pod(env, ns, "web", "denied")

    done = run_cli(env, "provision", "--once", "-o", "json")
    assert done.returncode == 3, done.stderr[-3000:]
    summary = json.loads(done.stdout)  # still exactly one JSON document
    (failing,) = summary["launchFailing"]
    assert (failing["nodePool"], failing["code"]) == ("denied", "AccessDenied")
    assert DENIED_ROLE in failing["message"]
    assert "nodescale provision: NodePool denied: launch failing: AccessDenied: " in done.stderr

    status = _json(run_cli(env, "status", "-o", "json"))
    assert [(f["nodePool"], f["code"]) for f in status["launchFailing"]] == [("denied", "AccessDenied")]
    (web,) = [p for p in status["pending"] if p["pod"] == f"{ns}/web"]
    assert web["verdict"] == "launch-failing"
    assert web["message"].startswith("launch failing: AccessDenied: ") and DENIED_ROLE in web["message"]
    text = run_cli(env, "status")
    assert "NodePool denied: launch failing: AccessDenied: " in text.stdout

    explained = _json(run_cli(env, "explain", f"{ns}/web", "-o", "json"))
    assert (explained["verdict"], explained["nodePool"]) == ("launch-failing", "denied")
    assert explained["message"].startswith("launch failing: AccessDenied: ")
    assert "would get" not in explained["message"]

    events = request_json(env.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/events").get("items") or []
    warnings = [e for e in events if (e.get("involvedObject") or {}).get("name") == "web" and e.get("type") == "Warning"]
    assert any(e["reason"] == "FailedScheduling" and "launch failing: AccessDenied: " in e["message"] for e in warnings)


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
