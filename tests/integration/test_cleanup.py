"""Destroy-time cleanup on `sim/` (issue 9): the code the stack-deletion custom resource calls, run directly."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from nodescale import base_runtime
from nodescale.aws import clients
from nodescale.k8s.raw import request_json
from nodescale.usecases import cleanup
from nodescale.usecases.provision import provisioner as provisioning
from sim.aws.constants import FUNCTION_CREDENTIALS
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env, stack_log_level
from tests.integration.helpers import (
    CLUSTER_TAG,
    EXAMPLES,
    ROOT,
    instance_ids,
    load_handler,
    managed_nodes,
    new_namespace,
    put_pool,
    runtime_for,
    use_settings,
    wait_for,
)

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("cleanup", sim_clock=False)


def states(sim: Environment, ids: list[str]) -> dict[str, str]:
    out = sim.boto3_client("ec2").describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for r in out["Reservations"] for i in r["Instances"]}


def managed_instances(sim: Environment) -> list[str]:
    return sorted(instance_ids(sim, ("pending", "running", "stopping", "stopped")))


def template_names(sim: Environment) -> set[str]:
    return {t["LaunchTemplateName"] for t in sim.boto3_client("ec2").describe_launch_templates()["LaunchTemplates"]}


def node_names(sim: Environment) -> set[str]:
    return {n["metadata"]["name"] for n in managed_nodes(sim)}


def nodeclaim_names(sim: Environment) -> set[str]:
    items = request_json(sim.kube_api_client(), "GET", "/apis/karpenter.sh/v1/nodeclaims").get("items") or []
    return {c["metadata"]["name"] for c in items}


@pytest.fixture(scope="module")
def capacity(env: Environment) -> dict[str, Any]:
    """A NodePool with running capacity (and its NodeClaims), a leaked (tagged, unregistered) instance, and
    things not ours."""
    helpers.install_karpenter_crds(env)
    put_pool(env, (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "default")
    api = env.kube_api_client()
    ns = new_namespace(api)
    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"]["namespace"] = ns
    doc["spec"]["replicas"] = 3
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
    rt = runtime_for(env)

    def running() -> bool:
        pods = request_json(api, "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
        return len([p for p in pods if p["status"].get("phase") == "Running"]) == 3

    deadline = time.monotonic() + 40
    while not running() and time.monotonic() < deadline:
        provisioning.provision_once(rt)
        env.advance(2)
        time.sleep(0.5)
    assert running()
    ec2 = env.boto3_client("ec2")
    image = env.boto3_client("ssm").get_parameter(
        Name="/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")["Parameter"]["Value"]
    leaked = ec2.run_instances(
        ImageId=image, InstanceType="m5.large", MinCount=1, MaxCount=1, SubnetId=env.seed["subnets"]["us-east-1a"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": CLUSTER_TAG, "Value": env.cluster}]}],
    )["Instances"][0]["InstanceId"]
    # Stopped by hand: no longer running, still paid for (its volumes), still this cluster's to remove.
    stopped = ec2.run_instances(
        ImageId=image, InstanceType="m5.large", MinCount=1, MaxCount=1, SubnetId=env.seed["subnets"]["us-east-1b"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": CLUSTER_TAG, "Value": env.cluster}]}],
    )["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[stopped])
    foreign_template = f"someone-else-{uuid.uuid4().hex[:6]}"
    ec2.create_launch_template(LaunchTemplateName=foreign_template, LaunchTemplateData={"ImageId": image})
    ours = managed_instances(env)
    assert leaked in ours and stopped in ours and len(ours) >= 3
    return {
        "ns": ns,
        "instances": ours,
        "nodes": node_names(env),
        "nodeclaims": nodeclaim_names(env),
        "templates": {t for t in template_names(env) if t.startswith("nodescale/")},
        "foreign_template": foreign_template,
        "foreign_instances": [*env.seed["unmanaged_instance_ids"], *env.seed["karpenter_instance_ids"]],
    }


CONTEXT = SimpleNamespace(function_name="cleanup", memory_limit_in_mb=512, aws_request_id="req-1",
                          invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:cleanup")


def event(request: str, cluster: str, retain: str) -> dict[str, Any]:
    return {"RequestType": request, "ResourceProperties": {"ClusterName": cluster, "RetainNodes": retain},
            "PhysicalResourceId": "nodescale-cleanup-demo-cluster" if request != "Create" else None}


def test_retain_removes_nothing_and_says_so(env: Environment, capacity: dict[str, Any]) -> None:
    summary = cleanup.run(runtime_for(env), retain=True)

    assert summary["retained"] is True
    assert set(summary["instances"]) == set(capacity["instances"])
    assert set(summary["launchTemplates"]) == capacity["templates"]
    assert "nothing was removed" in summary["message"]
    assert managed_instances(env) == capacity["instances"]
    assert capacity["templates"] <= template_names(env)
    assert node_names(env) == capacity["nodes"]


def test_handler_create_and_update_touch_nothing_and_delete_with_retain_keeps_everything(
    env: Environment, capacity: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_settings(env, monkeypatch)
    monkeypatch.setattr(base_runtime, "_RUNTIMES", {})
    clients.reset()  # process-wide clients may point at another test module's environment
    handler = load_handler("cleanup").handler

    created = handler(event("Create", env.cluster, "false"), CONTEXT)
    updated = handler(event("Update", env.cluster, "false"), CONTEXT)
    kept = handler(event("Delete", env.cluster, "true"), CONTEXT)

    assert created == {"PhysicalResourceId": f"nodescale-cleanup-{env.cluster}"}
    assert updated["PhysicalResourceId"] == "nodescale-cleanup-demo-cluster"
    assert "nothing was removed" in kept["Data"]["Message"]
    assert managed_instances(env) == capacity["instances"]
    clients.reset()


# The cleanup function as Lambda runs it: its handler, a Delete event, the stack's environment and log level.
RUN_HANDLER = """
import importlib.util, json, sys
from types import SimpleNamespace
spec = importlib.util.spec_from_file_location("cleanup_handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
context = SimpleNamespace(function_name="cleanup", memory_limit_in_mb=512, aws_request_id="req-2",
                          invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:cleanup")
print(json.dumps({"response": module.handler(json.loads(sys.argv[2]), context)}))
"""


def test_cleanup_at_the_stacks_log_level_removes_every_managed_instance_node_and_template_and_nothing_else(
    env: Environment, capacity: dict[str, Any]
) -> None:
    # At INFO the use-case's summary line used to raise KeyError ('message' is LogRecord's): `cdk destroy` failed.
    assert stack_log_level() == "INFO"
    done = subprocess.run(
        [sys.executable, "-c", RUN_HANDLER, str(ROOT / "lambdas" / "cleanup" / "handler.py"),
         json.dumps(event("Delete", env.cluster, "false"))],
        # As the cleanup function: its own role's credentials, which sim holds to that role's policy.
        capture_output=True, text=True, timeout=180, cwd=ROOT,
        env=deployed_env(env, AWS_ACCESS_KEY_ID=FUNCTION_CREDENTIALS["cleanup"]["aws_access_key_id"],
                         AWS_SECRET_ACCESS_KEY=FUNCTION_CREDENTIALS["cleanup"]["aws_secret_access_key"]),
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert "Logging error" not in done.stderr, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    response = next(x["response"] for x in lines if "response" in x)
    assert response["Data"]["Message"].startswith("removed ")
    summary = next(x["summary"] for x in lines if x.get("message") == "cleanup summary")
    assert summary["retained"] is False and not summary["errors"]
    assert set(summary["instances"]) == set(capacity["instances"])
    assert set(summary["launchTemplates"]) == capacity["templates"]
    assert set(summary["nodes"]) == capacity["nodes"]
    assert summary["podsEvicted"] >= 3
    assert managed_instances(env) == []
    assert all(s in ("shutting-down", "terminated") for s in states(env, capacity["instances"]).values())
    assert all(s == "running" for s in states(env, capacity["foreign_instances"]).values())
    names = template_names(env)
    assert not names & capacity["templates"] and capacity["foreign_template"] in names
    wait_for("the nodes to be gone", lambda: not node_names(env))
    # #30: the nodes' and NodeClaims' termination finalizers go with the stack, or they would hold them forever.
    assert capacity["nodeclaims"] and not nodeclaim_names(env)
