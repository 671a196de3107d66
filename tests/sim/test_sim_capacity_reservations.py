"""sim's capacity reservations (sim/aws/capacity_reservations.py; moto has none) answer as EC2 does: the EC2
API Reference's CreateCapacityReservation, DescribeCapacityReservations, CancelCapacityReservation, and the
User Guide's "Capacity Reservations" for launches into one (targeted, open, full, capacity blocks)."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sim.aws.constants import FUNCTION_CREDENTIALS, REGION
from sim.environment import Environment

pytestmark = pytest.mark.integration

IMAGE = "ami-08f2bf224b42c81da"
ZONE = "us-east-1a"


def reserve(sim: Environment, count: int = 2, itype: str = "m5.large", match: str = "targeted",
            tags: dict[str, str] | None = None, **extra: Any) -> str:
    tag_spec = [{"ResourceType": "capacity-reservation",
                 "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()]}] if tags else []
    out = sim.boto3_client("ec2").create_capacity_reservation(
        InstanceType=itype, InstancePlatform="Linux/UNIX", AvailabilityZone=ZONE, InstanceCount=count,
        InstanceMatchCriteria=match, TagSpecifications=tag_spec, **extra)
    return str(out["CapacityReservation"]["CapacityReservationId"])


def described(sim: Environment, rid: str) -> dict[str, Any]:
    return sim.boto3_client("ec2").describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]


def template(sim: Environment, rid: str | None = None, preference: str | None = None, market: str | None = None) -> str:
    # User data of another cluster: sim's kubelet leaves these instances alone.
    data: dict[str, Any] = {"ImageId": IMAGE,
                            "UserData": base64.b64encode(b"#!/bin/bash\n/etc/eks/bootstrap.sh other-cluster\n").decode()}
    if rid or preference:
        spec: dict[str, Any] = {"CapacityReservationPreference": preference or "capacity-reservations-only"}
        if rid:
            spec["CapacityReservationTarget"] = {"CapacityReservationId": rid}
        data["CapacityReservationSpecification"] = spec
    if market:
        data["InstanceMarketOptions"] = {"MarketType": market}
    name = f"cr-test-{uuid.uuid4().hex[:8]}"
    return str(sim.boto3_client("ec2").create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)[
        "LaunchTemplate"]["LaunchTemplateId"])


def fleet(sim: Environment, template_id: str, count: int, itype: str = "m5.large", zone: str = ZONE) -> dict[str, Any]:
    return sim.boto3_client("ec2", retries=0).create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": count, "OnDemandTargetCapacity": count,
                                     "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": template_id, "Version": "$Latest"},
                                "Overrides": [{"InstanceType": itype, "SubnetId": sim.seed["subnets"][zone]}]}],
    )


def launched(response: dict[str, Any]) -> list[str]:
    return [i for group in response.get("Instances", []) for i in group["InstanceIds"]]


def instance(sim: Environment, iid: str) -> dict[str, Any]:
    return sim.boto3_client("ec2").describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]


def test_a_reservation_is_created_active_and_found_by_id_tags_owner_and_state(sim: Environment) -> None:
    team = uuid.uuid4().hex[:8]
    rid = reserve(sim, 3, tags={"team": team})
    r = described(sim, rid)
    assert (r["State"], r["InstanceType"], r["AvailabilityZone"], r["TotalInstanceCount"],
            r["AvailableInstanceCount"], r["InstanceMatchCriteria"], r["ReservationType"]) == (
        "active", "m5.large", ZONE, 3, 3, "targeted", "default")
    ec2 = sim.boto3_client("ec2")
    by_tags = ec2.describe_capacity_reservations(Filters=[
        {"Name": "state", "Values": ["active"]}, {"Name": "owner-id", "Values": ["123456789012"]},
        {"Name": "tag:team", "Values": [team]}, {"Name": "instance-match-criteria", "Values": ["targeted"]}])
    assert [x["CapacityReservationId"] for x in by_tags["CapacityReservations"]] == [rid]
    assert ec2.describe_capacity_reservations(Filters=[{"Name": "tag:team", "Values": ["nobody"]}])[
        "CapacityReservations"] == []
    assert ec2.describe_capacity_reservations(Filters=[{"Name": "owner-id", "Values": ["999999999999"]}])[
        "CapacityReservations"] == []


def test_an_unknown_id_or_filter_is_an_error(sim: Environment) -> None:
    ec2 = sim.boto3_client("ec2", retries=0)
    with pytest.raises(ClientError) as caught:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])
    assert caught.value.response["Error"]["Code"] == "InvalidCapacityReservationId.NotFound"
    with pytest.raises(ClientError) as caught:
        ec2.describe_capacity_reservations(Filters=[{"Name": "colour", "Values": ["red"]}])
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_describe_pages_with_max_results(sim: Environment) -> None:
    team = uuid.uuid4().hex[:8]
    made = sorted(reserve(sim, 1, tags={"pages": team}) for _ in range(3))
    pages = sim.boto3_client("ec2").get_paginator("describe_capacity_reservations").paginate(
        Filters=[{"Name": "tag:pages", "Values": [team]}], PaginationConfig={"PageSize": 2})
    sizes, ids = [], []
    for page in pages:
        sizes.append(len(page["CapacityReservations"]))
        ids += [r["CapacityReservationId"] for r in page["CapacityReservations"]]
    assert sizes == [2, 1] and sorted(ids) == made


def test_a_fleet_into_a_reservation_takes_its_count_and_a_full_one_answers_reservation_capacity_exceeded(
        sim: Environment) -> None:
    rid = reserve(sim, 2)
    lt = template(sim, rid)
    first = fleet(sim, lt, 1)
    (iid,) = launched(first)
    assert instance(sim, iid)["CapacityReservationId"] == rid
    assert described(sim, rid)["AvailableInstanceCount"] == 1
    # Three asked, one left: one launches, the rest is an error entry of a 200 answer, as EC2 Fleet's are.
    second = fleet(sim, lt, 3)
    assert len(launched(second)) == 1
    assert [e["ErrorCode"] for e in second["Errors"]] == ["ReservationCapacityExceeded"]
    assert described(sim, rid)["AvailableInstanceCount"] == 0
    full = fleet(sim, lt, 1)
    assert launched(full) == [] and full["Errors"][0]["ErrorCode"] == "ReservationCapacityExceeded"
    # Terminating an instance gives its place back.
    sim.boto3_client("ec2").terminate_instances(InstanceIds=[iid])
    assert described(sim, rid)["AvailableInstanceCount"] == 1


def test_a_reservation_takes_only_its_type_and_zone(sim: Environment) -> None:
    rid = reserve(sim, 2)
    out = fleet(sim, template(sim, rid), 1, itype="m5.xlarge")
    assert launched(out) == [] and out["Errors"][0]["ErrorCode"] == "InvalidParameterCombination"
    assert described(sim, rid)["AvailableInstanceCount"] == 2


def test_run_instances_with_a_target_takes_the_count_and_is_refused_when_full(sim: Environment) -> None:
    rid = reserve(sim, 1)
    ec2 = sim.boto3_client("ec2", retries=0)
    target = {"CapacityReservationTarget": {"CapacityReservationId": rid}}
    ok = ec2.run_instances(ImageId=IMAGE, InstanceType="m5.large", MinCount=1, MaxCount=1,
                           SubnetId=sim.seed["subnets"][ZONE], CapacityReservationSpecification=target)
    assert ok["Instances"][0]["InstanceId"]
    assert instance(sim, ok["Instances"][0]["InstanceId"])["CapacityReservationId"] == rid
    with pytest.raises(ClientError) as caught:
        ec2.run_instances(ImageId=IMAGE, InstanceType="m5.large", MinCount=1, MaxCount=1,
                          SubnetId=sim.seed["subnets"][ZONE], CapacityReservationSpecification=target)
    assert caught.value.response["Error"]["Code"] == "ReservationCapacityExceeded"


def test_an_open_reservation_is_filled_by_on_demand_launches_unless_they_opt_out(sim: Environment) -> None:
    rid = reserve(sim, 1, itype="r5.large", match="open")
    (opted_out,) = launched(fleet(sim, template(sim, preference="none"), 1, itype="r5.large"))
    assert "CapacityReservationId" not in instance(sim, opted_out)
    assert described(sim, rid)["AvailableInstanceCount"] == 1
    (filled,) = launched(fleet(sim, template(sim), 1, itype="r5.large"))
    assert instance(sim, filled)["CapacityReservationId"] == rid
    assert described(sim, rid)["AvailableInstanceCount"] == 0


def test_a_cancelled_reservation_is_no_longer_active_and_launches_nothing(sim: Environment) -> None:
    rid = reserve(sim, 2)
    ec2 = sim.boto3_client("ec2", retries=0)
    assert ec2.cancel_capacity_reservation(CapacityReservationId=rid)["Return"] is True
    assert described(sim, rid)["State"] == "cancelled"
    active = ec2.describe_capacity_reservations(Filters=[{"Name": "state", "Values": ["active"]}])
    assert rid not in {r["CapacityReservationId"] for r in active["CapacityReservations"]}
    out = fleet(sim, template(sim, rid), 1)
    assert launched(out) == [] and out["Errors"][0]["ErrorCode"] == "InvalidCapacityReservationId.NotFound"


def test_a_limited_reservation_carries_its_end_date(sim: Environment) -> None:
    end = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    rid = reserve(sim, 1, EndDateType="limited", EndDate=end)
    r = described(sim, rid)
    assert r["EndDateType"] == "limited" and r["EndDate"] == end
    with pytest.raises(ClientError) as caught:
        sim.boto3_client("ec2", retries=0).create_capacity_reservation(
            InstanceType="m5.large", InstancePlatform="Linux/UNIX", AvailabilityZone=ZONE, InstanceCount=1,
            EndDateType="limited")
    assert caught.value.response["Error"]["Code"] == "InvalidParameterCombination"


def test_a_capacity_block_has_its_type_and_end_and_needs_the_capacity_block_market(sim: Environment) -> None:
    end = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    rid = sim.create_capacity_block("p5.48xlarge", ZONE, 1, end)
    r = described(sim, rid)
    assert (r["ReservationType"], r["EndDate"], r["InstanceMatchCriteria"]) == ("capacity-block", end, "targeted")
    refused = fleet(sim, template(sim, rid), 1, itype="p5.48xlarge")
    assert launched(refused) == [] and refused["Errors"][0]["ErrorCode"] == "InvalidParameterCombination"
    (iid,) = launched(fleet(sim, template(sim, rid, market="capacity-block"), 1, itype="p5.48xlarge"))
    assert instance(sim, iid)["InstanceLifecycle"] == "capacity-block"
    with pytest.raises(ClientError) as caught:
        sim.boto3_client("ec2", retries=0).cancel_capacity_reservation(CapacityReservationId=rid)
    assert caught.value.response["Error"]["Code"] == "UnsupportedOperation"


def test_describe_capacity_reservations_needs_the_permission(sim: Environment) -> None:
    # The functions that read the world are granted it (infra/iam.py READ_WORLD); the cleanup function is not.
    def client(name: str):
        return boto3.client("ec2", endpoint_url=sim.aws_endpoint, region_name=REGION, **FUNCTION_CREDENTIALS[name])

    assert isinstance(client("provisioner").describe_capacity_reservations()["CapacityReservations"], list)
    with pytest.raises(ClientError) as caught:
        client("cleanup").describe_capacity_reservations()
    assert caught.value.response["Error"]["Code"] == "UnauthorizedOperation"
    assert "ec2:DescribeCapacityReservations" in caught.value.response["Error"]["Message"]
