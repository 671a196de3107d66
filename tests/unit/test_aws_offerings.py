"""Unavailable offerings round-trip through the shared DynamoDB table and expire on their own."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import offerings
from nodescale.model.instancetype import InstanceType, Offering

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

TABLE = "nodescale-demo-cluster"
NOW = 1_800_000_000.0


@pytest.fixture(scope="module")
def dynamodb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        client.update_time_to_live(
            TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
        )
        # An idempotency record shares the table: it is not an offering.
        client.put_item(TableName=TABLE, Item={"pk": {"S": "idem#abc"}, "expiresAt": {"N": str(int(NOW + 999))}})
        yield client


@pytest.fixture(autouse=True)
def _empty_table(dynamodb):
    yield
    for item in dynamodb.scan(TableName=TABLE)["Items"]:
        if item["pk"]["S"].startswith("offering#"):
            dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"]})


def test_round_trip_with_expiry(dynamodb):
    expires = offerings.mark_unavailable(
        dynamodb, TABLE, [("m5.large", "us-east-1a", "spot"), ("c5.large", "us-east-1b", "on-demand")],
        "InsufficientInstanceCapacity", now=NOW,
    )
    assert expires == NOW + 180
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "offering#m5.large#us-east-1a#spot"}})["Item"]
    assert item["reason"]["S"] == "InsufficientInstanceCapacity" and item["expiresAt"]["N"] == str(int(NOW + 180))
    assert offerings.unavailable(dynamodb, TABLE, now=NOW + 10) == {
        ("m5.large", "us-east-1a", "spot"): NOW + 180,
        ("c5.large", "us-east-1b", "on-demand"): NOW + 180,
    }
    # TTL deletion is lazy: an expired item still in the table no longer counts.
    assert offerings.unavailable(dynamodb, TABLE, now=NOW + 181) == {}


def test_many_marks_are_written_in_batches(dynamodb):
    keys = [(f"t{i}.large", "us-east-1a", "spot") for i in range(60)]
    offerings.mark_unavailable(dynamodb, TABLE, keys, "UnfulfillableCapacity", ttl_seconds=60, now=NOW)
    assert set(offerings.unavailable(dynamodb, TABLE, now=NOW)) == set(keys)


def test_cache_reads_once_and_sees_its_own_marks(dynamodb):
    clock = [NOW]
    cache = offerings.UnavailableOfferings(dynamodb, TABLE, clock=lambda: clock[0])
    assert cache.snapshot() == {}
    other = offerings.UnavailableOfferings(dynamodb, TABLE, clock=lambda: clock[0])
    other.mark([("r5.large", "us-east-1c", "spot")], "InsufficientInstanceCapacity")
    cache.mark([("m5.large", "us-east-1a", "spot")], "InsufficientInstanceCapacity")
    assert cache.is_unavailable("m5.large", "us-east-1a", "spot")
    assert not cache.is_unavailable("r5.large", "us-east-1c", "spot")  # read once per invocation
    assert cache.refresh().keys() == {("m5.large", "us-east-1a", "spot"), ("r5.large", "us-east-1c", "spot")}
    clock[0] = NOW + 181
    assert cache.snapshot() == {}


def test_without_a_table_the_process_remembers(dynamodb):
    offerings.clear_local()
    offerings.mark_unavailable(None, None, [("m5.large", "us-east-1a", "spot")], "ICE", now=NOW)
    assert offerings.unavailable(None, None, now=NOW + 1) == {("m5.large", "us-east-1a", "spot"): NOW + 180}
    assert offerings.unavailable(None, None, now=NOW + 200) == {}
    offerings.clear_local()


def test_apply_marks_instance_type_offerings_unavailable():
    m5 = InstanceType(
        "m5.large", {}, {"cpu": 2000}, {},
        (Offering("us-east-1a", "spot", 0.04), Offering("us-east-1b", "spot", 0.05)),
    )
    (marked,) = offerings.apply([m5], {("m5.large", "us-east-1a", "spot"): NOW})
    assert [o.available for o in marked.offerings] == [False, True]
    assert marked.cheapest().zone == "us-east-1b"
    assert m5.offerings[0].available  # the catalog's own object is untouched
