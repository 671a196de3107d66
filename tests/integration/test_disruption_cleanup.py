"""The disruption run's clean-up on `sim/`: leaked instances, Nodes without an instance, unused templates.

A fresh environment of its own: moto stamps instance launch times with the real clock, so the
simulated clock must not have run ahead (as other scenarios make it) before the leak is launched.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale import disrupting
from nodescale.aws.clients import AwsClients
from nodescale.clock import CLOCK_URL
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.settings import Settings
from sim.environment import Environment

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
CLUSTER_TAG = "nodescale.io/cluster"
POOL_LABEL = "karpenter.sh/nodepool"
AL2 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environment]:
    environment = Environment(tmp_path_factory.mktemp("disruption-cleanup-sim"), ready_delay=1.0)
    environment.start()
    patch = pytest.MonkeyPatch()
    patch.setenv(CLOCK_URL, environment.env[CLOCK_URL])
    try:
        yield environment
    finally:
        patch.undo()
        environment.stop()


def runtime_for(sim: Environment, **changes: Any) -> Runtime:
    settings = dataclasses.replace(Settings.from_env(sim.env), **changes)
    aws = AwsClients(**{s: sim.boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")})
    return Runtime(settings, aws, sim.kube_api_client())


def instance_state(sim: Environment, iid: str) -> str:
    out = sim.boto3_client("ec2").describe_instances(InstanceIds=[iid])
    return out["Reservations"][0]["Instances"][0]["State"]["Name"]


def _delete(api: Any, path: str) -> None:
    try:
        request_json(api, "DELETE", path)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_leaks_are_cleaned_up_after_the_timeout_and_nothing_without_the_cluster_tag_is_touched(
    sim: Environment,
) -> None:
    path = sim.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
    sim.boto3_client("ssm").put_parameter(
        Name=f"{path}/default", Type="String", Overwrite=True,
        Value=(EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(),
    )
    rt = runtime_for(sim, registration_timeout_seconds=120)
    ec2 = sim.boto3_client("ec2")
    image = sim.boto3_client("ssm").get_parameter(Name=AL2)["Parameter"]["Value"]

    def instance(tags: list[dict[str, str]]) -> str:
        return ec2.run_instances(
            ImageId=image, InstanceType="m5.large", MinCount=1, MaxCount=1, SubnetId=sim.seed["subnets"]["us-east-1a"],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )["Instances"][0]["InstanceId"]

    # Tagged for the cluster but with no user data: it never joins.
    leaked = instance([{"Key": CLUSTER_TAG, "Value": sim.cluster}, {"Key": POOL_LABEL, "Value": "default"}])
    untagged = instance([{"Key": POOL_LABEL, "Value": "default"}])
    others = [untagged, *sim.seed["unmanaged_instance_ids"], *sim.seed["karpenter_instance_ids"]]
    # Nodes whose instance is gone: one of a nodescale pool (removed), one of a pool nodescale does not
    # know (kept), and one whose instance exists but is not this cluster's (kept).
    api = sim.kube_api_client()
    for name, pool, iid in (("ghost", "default", "i-0123456789abcdef0"), ("stranger", "other", "i-0fedcba987654321f"),
                            ("theirs", "default", untagged)):
        request_json(api, "POST", "/api/v1/nodes", body={"metadata": {"name": name, "labels": {POOL_LABEL: pool}},
                                                         "spec": {"providerID": f"aws:///us-east-1a/{iid}"}})
    stale = f"nodescale/{sim.cluster}/{uuid.uuid4().hex[:20]}"
    foreign = f"nodescale/{sim.cluster}/{uuid.uuid4().hex[:20]}"
    ec2.create_launch_template(LaunchTemplateName=stale, LaunchTemplateData={"ImageId": image}, TagSpecifications=[
        {"ResourceType": "launch-template", "Tags": [{"Key": CLUSTER_TAG, "Value": sim.cluster}]}])
    ec2.create_launch_template(LaunchTemplateName=foreign, LaunchTemplateData={"ImageId": image})

    early = disrupting.disrupt_once(rt)
    assert early["cleanup"]["unregisteredInstances"] == [] and early["cleanup"]["launchTemplates"] == []
    assert early["cleanup"]["orphanedNodes"] == ["ghost"]
    assert instance_state(sim, leaked) == "running"

    sim.advance(601)
    late = disrupting.disrupt_once(rt)
    assert late["cleanup"]["unregisteredInstances"] == [leaked]
    assert late["cleanup"]["launchTemplates"] == [stale]
    assert instance_state(sim, leaked) in ("shutting-down", "terminated")
    assert all(instance_state(sim, i) == "running" for i in others)
    names = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert foreign in names and stale not in names
    nodes = {n["metadata"]["name"] for n in request_json(api, "GET", "/api/v1/nodes")["items"]}
    assert "ghost" not in nodes and {"stranger", "theirs"} <= nodes
    for name in ("stranger", "theirs"):
        _delete(api, f"/api/v1/nodes/{name}")
    ec2.terminate_instances(InstanceIds=[untagged])
