"""Hourly prices for instance types: live from AWS when reachable, else the bundled public table.

- On-demand: the Price List API (GetProducts) when a client is given and answers; otherwise the
  bundled table ``data/ec2-on-demand-prices.json`` (its "source" line says where and when it was taken),
  which covers us-east-1, GovCloud and cn-north-1 (in CNY); other regions borrow us-east-1's prices.
- Spot: DescribeSpotPriceHistory, the latest price per type and zone; offline, an estimate of
  ``SPOT_ESTIMATE_FRACTION`` of the on-demand price (spot has long averaged 60-70 % below on-demand;
  0.4 keeps spot preferred where a NodePool allows both, without pretending to know the zone's market).
- A price below ``PRICE_FLOOR`` is no price: moto answers 0.00001 for every spot price, and no real
  instance costs less than the floor, so such values are dropped and the fallback is used.

Every fallback is logged once per process and reason, so a Lambda's log says which prices it used.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib import resources as importlib_resources
from typing import Any

log = logging.getLogger(__name__)

PRICE_FLOOR = 0.0005
SPOT_ESTIMATE_FRACTION = 0.4
PRICES_FILE = "ec2-on-demand-prices.json"
# The Price List API is served from these regions only; us-east-1 answers for every region but China.
PRICING_API_REGIONS = ("us-east-1", "ap-south-1")
SPOT_PRODUCTS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
# Whose bundled prices stand in for a region the table does not cover.
ESTIMATE_REGION = "us-east-1"

_warned: set[str] = set()


def warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


def read_data_file(name: str) -> bytes:
    """Bytes of a file bundled in ``nodescale/data`` (gunzipped when its name ends in .gz)."""
    raw = importlib_resources.files("nodescale").joinpath("data", name).read_bytes()
    return gzip.decompress(raw) if name.endswith(".gz") else raw


@functools.cache
def _bundled_table() -> dict[str, Any]:
    return json.loads(read_data_file(PRICES_FILE))


def bundled_source() -> str:
    """Where the bundled on-demand prices come from, and as of when."""
    return str(_bundled_table().get("source", ""))


def bundled_regions() -> tuple[str, ...]:
    return tuple(sorted(_bundled_table()["regions"]))


def bundled_on_demand(region: str) -> dict[str, float]:
    """Bundled on-demand Linux prices per hour for a region.

    For a region the table does not cover, us-east-1's prices stand in (logged once): regional prices
    differ from us-east-1's by a roughly uniform margin, so the cheapest-first order mostly holds,
    which is what planning needs; live prices replace them wherever the Price List API answers.
    """
    regions = _bundled_table()["regions"]
    prices = regions.get(region)
    if prices is None:
        warn_once(
            f"no-bundled:{region}",
            "no bundled on-demand prices for region %s (the table has %s); estimating from %s prices",
            region,
            ", ".join(bundled_regions()),
            ESTIMATE_REGION,
        )
        prices = regions[ESTIMATE_REGION]
    return {k: float(v) for k, v in prices.items() if float(v) >= PRICE_FLOOR}


def spot_estimate(on_demand: float | None) -> float | None:
    return None if on_demand is None else round(on_demand * SPOT_ESTIMATE_FRACTION, 6)


def live_spot_prices(
    ec2_client: Any, instance_types: Iterable[str] | None = None
) -> dict[tuple[str, str], float]:
    """Latest Linux spot price per (instance type, zone); prices below the floor are left out."""
    kwargs: dict[str, Any] = {"ProductDescriptions": list(SPOT_PRODUCTS), "StartTime": datetime.now(UTC)}
    if instance_types is not None:
        kwargs["InstanceTypes"] = sorted(instance_types)
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for page in ec2_client.get_paginator("describe_spot_price_history").paginate(**kwargs):
        for item in page.get("SpotPriceHistory") or []:
            try:
                price = float(item["SpotPrice"])
                key = (item["InstanceType"], item["AvailabilityZone"])
            except (KeyError, TypeError, ValueError):
                continue
            if price < PRICE_FLOOR:
                continue
            stamp = item.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
            seen = latest.get(key)
            if seen is None or stamp > seen[0]:
                latest[key] = (stamp, price)
    return {k: v for k, (_, v) in latest.items()}


def _location_filters(region: str) -> list[dict[str, str]]:
    wanted = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "preInstalledSw": "NA",
        "tenancy": "Shared",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def parse_price_list_item(item: str | Mapping) -> tuple[str, float] | None:
    """(instance type, hourly on-demand price) from one GetProducts PriceList entry, or None."""
    product = json.loads(item) if isinstance(item, str) else item
    name = ((product.get("product") or {}).get("attributes") or {}).get("instanceType")
    if not name:
        return None
    for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            per_unit = dimension.get("pricePerUnit") or {}
            # China regions are priced in CNY; the price is only compared within its region.
            for currency in ("USD", "CNY"):
                if currency in per_unit:
                    try:
                        price = float(per_unit[currency])
                    except (TypeError, ValueError):
                        continue
                    if price >= PRICE_FLOOR:
                        return name, price
    return None


def live_on_demand_prices(pricing_client: Any, region: str) -> dict[str, float]:
    """On-demand Linux prices for a region from the Price List API (raises on any API error)."""
    prices: dict[str, float] = {}
    paginator = pricing_client.get_paginator("get_products")
    for page in paginator.paginate(
        ServiceCode="AmazonEC2", Filters=_location_filters(region), FormatVersion="aws_v1"
    ):
        for item in page.get("PriceList") or []:
            parsed = parse_price_list_item(item)
            if parsed is not None:
                prices[parsed[0]] = parsed[1]
    return prices


def on_demand_prices(region: str, pricing_client: Any | None = None) -> dict[str, float]:
    """Live on-demand prices when the API answers with some; the bundled table otherwise (logged once)."""
    if pricing_client is not None:
        try:
            live = live_on_demand_prices(pricing_client, region)
        except Exception as exc:  # any failure of an optional API means "use the table"
            warn_once(
                f"pricing-api:{region}",
                "Price List API unavailable for %s (%s: %s); using bundled on-demand prices (%s)",
                region,
                type(exc).__name__,
                exc,
                bundled_source(),
            )
        else:
            if live:
                bundled = bundled_on_demand(region)
                # A type the API does not list (new, or filtered out) keeps its bundled price.
                return {**bundled, **live}
            warn_once(
                f"pricing-empty:{region}",
                "Price List API returned no prices for %s; using bundled on-demand prices (%s)",
                region,
                bundled_source(),
            )
    else:
        warn_once(
            f"pricing-none:{region}",
            "no Price List API client for %s; using bundled on-demand prices (%s)",
            region,
            bundled_source(),
        )
    return bundled_on_demand(region)


def spot_prices(
    ec2_client: Any | None, instance_types: Iterable[str] | None = None
) -> dict[tuple[str, str], float]:
    """Live spot prices, or {} (callers then estimate from on-demand) with the reason logged once."""
    if ec2_client is None:
        return {}
    try:
        prices = live_spot_prices(ec2_client, instance_types)
    except Exception as exc:  # spot history is optional; estimates stand in
        warn_once(
            "spot-api",
            "spot price history unavailable (%s: %s); estimating spot prices",
            type(exc).__name__,
            exc,
        )
        return {}
    if not prices:
        warn_once(
            "spot-empty",
            "spot price history had no usable prices (all missing or below %s); estimating spot as %s x on-demand",
            PRICE_FLOOR,
            SPOT_ESTIMATE_FRACTION,
        )
    return prices
