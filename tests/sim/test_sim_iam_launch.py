"""On sim, a launch and a fan-out are authorized as AWS authorizes them (#28: sim, compared with independent
references): an instant EC2 Fleet as CreateFleet and RunInstances on every resource it creates or uses
(Service Authorization Reference, Amazon EC2; Karpenter's controller policy grants both on the same
resources), the disruption function's slices as lambda:InvokeFunction on its own ARN.

A policy with one grant removed is enforced by a second AWS endpoint (sim's own proxy and enforcer) in
front of the same moto, so the stack's policy for the environment itself stays as synthesized."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sim.aws.constants import FUNCTION_CREDENTIALS, REGION
from sim.aws.faults import FaultProxy
from sim.aws.iam_enforcement import Enforcer
from sim.aws.iam_policies import policies_for
from sim.aws.lambda_service import LambdaService

pytestmark = pytest.mark.integration

OWNER_TAG = "nodescale.io/cluster"
EKS_AMI_PARAMETER = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"
Policies = dict[str, list[dict[str, Any]]]


@contextlib.contextmanager
def _endpoint(sim, policies: Policies) -> Iterator[str]:
    """An AWS endpoint holding the functions to ``policies``, in front of the environment's moto."""
    proxy = FaultProxy(sim.state["moto_url"], enforcer=Enforcer(policies, sim.state["moto_url"], sim.cluster),
                       lambdas=LambdaService(sim.cluster)).start()
    try:
        yield proxy.url
    finally:
        proxy.stop()


@pytest.fixture
def launch_setup(sim) -> Iterator[dict[str, Any]]:
    """A launch template as the product makes one (its AMI from the public parameter, the cluster's security
    group, the ownership tag on the template and on what it launches), created as the administrator."""
    admin = sim.boto3_client("ec2")
    image = sim.boto3_client("ssm").get_parameter(Name=EKS_AMI_PARAMETER)["Parameter"]["Value"]
    owned = [{"Key": OWNER_TAG, "Value": sim.cluster}]
    data = {"InstanceType": "m5.large", "ImageId": image, "SecurityGroupIds": [sim.seed["security_group_id"]],
            "TagSpecifications": [{"ResourceType": t, "Tags": owned}
                                  for t in ("instance", "volume", "network-interface")]}
    template = admin.create_launch_template(
        LaunchTemplateName="iam-launch-like-the-product", LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": owned}],
    )["LaunchTemplate"]
    snapshots = [m["Ebs"]["SnapshotId"] for m in admin.describe_images(ImageIds=[image])["Images"][0]["BlockDeviceMappings"]
                 if "Ebs" in m]
    assert snapshots, "sim's AMIs are EBS-backed: their root device has a snapshot"
    try:
        yield {"template": template["LaunchTemplateId"], "image": image, "snapshot": snapshots[0],
               "subnet": next(iter(sim.seed["subnets"].values())), "group": sim.seed["security_group_id"]}
    finally:
        admin.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])


def _fleet(endpoint: str, setup: dict[str, Any], cluster: str) -> Callable[[], dict[str, Any]]:
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=REGION, **FUNCTION_CREDENTIALS["provisioner"])
    return lambda: ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateId": setup["template"], "Version": "$Latest"},
            "Overrides": [{"SubnetId": setup["subnet"], "InstanceType": "m5.large"}],
        }],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "fleet", "Tags": [{"Key": OWNER_TAG, "Value": cluster}]}],
    )


def _without(policies: Policies, function: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Policies:
    """``policies`` with each of ``function``'s statements passed through ``change`` (None drops it)."""
    out = copy.deepcopy(policies)
    out[function] = [s for s in (change(copy.deepcopy(s)) for s in out[function]) if s is not None]
    return out


def _drop_action(action: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def change(statement: dict[str, Any]) -> dict[str, Any] | None:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        kept = [a for a in actions if a != action]
        return {**statement, "Action": kept} if kept else None
    return change


def _drop_resource(kind: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def change(statement: dict[str, Any]) -> dict[str, Any] | None:
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        kept = [r for r in resources if f":{kind}/" not in r]
        return {**statement, "Resource": kept} if kept else None
    return change


def _instances(fleet: dict[str, Any]) -> list[str]:
    return [i for entry in fleet.get("Instances") or [] for i in entry.get("InstanceIds") or []]


@pytest.mark.parametrize(("removed", "change", "refused"), [
    ("ec2:RunInstances", _drop_action("ec2:RunInstances"), lambda s: "ec2:RunInstances on resource: arn:aws:ec2:"),
    ("the snapshot resource", _drop_resource("snapshot"), lambda s: f"arn:aws:ec2:{REGION}::snapshot/{s['snapshot']}"),
    ("the image resource", _drop_resource("image"), lambda s: f"arn:aws:ec2:{REGION}::image/{s['image']}"),
    ("the security group resource", _drop_resource("security-group"),
     lambda s: f"arn:aws:ec2:{REGION}:123456789012:security-group/{s['group']}"),
])
def test_an_instant_fleet_needs_run_instances_on_everything_it_uses(
        sim, launch_setup: dict[str, Any], removed: str, change: Any, refused: Callable[[dict[str, Any]], str]) -> None:
    """#28: with the stack's own policy the product-shaped fleet launches; with `removed` taken out of it, the
    same fleet is refused (the message names what is missing) and launches nothing. sim authorized the fleet
    as ec2:CreateFleet alone, and never asked about the AMI's snapshot."""
    policies = policies_for(sim.cluster, REGION)
    admin = sim.boto3_client("ec2")
    launched = _fleet(sim.aws_endpoint, launch_setup, sim.cluster)()
    ids = _instances(launched)
    assert ids, launched.get("Errors")
    admin.terminate_instances(InstanceIds=ids)

    before = len(admin.describe_instances()["Reservations"])
    with _endpoint(sim, _without(policies, "provisioner", change)) as endpoint, pytest.raises(ClientError) as caught:
        _fleet(endpoint, launch_setup, sim.cluster)()
    error = caught.value.response["Error"]
    assert error["Code"] == "UnauthorizedOperation"
    assert refused(launch_setup) in error["Message"], error["Message"]
    assert len(admin.describe_instances()["Reservations"]) == before


def _lambda(sim, credentials: dict[str, str], endpoint: str | None = None) -> Any:
    return boto3.client("lambda", endpoint_url=endpoint or sim.aws_endpoint, region_name=REGION, **credentials)


def _function_arn(sim, function: str) -> str:
    return f"arn:aws:lambda:{REGION}:123456789012:function:nodescale-{sim.cluster}-{function}"


def test_the_disruption_fan_out_is_a_lambda_invoke_sim_authorizes_and_queues(sim) -> None:
    """#28: the disruption function's slices are real Invoke calls to sim (they were captured in-process),
    authorized as lambda:InvokeFunction on the function's ARN: allowed on its own ARN, refused on another
    function's and for a function without the grant; sim queues what it accepted for the runner to take."""
    from nodescale.aws import fan_out

    sim.lambda_invocations(take=True)
    event = {"slice": {"pools": ["a"], "index": 0, "of": 2}}
    fan_out.invoke_async(_function_arn(sim, "disruption"), event, _lambda(sim, FUNCTION_CREDENTIALS["disruption"]))
    (queued,) = sim.lambda_invocations(take=True)
    assert (queued["function"], queued["payload"]) == ("disruption", event)
    assert sim.lambda_invocations() == []

    for function, target in (("provisioner", "disruption"), ("disruption", "provisioner")):
        with pytest.raises(ClientError) as caught:
            fan_out.invoke_async(_function_arn(sim, target), event, _lambda(sim, FUNCTION_CREDENTIALS[function]))
        error = caught.value.response["Error"]
        assert error["Code"] == "AccessDeniedException"
        assert f"lambda:InvokeFunction on resource: {_function_arn(sim, target)}" in error["Message"]
    assert sim.lambda_invocations() == []
    # A function the stack does not have: Lambda's 404 (asked as the administrator, whom no policy limits).
    admin = sim.boto3_client("lambda")
    with pytest.raises(ClientError) as caught:
        admin.invoke(FunctionName="nodescale-other-disruption", InvocationType="Event", Payload=json.dumps(event))
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_the_fan_out_is_refused_without_the_stacks_invoke_grant(sim) -> None:
    """#28: the disruption function's policy without its lambda:InvokeFunction statement: the fan-out is refused."""
    from nodescale.aws import fan_out

    policies = _without(policies_for(sim.cluster, REGION), "disruption", _drop_action("lambda:InvokeFunction"))
    with _endpoint(sim, policies) as endpoint:
        client = _lambda(sim, FUNCTION_CREDENTIALS["disruption"], endpoint)
        with pytest.raises(ClientError) as caught:
            fan_out.invoke_async(_function_arn(sim, "disruption"), {"slice": {}}, client)
    assert caught.value.response["Error"]["Code"] == "AccessDeniedException"
