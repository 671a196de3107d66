"""Prices: the bundled table, live Price List / spot history answers, and the fallbacks between them."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber

from nodescale.aws import catalog, pricing


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(pricing, "_warned", set())


def _client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


def _price_item(instance_type: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type, "regionCode": "us-east-1"}},
            "terms": {
                "OnDemand": {
                    "ABC.JRTCKXETXF": {
                        "priceDimensions": {
                            "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


def _offering(types, name, zone, ctype):
    it = next(t for t in types if t.name == name)
    return next(o for o in it.offerings if o.zone == zone and o.capacity_type == ctype)


def test_bundled_table_keeps_its_provenance():
    assert "as of" in pricing.bundled_source()
    assert {"us-east-1", "cn-north-1", "us-gov-west-1"} <= set(pricing.bundled_regions())


def test_bundled_prices_us_east_1_and_cn_north_1():
    assert pricing.bundled_on_demand("us-east-1")["m5.large"] == 0.096
    assert pricing.bundled_on_demand("cn-north-1")["m5.large"] == 1.013
    types = catalog.bundled_catalog("us-east-1")
    assert _offering(types, "m5.large", "us-east-1c", "on-demand").price == 0.096
    # Offline spot: the documented estimate off on-demand.
    assert _offering(types, "m5.large", "us-east-1c", "spot").price == pytest.approx(
        0.096 * pricing.SPOT_ESTIMATE_FRACTION
    )
    cn = catalog.bundled_catalog("cn-north-1")
    assert _offering(cn, "m5.large", "cn-north-1a", "on-demand").price == 1.013


def test_region_without_a_table_estimates_from_us_east_1(caplog):
    with caplog.at_level(logging.WARNING, logger="nodescale.aws.pricing"):
        first = pricing.bundled_on_demand("eu-west-1")
        pricing.bundled_on_demand("eu-west-1")
    assert first["m5.large"] == 0.096
    assert len([r for r in caplog.records if "eu-west-1" in r.getMessage()]) == 1


def test_parse_price_list_item():
    assert pricing.parse_price_list_item(_price_item("m5.large", "0.0960000000")) == ("m5.large", 0.096)
    assert pricing.parse_price_list_item(_price_item("m5.large", "0.0000000000")) is None
    assert pricing.parse_price_list_item(json.dumps({"product": {"attributes": {}}})) is None


def test_live_on_demand_prices_win_and_fill_from_the_table():
    client = _client("pricing")
    with Stubber(client) as stub:
        stub.add_response(
            "get_products", {"PriceList": [_price_item("m5.large", "0.2"), _price_item("new.type", "1.5")]}
        )
        prices = pricing.on_demand_prices("us-east-1", client)
    assert prices["m5.large"] == 0.2
    assert prices["new.type"] == 1.5
    assert prices["c5.large"] == pricing.bundled_on_demand("us-east-1")["c5.large"]


def test_price_list_failure_falls_back_and_logs_once(caplog):
    client = _client("pricing")
    with caplog.at_level(logging.WARNING, logger="nodescale.aws.pricing"), Stubber(client) as stub:
        stub.add_client_error("get_products", "AccessDeniedException", "no pricing endpoint", 400)
        stub.add_client_error("get_products", "AccessDeniedException", "no pricing endpoint", 400)
        first = pricing.on_demand_prices("us-east-1", client)
        second = pricing.on_demand_prices("us-east-1", client)
    assert first == second == pricing.bundled_on_demand("us-east-1")
    messages = [r.getMessage() for r in caplog.records if "Price List API" in r.getMessage()]
    assert len(messages) == 1
    assert "AccessDeniedException" in messages[0] and "bundled" in messages[0]


def test_spot_history_latest_per_type_and_zone_wins_and_tiny_prices_are_dropped():
    client = _client("ec2")
    now = datetime.now(UTC)
    history = [
        {
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "0.030",
            "Timestamp": now - timedelta(hours=2),
        },
        {
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "0.035",
            "Timestamp": now,
        },
        {
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1b",
            "SpotPrice": "0.00001",
            "Timestamp": now,
        },
    ]
    with Stubber(client) as stub:
        stub.add_response("describe_spot_price_history", {"SpotPriceHistory": history})
        prices = pricing.spot_prices(client)
    assert prices == {("m5.large", "us-east-1a"): 0.035}


def test_live_spot_price_used_in_offerings_and_estimate_elsewhere():
    facts = catalog.bundled_facts_by_name()["m5.large"]
    offerings = catalog.make_offerings(
        facts, ["us-east-1a", "us-east-1b"], {"m5.large": 0.096}, {("m5.large", "us-east-1a"): 0.035}
    )
    spot = {o.zone: o.price for o in offerings if o.capacity_type == "spot"}
    assert spot == {"us-east-1a": 0.035, "us-east-1b": pytest.approx(0.096 * pricing.SPOT_ESTIMATE_FRACTION)}


def test_pricing_api_region():
    assert catalog.pricing_api_region("us-west-2") == "us-east-1"
    assert catalog.pricing_api_region("ap-southeast-1") == "ap-south-1"
    assert catalog.pricing_api_region("cn-north-1") is None
