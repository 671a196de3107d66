"""Prices: the bundled table, live Price List / spot history answers, and the fallbacks between them."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber

from nodescale.aws import catalog, pricing
from nodescale.model import nodecapacity


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


# ------------------------------------------------------------------------------------- Windows (#28.3)


def _by_offering(it) -> dict[tuple[str, str], float]:
    return {(o.zone, o.capacity_type): o.price for o in it.offerings}


def test_the_bundled_windows_license_rate_names_its_source():
    """#28.3: the license charge is bundled with where it comes from (AWS's Optimize CPUs page)."""
    assert pricing.windows_license_per_vcpu("us-east-1") == 0.046
    assert pricing.windows_license_per_vcpu("eu-west-1") == 0.046
    assert "optimize-cpu" in pricing.windows_license_source()


def test_a_windows_node_class_pays_the_license_per_vcpu_on_every_offering():
    """#28.3: a Windows AMI family prices each offering as Linux plus 0.046 USD per vCPU-hour, on-demand
    and (estimated) spot alike; a Linux family keeps the Linux prices."""
    types = [it for it in catalog.bundled_catalog("us-east-1") if it.name in ("m5.large", "m5.4xlarge", "c6g.large")]
    linux = {it.name: it for it in nodecapacity.with_kubelet(types, None, None, "AL2023")}
    windows = {it.name: it for it in nodecapacity.with_kubelet(types, None, None, "Windows2022")}
    for name, vcpus in (("m5.large", 2), ("m5.4xlarge", 16)):
        base, licensed = _by_offering(linux[name]), _by_offering(windows[name])
        assert set(base) == set(licensed) and {c for _, c in base} == {"on-demand", "spot"}
        for key, price in base.items():
            assert licensed[key] == pytest.approx(price + vcpus * 0.046), (name, key)
    assert _by_offering(linux["m5.large"])[("us-east-1a", "on-demand")] == 0.096
    # Graviton runs no Windows: it offers nothing to a Windows pool, whatever its price says.
    assert windows["c6g.large"].operating_systems == frozenset()


def test_live_windows_spot_and_on_demand_prices_win_over_the_estimate():
    """#28.3: where AWS answers with Windows prices, they are the Windows offerings' prices."""
    facts = catalog.bundled_facts_by_name()["m5.large"]
    windows = catalog.WindowsPricing({"m5.large": 0.2}, {("m5.large", "us-east-1a"): 0.11}, 0.046)
    [it] = catalog.build_catalog(
        [facts], "us-east-1", {"m5.large": ["us-east-1a", "us-east-1b"]}, {"m5.large": 0.096},
        {("m5.large", "us-east-1a"): 0.035}, windows=windows,
    )
    [win] = nodecapacity.with_kubelet([it], None, None, "Windows2019")
    assert _by_offering(win) == {
        ("us-east-1a", "on-demand"): 0.2,
        ("us-east-1b", "on-demand"): 0.2,
        ("us-east-1a", "spot"): 0.11,
        ("us-east-1b", "spot"): pytest.approx(0.096 * pricing.SPOT_ESTIMATE_FRACTION + 2 * 0.046),
    }


def test_windows_spot_history_asks_for_the_windows_product_descriptions():
    """#28.3: Windows spot is its own market in DescribeSpotPriceHistory ("Windows", "Windows (Amazon VPC)")."""
    client = _client("ec2")
    item = {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.120",
            "ProductDescription": "Windows", "Timestamp": datetime.now(UTC)}
    with Stubber(client) as stub:
        stub.add_response(
            "describe_spot_price_history", {"SpotPriceHistory": [item]},
            {"ProductDescriptions": ["Windows", "Windows (Amazon VPC)"], "StartTime": ANY},
        )
        stub.add_response(
            "describe_spot_price_history", {"SpotPriceHistory": []},
            {"ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], "StartTime": ANY},
        )
        assert pricing.spot_prices(client, operating_system=pricing.WINDOWS) == {("m5.large", "us-east-1a"): 0.12}
        assert pricing.spot_prices(client) == {}


def test_windows_on_demand_prices_are_asked_of_the_price_list_as_windows():
    """#28.3: the Price List API is asked for operatingSystem Windows (license included) for Windows pools."""
    client = _client("pricing")
    wanted = {"regionCode": "us-east-1", "operatingSystem": "Windows", "preInstalledSw": "NA", "tenancy": "Shared",
              "capacitystatus": "Used", "licenseModel": "No License required"}
    filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]
    with Stubber(client) as stub:
        stub.add_response(
            "get_products", {"PriceList": [_price_item("m5.large", "0.1880000000")]},
            {"ServiceCode": "AmazonEC2", "Filters": filters, "FormatVersion": "aws_v1"},
        )
        assert pricing.live_windows_on_demand("us-east-1", client) == {"m5.large": 0.188}
        stub.assert_no_pending_responses()


def test_china_has_no_published_windows_rate_and_says_so(caplog):
    """#28.3: no CNY license rate is bundled; cn-* Windows pools keep the Linux price, with a warning naming why."""
    with caplog.at_level(logging.WARNING, logger="nodescale.aws.pricing"):
        assert pricing.windows_license_per_vcpu("cn-north-1") is None
        types = [it for it in catalog.bundled_catalog("cn-north-1") if it.name == "m5.large"]
        [win] = nodecapacity.with_kubelet(types, None, None, "Windows2022")
    assert _by_offering(win) == _by_offering(types[0])
    assert any("no Windows license rate in CNY" in r.getMessage() for r in caplog.records)


def test_cn_northwest_1_is_in_the_catalog_priced_from_cn_north_1_in_cny(caplog):
    """#28.4: the docs name cn-northwest-1 (Ningxia); the catalog has its three zones and, with no Ningxia
    prices bundled, cn-north-1's CNY prices stand in (logged), never us-east-1's dollars."""
    with caplog.at_level(logging.WARNING, logger="nodescale.aws.pricing"):
        types = {it.name: it for it in catalog.bundled_catalog("cn-northwest-1")}
    m5 = types["m5.large"]
    assert {o.zone for o in m5.offerings} == {"cn-northwest-1a", "cn-northwest-1b", "cn-northwest-1c"}
    assert m5.labels["topology.kubernetes.io/region"] == "cn-northwest-1"
    assert {o.price for o in m5.offerings if o.capacity_type == "on-demand"} == {
        pricing.bundled_on_demand("cn-north-1")["m5.large"]
    }
    assert set(types) == {it.name for it in catalog.bundled_catalog("cn-north-1")}
    assert any("cn-northwest-1" in r.getMessage() and "cn-north-1 prices" in r.getMessage() for r in caplog.records)
    assert pricing.ebs_prices("cn-northwest-1") == pricing.ebs_prices("cn-north-1")
