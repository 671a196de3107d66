"""This cluster's instances: listing by tag, terminate refusing what is not ours, status checks."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import instances
from nodescale.aws import tags as tagging

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

CLUSTER = "demo-cluster"


def run(ec2, tags: dict[str, str], market: str | None = None) -> str:
    kwargs = {}
    if market:
        kwargs["InstanceMarketOptions"] = {"MarketType": market}
    spec = [{"ResourceType": "instance", "Tags": tagging.to_list(tags)}] if tags else []
    out = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large", TagSpecifications=spec, **kwargs
    )
    return out["Instances"][0]["InstanceId"]


@pytest.fixture(scope="module")
def world():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        ids = {
            "ours": run(ec2, tagging.resource_tags(CLUSTER, "default", "default"), market="spot"),
            "ours-od": run(ec2, tagging.resource_tags(CLUSTER, "banana")),
            "other-cluster": run(ec2, tagging.resource_tags("other", "default")),
            "karpenter": run(ec2, {"karpenter.sh/nodepool": "default", "kubernetes.io/cluster/demo-cluster": "owned"}),
            "untagged": run(ec2, {}),
        }
        yield ec2, ids


def test_lists_only_this_clusters_instances(world):
    ec2, ids = world
    found = {i.instance_id: i for i in instances.list_instances(ec2, CLUSTER)}
    assert set(found) == {ids["ours"], ids["ours-od"]}
    spot = found[ids["ours"]]
    assert (spot.nodepool, spot.instance_type, spot.capacity_type) == ("default", "m5.large", "spot")
    assert spot.zone.startswith("us-east-1") and spot.launch_time is not None
    assert spot.provider_id == f"aws:///{spot.zone}/{spot.instance_id}"
    assert instances.instance_id_from_provider_id(spot.provider_id) == spot.instance_id
    assert found[ids["ours-od"]].capacity_type == "on-demand"
    assert [i.instance_id for i in instances.list_instances(ec2, CLUSTER, nodepool="banana")] == [ids["ours-od"]]


def test_unregistered_after_the_timeout(world):
    ec2, ids = world
    ours = instances.list_instances(ec2, CLUSTER, states=("running",))
    launched = {i.instance_id: i.launch_time for i in ours}
    later = max(launched.values()) + timedelta(minutes=16)
    stale = instances.unregistered(ours, [ids["ours"]], 900, now=later)
    assert [i.instance_id for i in stale] == [ids["ours-od"]]
    assert instances.unregistered(ours, [], 900, now=later - timedelta(minutes=2)) == []


def test_healthy_running_instances_are_not_impaired(world):
    ec2, ids = world
    assert ids["ours"] not in instances.impaired_instances(ec2)


def test_terminate_refuses_instances_without_this_clusters_tag(world, caplog):
    ec2, ids = world
    asked = [ids["untagged"], ids["karpenter"], ids["other-cluster"], ids["ours-od"], "i-0123456789abcdef0"]
    with caplog.at_level("WARNING"):
        result = instances.terminate(ec2, asked, CLUSTER)
    assert result.terminated == [ids["ours-od"]]
    assert sorted(result.refused) == sorted([ids["untagged"], ids["karpenter"], ids["other-cluster"]])
    assert result.missing == ["i-0123456789abcdef0"]
    assert "refused to terminate" in caplog.text
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=[ids["untagged"], ids["karpenter"], ids["ours-od"]])["Reservations"]
        for i in r["Instances"]
    }
    assert states[ids["untagged"]] == "running" and states[ids["karpenter"]] == "running"
    assert states[ids["ours-od"]] in ("shutting-down", "terminated")
    assert ids["ours-od"] not in {i.instance_id for i in instances.list_instances(ec2, CLUSTER, states=("running",))}
