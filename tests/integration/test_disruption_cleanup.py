"""The disruption run's clean-up on `sim/`: leaked instances, Nodes without an instance, unused templates.

A fresh environment of its own: moto stamps instance launch times with the real clock, so the
simulated clock must not have run ahead (as other scenarios make it) before the leak is launched.
"""

from __future__ import annotations

import uuid

import pytest

from nodescale.k8s.raw import request_json
from nodescale.usecases.disrupt import run as disrupting
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import (
    CLUSTER_TAG,
    EXAMPLES,
    POOL_LABEL,
    delete_quietly,
    instance_state,
    put_pool,
    runtime_for,
)

pytestmark = pytest.mark.integration

AL2 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"

sim = helpers.environment_fixture("disruption-cleanup", fixture_name="sim")


def test_leaks_are_cleaned_up_after_the_timeout_and_nothing_without_the_cluster_tag_is_touched(
    sim: Environment,
) -> None:
    put_pool(sim, (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text(), "default")
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
        delete_quietly(api, f"/api/v1/nodes/{name}")
    ec2.terminate_instances(InstanceIds=[untagged])
