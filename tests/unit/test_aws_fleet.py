"""EC2 Fleet launches: request shape, client tokens, error parsing, and the retry on what remains."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import fleet, offerings
from nodescale.aws import tags as tagging
from nodescale.aws.subnets import Subnet
from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

ZONES = ("us-east-1a", "us-east-1b")
SUBNETS = {z: Subnet(f"subnet-{z[-1]}", z, f"use1-az{i}", "vpc-1", 200) for i, z in enumerate(ZONES)}


def it(name: str, spot: float, od: float, arch: str = "amd64", zones=ZONES) -> InstanceType:
    offers = []
    for i, z in enumerate(zones):
        offers.append(Offering(z, "spot", round(spot + 0.001 * i, 4)))
        offers.append(Offering(z, "on-demand", od))
    return InstanceType(name, {wk.ARCH: arch}, {"cpu": 2000}, {}, tuple(offers))


TYPES = [it("m5.large", 0.04, 0.096), it("c5.large", 0.03, 0.085), it("r5.large", 0.05, 0.126)]
ARM = [it("m6g.large", 0.02, 0.077, "arm64")]


def request(capacity_types=("spot", "on-demand"), key="pods:a,b", types=TYPES, count=1) -> fleet.LaunchRequest:
    return fleet.LaunchRequest(
        cluster="demo-cluster",
        nodepool="default",
        nodeclass="default",
        templates=(
            fleet.TemplateChoice("nodescale/demo-cluster/amd", tuple(types)),
            fleet.TemplateChoice("nodescale/demo-cluster/arm", tuple(ARM)),
        ),
        subnets=SUBNETS,
        capacity_types=tuple(capacity_types),
        key=key,
        count=count,
        tags={"team": "platform", tagging.CLUSTER: "someone-else"},
    )


class ScriptedEc2:
    """create_fleet answered by a function of the request; every request kept for assertions."""

    def __init__(self, answer):
        self.answer = answer
        self.requests: list[dict] = []

    def create_fleet(self, **params):
        self.requests.append(params)
        return self.answer(params, len(self.requests))


def overrides_of(params: dict) -> list[tuple[str, str, str]]:
    out = []
    for cfg in params["LaunchTemplateConfigs"]:
        for o in cfg["Overrides"]:
            out.append((cfg["LaunchTemplateSpecification"]["LaunchTemplateName"], o["InstanceType"], o["SubnetId"]))
    return out


def error(itype: str, subnet: str, code: str, lifecycle: str = "spot") -> dict:
    return {
        "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": itype, "SubnetId": subnet}},
        "Lifecycle": lifecycle,
        "ErrorCode": code,
        "ErrorMessage": f"{code} for {itype}",
    }


def launched(itype: str, subnet: str, lifecycle: str, iid: str = "i-0000000000000001") -> dict:
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "nodescale/demo-cluster/amd"},
            "Overrides": {"InstanceType": itype, "SubnetId": subnet},
        },
        "Lifecycle": lifecycle,
        "InstanceIds": [iid],
        "InstanceType": itype,
    }


@pytest.fixture(autouse=True)
def _fresh_local_cache():
    offerings.clear_local()
    yield
    offerings.clear_local()


def test_spot_request_shape_cheapest_first_across_templates_and_subnets():
    req = request()
    overrides = fleet.plan_overrides(req, "spot")
    params = fleet.fleet_request(req, "spot", overrides, 1)
    assert params["Type"] == "instant"
    assert params["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert "OnDemandOptions" not in params
    assert params["TargetCapacitySpecification"]["TotalTargetCapacity"] == 1
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    # One config per template; every override priced and ranked cheapest first.
    assert [c["LaunchTemplateSpecification"]["LaunchTemplateName"] for c in params["LaunchTemplateConfigs"]] == [
        "nodescale/demo-cluster/arm",
        "nodescale/demo-cluster/amd",
    ]
    ranked = sorted(overrides, key=lambda o: o.priority)
    assert [(o.instance_type, o.zone) for o in ranked] == [
        ("m6g.large", "us-east-1a"),
        ("m6g.large", "us-east-1b"),
        ("c5.large", "us-east-1a"),
        ("c5.large", "us-east-1b"),
        ("m5.large", "us-east-1a"),
        ("m5.large", "us-east-1b"),
        ("r5.large", "us-east-1a"),
        ("r5.large", "us-east-1b"),
    ]
    assert [o.price for o in ranked] == sorted(o.price for o in ranked)
    tags = {t["ResourceType"]: {x["Key"]: x["Value"] for x in t["Tags"]} for t in params["TagSpecifications"]}
    assert set(tags) == {"instance", "volume", "fleet"}
    assert tags["instance"][tagging.CLUSTER] == "demo-cluster"  # a node class cannot take ownership away
    assert tags["instance"][tagging.NODEPOOL] == "default"
    assert tags["instance"]["team"] == "platform"
    assert tags["instance"][tagging.LAUNCH] == req.launch_id


def test_on_demand_uses_lowest_price():
    req = fleet.LaunchRequest(**{**request(("on-demand",)).__dict__, "context": "cr-0123"})
    params = fleet.fleet_request(req, "on-demand", fleet.plan_overrides(req, "on-demand"), 2)
    assert params["Context"] == "cr-0123"
    assert params["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert params["TargetCapacitySpecification"]["TotalTargetCapacity"] == 2


def test_at_most_60_cheapest_types_and_only_allowed_zones():
    many = [it(f"t{i:03d}.large", 0.01 * (100 - i), 0.2, zones=(*ZONES, "us-east-1c")) for i in range(80)]
    req = request(types=many)
    overrides = fleet.plan_overrides(req, "spot")
    names = {o.instance_type for o in overrides}
    assert len(names) == 60
    assert "t079.large" in names and "t000.large" not in names  # the cheapest kept
    assert {o.zone for o in overrides} == set(ZONES)  # no subnet in 1c: never offered


def test_unavailable_offerings_are_left_out():
    req = request()
    marked = {("c5.large", "us-east-1a", "spot"): 9e12}
    pairs = {(o.instance_type, o.zone) for o in fleet.plan_overrides(req, "spot", marked)}
    assert ("c5.large", "us-east-1a") not in pairs and ("c5.large", "us-east-1b") in pairs


def test_client_token_is_stable_for_the_same_launch_and_differs_otherwise():
    req = request()
    ov = fleet.plan_overrides(req, "spot")
    token = fleet.fleet_request(req, "spot", ov, 1)["ClientToken"]
    assert token == fleet.fleet_request(request(), "spot", fleet.plan_overrides(request(), "spot"), 1)["ClientToken"]
    assert len(token) <= 64
    assert token != fleet.client_token(request(key="pods:c"), "spot", ov, 1)
    assert token != fleet.client_token(req, "spot", ov[1:], 1)
    assert token != fleet.client_token(req, "on-demand", ov, 1)


def test_parse_response_maps_errors_back_to_offerings():
    req = request()
    ov = fleet.plan_overrides(req, "spot")
    response = {
        "Instances": [launched("m5.large", "subnet-b", "spot")],
        "Errors": [
            error("c5.large", "subnet-a", "InsufficientInstanceCapacity"),
            {"ErrorCode": "InvalidLaunchTemplateName.NotFoundException", "ErrorMessage": "gone"},
        ],
    }
    instances, errors, request_errors = fleet.parse_response(response, ov, req.launch_id)
    assert [(i.instance_id, i.instance_type, i.zone, i.capacity_type, i.price) for i in instances] == [
        ("i-0000000000000001", "m5.large", "us-east-1b", "spot", 0.041)
    ]
    assert [(e.offering, e.code, e.is_capacity_error) for e in errors] == [
        (("c5.large", "us-east-1a", "spot"), "InsufficientInstanceCapacity", True)
    ]
    assert request_errors == [("InvalidLaunchTemplateName.NotFoundException", "gone")]


def test_capacity_error_marks_the_offering_and_retries_at_once_on_the_rest():
    def answer(params, n):
        first = overrides_of(params)[0]
        if first[1] == "m6g.large" and first[2] == "subnet-a":
            return {"Instances": [], "Errors": [error("m6g.large", "subnet-a", "InsufficientInstanceCapacity")]}
        return {"Instances": [launched(first[1], first[2], "spot")], "Errors": []}

    ec2 = ScriptedEc2(answer)
    cache = offerings.UnavailableOfferings()
    result = fleet.launch(ec2, request(), cache)
    assert len(ec2.requests) == 2
    assert ("nodescale/demo-cluster/arm", "m6g.large", "subnet-a") not in overrides_of(ec2.requests[1])
    assert [(i.instance_type, i.zone, i.capacity_type) for i in result.instances] == [
        ("m6g.large", "us-east-1b", "spot")
    ]
    assert result.errors_by_code() == {"InsufficientInstanceCapacity": 1}
    assert cache.is_unavailable("m6g.large", "us-east-1a", "spot")
    # A later invocation (a new cache over the same store) skips it too.
    assert offerings.UnavailableOfferings().is_unavailable("m6g.large", "us-east-1a", "spot")
    assert ec2.requests[0]["ClientToken"] != ec2.requests[1]["ClientToken"]


def test_spot_first_then_on_demand_as_the_fallback():
    def answer(params, n):
        if params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot":
            return {"Instances": [], "Errors": [error(t, s, "UnfulfillableCapacity") for _, t, s in overrides_of(params)]}
        _, t, s = overrides_of(params)[0]
        return {"Instances": [launched(t, s, "on-demand")]}

    ec2 = ScriptedEc2(answer)
    result = fleet.launch(ec2, request(), offerings.UnavailableOfferings())
    kinds = [r["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for r in ec2.requests]
    assert kinds == ["spot", "on-demand"]
    assert ec2.requests[1]["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert [(i.instance_type, i.capacity_type, i.price) for i in result.instances] == [("m6g.large", "on-demand", 0.077)]


def test_spot_quota_exhausted_goes_straight_to_on_demand():
    def answer(params, n):
        _, t, s = overrides_of(params)[0]
        if params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot":
            return {"Instances": [], "Errors": [error(t, s, "MaxSpotInstanceCountExceeded")]}
        return {"Instances": [launched(t, s, "on-demand")]}

    ec2 = ScriptedEc2(answer)
    cache = offerings.UnavailableOfferings()
    result = fleet.launch(ec2, request(), cache)
    assert len(ec2.requests) == 2 and result.instances[0].capacity_type == "on-demand"
    assert cache.is_unavailable("r5.large", "us-east-1b", "spot")


def test_non_capacity_errors_are_reported_not_retried():
    ec2 = ScriptedEc2(lambda params, n: {"Instances": [], "Errors": [error("c5.large", "subnet-a", "InvalidParameter")]})
    result = fleet.launch(ec2, request(("on-demand",)), offerings.UnavailableOfferings())
    assert len(ec2.requests) == 1 and result.instances == [] and result.unfulfilled == 1
    assert result.errors_by_code() == {"InvalidParameter": 1}
    assert offerings.unavailable(None, None) == {}


def test_nothing_left_to_try_makes_no_request():
    every = {(t.name, z, "on-demand"): 9e12 for t in [*TYPES, *ARM] for z in ZONES}
    offerings.mark_unavailable(None, None, every, "InsufficientInstanceCapacity")
    ec2 = ScriptedEc2(lambda params, n: pytest.fail("no request expected"))
    result = fleet.launch(ec2, request(("on-demand",)), offerings.UnavailableOfferings())
    assert ec2.requests == [] and result.unfulfilled == 1


def test_launch_against_moto_tags_instances_and_reports_them():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = {}
        for i, z in enumerate(ZONES):
            s = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=z)["Subnet"]
            subnets[z] = Subnet(s["SubnetId"], z, "", vpc, s["AvailableIpAddressCount"])
        for name in ("nodescale/demo-cluster/amd", "nodescale/demo-cluster/arm"):
            ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": "ami-12c6146b"})
        req = fleet.LaunchRequest(**{**request(("spot",), count=2).__dict__, "subnets": subnets})
        result = fleet.launch(ec2, req, offerings.UnavailableOfferings())
        assert len(result.instances) == 2 and result.unfulfilled == 0
        ids = [i.instance_id for i in result.instances]
        described = ec2.describe_instances(InstanceIds=ids)["Reservations"]
        raw = [i for r in described for i in r["Instances"]]
        assert all(i["InstanceLifecycle"] == "spot" for i in raw)
        assert all(tagging.is_managed(i["Tags"], "demo-cluster") for i in raw)
        assert {i.instance_type for i in result.instances} == {"m6g.large"}  # moto takes the first override
        assert all(i.price == 0.02 and i.zone == "us-east-1a" for i in result.instances)
