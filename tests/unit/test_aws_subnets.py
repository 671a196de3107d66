"""Subnets and security groups by selector terms; per zone the subnet with the most free addresses."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import securitygroups, subnets
from nodescale.aws.selectors import SelectorError
from nodescale.model.nodepool import SelectorTerm

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

REGION = "us-east-1"
DISCOVERY = {"karpenter.sh/discovery": "demo-cluster"}


@pytest.fixture(scope="module")
def world():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]

        def subnet(cidr: str, zone: str, tags: dict[str, str]) -> str:
            sid = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
            if tags:
                ec2.create_tags(Resources=[sid], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
            return sid

        ids = {
            "a-small": subnet("10.0.1.0/26", "us-east-1a", {**DISCOVERY, "tier": "private"}),
            "a-big": subnet("10.0.2.0/24", "us-east-1a", {**DISCOVERY, "tier": "private"}),
            "b": subnet("10.0.3.0/25", "us-east-1b", {**DISCOVERY, "tier": "public"}),
            "c-untagged": subnet("10.0.4.0/24", "us-east-1c", {}),
        }
        sg_tagged = ec2.create_security_group(GroupName="nodes", Description="n", VpcId=vpc)["GroupId"]
        ec2.create_tags(Resources=[sg_tagged], Tags=[{"Key": "karpenter.sh/discovery", "Value": "demo-cluster"}])
        sg_named = ec2.create_security_group(GroupName="extra", Description="e", VpcId=vpc)["GroupId"]
        yield ec2, ids, sg_tagged, sg_named


def test_most_free_addresses_per_zone(world):
    ec2, ids, *_ = world
    found = subnets.discover(ec2, [SelectorTerm(tags=DISCOVERY)])
    assert {s.id for s in found} == {ids["a-small"], ids["a-big"], ids["b"]}
    best = subnets.best_per_zone(found)
    assert {z: s.id for z, s in best.items()} == {"us-east-1a": ids["a-big"], "us-east-1b": ids["b"]}
    assert best["us-east-1a"].available_ips > next(s for s in found if s.id == ids["a-small"]).available_ips


def test_full_subnets_are_not_chosen(world):
    ec2, ids, *_ = world
    found = subnets.discover(ec2, [SelectorTerm(tags=DISCOVERY)])
    big = next(s for s in found if s.id == ids["a-big"])
    assert subnets.best_per_zone(found, min_free=big.available_ips + 1) == {}


def test_tags_and_within_a_term_or_across_terms_and_wildcards(world):
    ec2, ids, *_ = world
    public = subnets.discover(ec2, [SelectorTerm(tags={**DISCOVERY, "tier": "public"})])
    assert [s.id for s in public] == [ids["b"]]
    any_tier = subnets.discover(ec2, [SelectorTerm(tags={"tier": "*"})])
    assert {s.id for s in any_tier} == {ids["a-small"], ids["a-big"], ids["b"]}
    by_id_or_tag = subnets.discover(ec2, [SelectorTerm(id=ids["c-untagged"]), SelectorTerm(tags={"tier": "public"})])
    assert {s.id for s in by_id_or_tag} == {ids["c-untagged"], ids["b"]}


def test_nothing_selected_is_a_clear_error(world):
    ec2, *_ = world
    with pytest.raises(SelectorError, match=r"subnetSelectorTerms: no available subnet matches \{tier=none\}"):
        subnets.discover(ec2, [SelectorTerm(tags={"tier": "none"})])
    with pytest.raises(SelectorError, match="at least one selector term"):
        subnets.discover(ec2, [])
    with pytest.raises(SelectorError, match=r"\[0\]: an empty selector term"):
        subnets.discover(ec2, [SelectorTerm()])


def test_security_groups_by_tags_id_and_name(world):
    ec2, _, sg_tagged, sg_named = world
    assert [g.id for g in securitygroups.discover(ec2, [SelectorTerm(tags=DISCOVERY)])] == [sg_tagged]
    both = securitygroups.discover(ec2, [SelectorTerm(tags=DISCOVERY), SelectorTerm(name="extra")])
    assert {g.id for g in both} == {sg_tagged, sg_named}
    assert [g.id for g in securitygroups.discover(ec2, [SelectorTerm(id=sg_named)])] == [sg_named]
    with pytest.raises(SelectorError, match="no security group matches"):
        securitygroups.discover(ec2, [SelectorTerm(tags={"nope": "x"})])
