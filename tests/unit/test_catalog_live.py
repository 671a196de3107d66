"""The live catalog against moto's EC2 (in process): same instance types as the bundled data, and
price fallbacks because moto has no Price List API and answers 0.00001 for every spot price."""

from __future__ import annotations

import logging
import time

import boto3
import moto
import pytest
from botocore.exceptions import EndpointConnectionError

from nodescale.aws import catalog, pricing

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter


def _client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")


@pytest.fixture(scope="module")
def live():
    # One DescribeInstanceTypes over moto takes several seconds: share it.
    pricing._warned.clear()
    handler = _Collect()
    logging.getLogger("nodescale").addHandler(handler)
    try:
        with moto.mock_aws():
            types = catalog.live_catalog(_client("ec2"), "us-east-1", pricing_client=_client("pricing"))
    finally:
        logging.getLogger("nodescale").removeHandler(handler)
    return {it.name: it for it in types}, handler.messages


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_same_labels_and_capacity_as_bundled(live):
    types, _ = live
    bundled = {it.name: it for it in catalog.bundled_catalog("us-east-1")}
    common = set(types) & set(bundled)
    assert len(common) > 1300
    for name in common:
        assert types[name].labels == bundled[name].labels, name
        assert types[name].capacity == bundled[name].capacity, name
        assert {(o.zone, o.capacity_type) for o in types[name].offerings} == {
            (o.zone, o.capacity_type) for o in bundled[name].offerings
        }, name


def test_prices_fall_back_to_the_table_and_the_estimate(live):
    types, messages = live
    m5 = types["m5.large"]
    assert {o.price for o in m5.offerings if o.capacity_type == "on-demand"} == {0.096}
    spot = [o.price for o in m5.offerings if o.capacity_type == "spot"]
    assert spot == [pytest.approx(0.096 * pricing.SPOT_ESTIMATE_FRACTION)] * len(m5.offerings[::2])
    assert any("Price List API unavailable" in m for m in messages)
    assert any("spot price history had no usable prices" in m for m in messages)


class _Unreachable:
    """An EC2 client in a private subnet without endpoints: every call fails to connect."""

    def get_paginator(self, name):
        raise EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com")


def test_unreachable_ec2_falls_back_to_bundled(caplog, monkeypatch):
    monkeypatch.setattr(pricing, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="nodescale"):
        types = catalog.live_catalog(_Unreachable(), "us-west-2")
    bundled = catalog.bundled_catalog("us-west-2")
    assert [t.name for t in types] == [t.name for t in bundled]
    assert [t.offerings for t in types] == [t.offerings for t in bundled]
    text = caplog.text
    assert "DescribeInstanceTypes failed in us-west-2" in text
    assert "DescribeInstanceTypeOfferings failed" in text


def test_live_catalog_marks_unavailable(monkeypatch):
    monkeypatch.setattr(pricing, "_warned", set())
    unavailable = {("c5.large", "us-west-2a", "on-demand"): time.time() + 60}
    types = catalog.live_catalog(_Unreachable(), "us-west-2", unavailable=unavailable)
    c5 = next(t for t in types if t.name == "c5.large")
    assert [
        o.available for o in c5.offerings if o.zone == "us-west-2a" and o.capacity_type == "on-demand"
    ] == [False]
    assert all(o.available for o in c5.offerings if o.zone != "us-west-2a")
