"""Injected AWS faults reach an unmodified boto3 client over the wire, with real error codes."""

from __future__ import annotations

import base64
import json
import threading
import time
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


def fleet(sim: Environment, template_id: str, overrides: list[tuple[str, str]], capacity_type: str = "on-demand",
          **extra: Any) -> dict[str, Any]:
    return sim.boto3_client("ec2", retries=0).create_fleet(
        **extra,
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


def instance_ids(sim: Environment) -> set[str]:
    pages = sim.boto3_client("ec2").get_paginator("describe_instances").paginate()
    return {i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"]}


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


def test_create_fleet_with_a_repeated_client_token_launches_once(sim: Environment) -> None:
    """#27.7: EC2 ("Ensuring idempotency"): a retry of a successful request with the same client token and
    parameters launches nothing more and answers with the first request's result; the same token with
    another parameter is IdempotentParameterMismatch; another token is another request. moto ignored the
    token, so the old sim launched an instance for each call."""
    ec2 = sim.boto3_client("ec2")
    template_id = template(sim)
    token = uuid.uuid4().hex
    before = instance_ids(sim)
    first = fleet(sim, template_id, [("m5.large", "us-east-1a")], ClientToken=token)
    again = fleet(sim, template_id, [("m5.large", "us-east-1a")], ClientToken=token)

    assert len(launched(first)) == 1
    assert (again["FleetId"], launched(again)) == (first["FleetId"], launched(first))
    assert instance_ids(sim) - before == set(launched(first))
    replayed = sim.aws_calls(service="ec2", action="CreateFleet")[-1]
    assert replayed["idempotentReplay"] is True and "instanceIds" not in replayed

    with pytest.raises(ClientError) as caught:
        fleet(sim, template_id, [("m5.xlarge", "us-east-1a")], ClientToken=token)
    assert caught.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400

    other = fleet(sim, template_id, [("m5.large", "us-east-1a")], ClientToken=uuid.uuid4().hex)
    untokened = fleet(sim, template_id, [("m5.large", "us-east-1a")])
    assert len({*launched(first), *launched(other), *launched(untokened)}) == 3
    ec2.terminate_instances(InstanceIds=[*launched(first), *launched(other), *launched(untokened)])


def test_a_client_token_sent_twice_at_once_launches_once(sim: Environment) -> None:
    """#27.7: two callers sending the same request and token together (a stalled pass and the one that took
    over from it) get one launch between them: the second is answered once the first is done."""
    sim.add_aws_fault(kind="delay", service="ec2", action="CreateFleet", seconds=1, count=1)
    template_id = template(sim)
    token = uuid.uuid4().hex
    answers: list[dict[str, Any]] = []

    def send() -> None:
        answers.append(fleet(sim, template_id, [("m5.large", "us-east-1b")], ClientToken=token))

    both = [threading.Thread(target=send) for _ in range(2)]
    for t in both:
        t.start()
    for t in both:
        t.join(30)

    assert len(answers) == 2 and launched(answers[0]) == launched(answers[1]) and len(launched(answers[0])) == 1
    sim.boto3_client("ec2").terminate_instances(InstanceIds=launched(answers[0]))


def test_a_delay_rule_holds_the_call_then_answers_it(sim: Environment) -> None:
    rule = sim.add_aws_fault(kind="delay", service="ec2", action="DescribeVpcs", seconds=1.5, count=1)
    ec2 = sim.boto3_client("ec2", retries=0)
    started = time.monotonic()
    assert ec2.describe_vpcs()["Vpcs"]
    assert time.monotonic() - started >= 1.5
    started = time.monotonic()
    ec2.describe_vpcs()  # count=1: the next call is not held
    assert time.monotonic() - started < 1.0
    assert {r["id"]: r for r in sim.aws_faults()}[rule["id"]]["fired"] == 1

    request = urllib.request.Request(f"{sim.aws_control_url}/aws-faults", method="POST",
                                     data=json.dumps({"kind": "delay", "seconds": 0}).encode())
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400 and "seconds=0" in json.loads(caught.value.read())["error"]
