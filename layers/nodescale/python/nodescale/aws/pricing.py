"""Hourly prices for instance types: live from AWS when reachable, else the bundled public table.

- On-demand: the Price List API (GetProducts) when a client is given and answers; otherwise the
  bundled table ``data/ec2-on-demand-prices.json`` (its "source" line says where and when it was taken),
  which covers us-east-1, GovCloud and cn-north-1 (in CNY); other regions borrow us-east-1's prices,
  cn-northwest-1 cn-north-1's (the table has no Ningxia prices).
- Spot: DescribeSpotPriceHistory, the latest price per type and zone; offline, an estimate of
  ``SPOT_ESTIMATE_FRACTION`` of the on-demand price (spot has long averaged 60-70 % below on-demand;
  0.4 keeps spot preferred where a NodePool allows both, without pretending to know the zone's market).
- Windows: license-included prices, for node classes whose AMI family is Windows. On-demand from the
  Price List API (operatingSystem Windows) when it answers, else the Linux price plus the table's
  per-vCPU license charge (its "windowsLicense" entry names AWS's page); spot from the Windows product
  descriptions of DescribeSpotPriceHistory, else the Linux spot price plus the license (spot discounts
  the compute, not the license). The China regions have no published rate: there Windows is priced as
  Linux, logged once.
- EBS volumes: the bundled per-GB-month table ``data/ebs-volume-prices.json`` (``ebs_prices``); a region
  it lacks borrows us-east-1's prices (cn-north-1's in China), logged once.
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

from ..model.currency import CNY, currency_of

log = logging.getLogger(__name__)

PRICE_FLOOR = 0.0005
SPOT_ESTIMATE_FRACTION = 0.4
PRICES_FILE = "ec2-on-demand-prices.json"
# Per-GB-month EBS prices by region and volume type; the file says its source and date.
EBS_PRICES_FILE = "ebs-volume-prices.json"
# The Price List API is served from these regions only; us-east-1 answers for every region but China.
PRICING_API_REGIONS = ("us-east-1", "ap-south-1")
LINUX = "linux"
WINDOWS = "windows"
# DescribeSpotPriceHistory's ProductDescriptions per operating system (EC2-Classic's and VPC's names).
SPOT_PRODUCTS = {LINUX: ("Linux/UNIX", "Linux/UNIX (Amazon VPC)"), WINDOWS: ("Windows", "Windows (Amazon VPC)")}
# The Price List API's operatingSystem attribute per operating system.
PRICE_LIST_OS = {LINUX: "Linux", WINDOWS: "Windows"}
# Whose bundled prices stand in for a region the table does not cover: us-east-1's, but in the China
# partition (priced in CNY) the other China region's, so a price never changes currency.
ESTIMATE_REGION = "us-east-1"
CHINA_ESTIMATE_REGION = "cn-north-1"

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


def estimate_region(region: str | None) -> str:
    """The region whose bundled prices stand in for one a table does not cover (same currency)."""
    return CHINA_ESTIMATE_REGION if currency_of(region) == CNY else ESTIMATE_REGION


def bundled_on_demand(region: str) -> dict[str, float]:
    """Bundled on-demand Linux prices per hour for a region.

    For a region the table does not cover, us-east-1's prices stand in (cn-north-1's for a China region;
    logged once): regional prices
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
            estimate_region(region),
        )
        prices = regions[estimate_region(region)]
    return {k: float(v) for k, v in prices.items() if float(v) >= PRICE_FLOOR}


@functools.cache
def _ebs_table() -> dict[str, Any]:
    return json.loads(read_data_file(EBS_PRICES_FILE))


def ebs_source() -> str:
    """Where the bundled EBS prices come from, and as of when."""
    return str(_ebs_table().get("source", ""))


def ebs_prices(region: str | None) -> dict[str, float]:
    """Per-GB-month prices by volume type for a region (us-east-1's, or cn-north-1's for a China region,
    where the table has none; logged once). ``model.nodecost.volumes_per_hour`` prices volumes with them."""
    regions = _ebs_table()["regions"]
    prices = regions.get(region or "")
    if prices is None:
        warn_once(
            f"no-ebs:{region}",
            "no bundled EBS prices for region %s; estimating from %s prices",
            region,
            estimate_region(region),
        )
        prices = regions[estimate_region(region)]
    return {k: float(v) for k, v in prices.items()}


def windows_license_source() -> str:
    """Where the bundled Windows license rate comes from."""
    return str((_bundled_table().get("windowsLicense") or {}).get("source", ""))


def windows_license_per_vcpu(region: str) -> float | None:
    """The Windows Server license charge per vCPU-hour in the region's currency; None where the table has
    no rate for that currency (the China regions), logged once."""
    currency = currency_of(region)
    rate = ((_bundled_table().get("windowsLicense") or {}).get("perVcpuHour") or {}).get(currency)
    if rate is None:
        warn_once(
            f"no-windows-license:{currency}",
            "no Windows license rate in %s for region %s; Windows nodes there are priced as Linux (%s)",
            currency,
            region,
            windows_license_source(),
        )
        return None
    return float(rate)


def with_windows_license(linux_price: float, vcpus: int, rate: float | None) -> float:
    """A Windows license-included price from the Linux one: the license is billed per vCPU-hour."""
    return linux_price if rate is None else round(linux_price + vcpus * rate, 6)


def spot_estimate(on_demand: float | None) -> float | None:
    return None if on_demand is None else round(on_demand * SPOT_ESTIMATE_FRACTION, 6)


def live_spot_prices(
    ec2_client: Any, instance_types: Iterable[str] | None = None, operating_system: str = LINUX
) -> dict[tuple[str, str], float]:
    """Latest spot price per (instance type, zone) for the operating system; prices below the floor are
    left out."""
    kwargs: dict[str, Any] = {
        "ProductDescriptions": list(SPOT_PRODUCTS[operating_system]),
        "StartTime": datetime.now(UTC),
    }
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


def _location_filters(region: str, operating_system: str = LINUX) -> list[dict[str, str]]:
    wanted = {
        "regionCode": region,
        "operatingSystem": PRICE_LIST_OS[operating_system],
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


def live_on_demand_prices(pricing_client: Any, region: str, operating_system: str = LINUX) -> dict[str, float]:
    """On-demand prices (license included) for a region and operating system from the Price List API
    (raises on any API error)."""
    prices: dict[str, float] = {}
    paginator = pricing_client.get_paginator("get_products")
    for page in paginator.paginate(
        ServiceCode="AmazonEC2", Filters=_location_filters(region, operating_system), FormatVersion="aws_v1"
    ):
        for item in page.get("PriceList") or []:
            parsed = parse_price_list_item(item)
            if parsed is not None:
                prices[parsed[0]] = parsed[1]
    return prices


def on_demand_prices(
    region: str,
    pricing_client: Any | None = None,
    operating_system: str = LINUX,
    fallback: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Live on-demand prices for the operating system when the API answers with some; ``fallback``
    (by default the bundled Linux table) otherwise, logged once per region and operating system."""
    table = dict(fallback) if fallback is not None else bundled_on_demand(region)
    what = f"{PRICE_LIST_OS[operating_system]} on-demand prices"
    instead = (
        f"bundled on-demand prices ({bundled_source()})"
        if operating_system == LINUX
        else f"Linux prices plus the bundled Windows license charge ({windows_license_source()})"
    )
    if pricing_client is None:
        warn_once(f"pricing-none:{region}:{operating_system}",
                  "no Price List API client for %s %s; using %s", region, what, instead)
        return table
    try:
        live = live_on_demand_prices(pricing_client, region, operating_system)
    except Exception as exc:  # any failure of an optional API means "use the table"
        warn_once(
            f"pricing-api:{region}:{operating_system}",
            "Price List API unavailable for %s %s (%s: %s); using %s",
            region,
            what,
            type(exc).__name__,
            exc,
            instead,
        )
        return table
    if not live:
        warn_once(f"pricing-empty:{region}:{operating_system}",
                  "Price List API returned no %s for %s; using %s", what, region, instead)
        return table
    # A type the API does not list (new, or filtered out) keeps its bundled price.
    return {**table, **live}


def live_windows_on_demand(region: str, pricing_client: Any | None) -> dict[str, float]:
    """Windows license-included on-demand prices from the Price List API, or {} (callers then add the
    bundled license charge to the Linux price) with the reason logged once."""
    return on_demand_prices(region, pricing_client, WINDOWS, fallback={})


def spot_prices(
    ec2_client: Any | None, instance_types: Iterable[str] | None = None, operating_system: str = LINUX
) -> dict[tuple[str, str], float]:
    """Live spot prices for the operating system, or {} (callers then estimate) with the reason logged once."""
    if ec2_client is None:
        return {}
    suffix = "" if operating_system == LINUX else f":{operating_system}"
    try:
        prices = live_spot_prices(ec2_client, instance_types, operating_system)
    except Exception as exc:  # spot history is optional; estimates stand in
        warn_once(
            "spot-api" + suffix,
            "%s spot price history unavailable (%s: %s); estimating spot prices",
            PRICE_LIST_OS[operating_system],
            type(exc).__name__,
            exc,
        )
        return {}
    if not prices:
        warn_once(
            "spot-empty" + suffix,
            "%s spot price history had no usable prices (all missing or below %s); estimating them",
            PRICE_LIST_OS[operating_system],
            PRICE_FLOOR,
        )
    return prices
