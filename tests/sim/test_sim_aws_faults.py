"""Injected AWS faults reach an unmodified boto3 client over the wire, with real error codes."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sim.environment import Environment

pytestmark = pytest.mark.integration


def template(sim: Environment) -> str:
    ec2 = sim.boto3_client("ec2")
    data = {
        "ImageId": "ami-08f2bf224b42c81da",
        "UserData": base64.b64encode(b"#!/bin/bash\n/etc/eks/bootstrap.sh other-cluster\n").decode(),
    }
    return ec2.create_launch_template(LaunchTemplateName=f"faults-{uuid.uuid4().hex[:8]}", LaunchTemplateData=data)[
        "LaunchTemplate"
    ]["LaunchTemplateId"]


def fleet(sim: Environment, template_id: str, overrides: list[tuple[str, str]], capacity_type: str = "on-demand") -> dict[str, Any]:
    return sim.boto3_client("ec2", retries=0).create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template_id, "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": itype, "SubnetId": sim.seed["subnets"][zone]} for itype, zone in overrides
                ],
            }
        ],
    )


def launched(response: dict[str, Any]) -> list[str]:
    return [i for group in response.get("Instances", []) for i in group["InstanceIds"]]


def test_capacity_error_for_one_offering_launches_the_next_override(sim: Environment) -> None:
    sim.add_aws_fault(kind="capacity", instanceType="m5.large", zone="us-east-1a")
    response = fleet(sim, template(sim), [("m5.large", "us-east-1a"), ("m5.xlarge", "us-east-1a")])

    assert [(e["ErrorCode"], e["LaunchTemplateAndOverrides"]["Overrides"]["InstanceType"]) for e in response["Errors"]] == [
        ("InsufficientInstanceCapacity", "m5.large")
    ]
    assert response["Errors"][0]["Lifecycle"] == "on-demand"
    assert response["Instances"][0]["InstanceType"] == "m5.xlarge"
    ids = launched(response)
    sim.boto3_client("ec2").terminate_instances(InstanceIds=ids)

    # The same type in another zone is unaffected.
    other = fleet(sim, template(sim), [("m5.large", "us-east-1b")])
    assert other.get("Errors", []) == [] and other["Instances"][0]["InstanceType"] == "m5.large"
    sim.boto3_client("ec2").terminate_instances(InstanceIds=launched(other))


def test_spot_capacity_error_on_every_override_launches_nothing(sim: Environment) -> None:
    sim.add_aws_fault(kind="capacity", instanceType="c5.large", capacityType="spot")
    before = sim.boto3_client("ec2").describe_instances(Filters=[{"Name": "instance-type", "Values": ["c5.large"]}])
    response = fleet(sim, template(sim), [("c5.large", "us-east-1a"), ("c5.large", "us-east-1b")], "spot")

    assert [e["ErrorCode"] for e in response["Errors"]] == ["InsufficientInstanceCapacity"] * 2
    assert {e["Lifecycle"] for e in response["Errors"]} == {"spot"}
    assert launched(response) == []
    after = sim.boto3_client("ec2").describe_instances(Filters=[{"Name": "instance-type", "Values": ["c5.large"]}])
    assert len(after["Reservations"]) == len(before["Reservations"])

    # On-demand capacity of the same type is still there.
    on_demand = fleet(sim, template(sim), [("c5.large", "us-east-1a")])
    assert len(launched(on_demand)) == 1
    sim.boto3_client("ec2").terminate_instances(InstanceIds=launched(on_demand))


def test_throttling_surfaces_as_the_services_real_error_code(sim: Environment) -> None:
    sim.add_aws_fault(service="ec2", action="DescribeInstances", code="throttling", count=1)
    ec2 = sim.boto3_client("ec2", retries=0)
    with pytest.raises(ClientError) as caught:
        ec2.describe_instances()
    assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    ec2.describe_instances()  # count=1: the next call goes through

    sim.add_aws_fault(service="dynamodb", action="PutItem", code="ProvisionedThroughputExceededException", count=1)
    ddb = sim.boto3_client("dynamodb", retries=0)
    item = {"pk": {"S": f"test#{uuid.uuid4()}"}}
    with pytest.raises(ClientError) as caught:
        ddb.put_item(TableName=sim.env["NODESCALE_TABLE"], Item=item)
    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    ddb.put_item(TableName=sim.env["NODESCALE_TABLE"], Item=item)

    sim.add_aws_fault(service="ssm", code="internal", count=1)
    with pytest.raises(ClientError) as caught:
        sim.boto3_client("ssm", retries=0).get_parameter(Name="/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_retrying_clients_ride_out_a_counted_fault(sim: Environment) -> None:
    sim.add_aws_fault(service="eks", action="DescribeCluster", code="throttling", count=2)
    cluster = sim.boto3_client("eks", retries=3).describe_cluster(name="demo-cluster")["cluster"]
    assert cluster["name"] == "demo-cluster"
    calls = sim.aws_calls(service="eks", action="DescribeCluster")
    assert [c.get("error") for c in calls[-3:]] == ["ThrottlingException", "ThrottlingException", None]


def test_chaos_fails_about_the_requested_fraction(sim: Environment) -> None:
    sim.add_aws_fault(kind="chaos", fraction=0.5, service="sts", seed=7)
    sts = sim.boto3_client("sts", retries=0)
    failures = 0
    for _ in range(40):
        try:
            sts.get_caller_identity()
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "Throttling"
            failures += 1
    assert 8 <= failures <= 32


def test_invalid_rule_is_refused_with_the_reason(sim: Environment) -> None:
    request = urllib.request.Request(
        f"{sim.aws_control_url}/aws-faults",
        data=json.dumps({"kind": "capacity", "instanceType": "m5.large", "capacityType": "reserved"}).encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400
    assert "capacityType='reserved'" in json.loads(caught.value.read())["error"]
    assert sim.aws_faults() == []


def test_rules_are_listed_counted_and_removed_one_by_one(sim: Environment) -> None:
    keep = sim.add_aws_fault(service="ec2", action="DescribeVpcs", code="throttling", count=5)
    drop = sim.add_aws_fault(kind="capacity", instanceType="p3.2xlarge")
    with pytest.raises(ClientError):
        sim.boto3_client("ec2", retries=0).describe_vpcs()
    listed = {r["id"]: r for r in sim.aws_faults()}
    assert listed[keep["id"]]["fired"] == 1 and listed[drop["id"]]["fired"] == 0

    request = urllib.request.Request(f"{sim.aws_control_url}/aws-faults/{drop['id']}", method="DELETE")
    with urllib.request.urlopen(request) as response:
        assert [r["id"] for r in json.loads(response.read())["rules"]] == [keep["id"]]
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(urllib.request.Request(f"{sim.aws_control_url}/aws-faults/nope", method="DELETE"))
    assert caught.value.code == 404
