"""The EC2 instance-type catalog: bundled real data offline, EC2 and the Price List API at run time.

Public API:
- ``bundled_catalog(region)``: every type offered in the region, from the bundled recording and price
  table (cached per region; well under 0.1 s the first time).
- ``live_catalog(ec2_client, region, pricing_client=None, unavailable=None)``: from DescribeInstanceTypes,
  DescribeInstanceTypeOfferings and DescribeSpotPriceHistory (+ GetProducts); each piece that fails
  falls back to the bundled one, logged once per process.
- ``mark_unavailable(types, unavailable)``: offerings that recently failed with insufficient capacity
  come out ``available=False``.

Types that no Kubernetes node can run (Mac) are left out. Offerings without a price (a type missing
from the price table) are kept but unavailable, as Karpenter does: they cannot be compared on price.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import clock
from ..model import labels as wk
from ..model.catalog_facts import TypeFacts, facts_from_describe
from ..model.instancetype import InstanceType, Offering
from ..model.nodecapacity import capacity_and_overhead
from ..model.nodepool import KubeletSettings
from . import pricing
from .branchinterfaces import branch_interfaces

log = logging.getLogger(__name__)

BUNDLE_FILE = "instance-types.json.gz"
# category, optional "-<n>tb" (u-6tb1), generation; e.g. m5d -> m/5, inf2 -> inf/2, mac2-m2 -> mac/2.
_NAME_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.")

# (type, zone, capacity type) -> until when (epoch seconds) the offering is known to be out of capacity.
Unavailable = Mapping[tuple[str, str, str], float]


class CatalogError(ValueError):
    """A region the bundled catalog does not cover, or catalog data that cannot be used."""


# ---------------------------------------------------------------------------------------------- labels


def _kabob(value: str) -> str:
    return value.lower().replace(" ", "-")


def ec2_labels(facts: TypeFacts, region: str | None = None) -> dict[str, str]:
    """The labels Karpenter puts on a node of this type (without zone, capacity type and nodepool)."""
    name = facts.name
    labels = {
        wk.INSTANCE_TYPE: name,
        wk.ARCH: facts.kube_arch or "",
        wk.OS: "linux",
        wk.INSTANCE_CPU: str(facts.vcpu),
        wk.INSTANCE_MEMORY: str(facts.memory_mib),
        # Bare-metal types report no hypervisor; Karpenter still sets the label, to "".
        wk.INSTANCE_HYPERVISOR: facts.hypervisor,
        wk.INSTANCE_ENCRYPTION_IN_TRANSIT: "true" if facts.encryption_in_transit else "false",
        wk.INSTANCE_NITRO_ENCLAVES: "true" if facts.nitro_enclaves else "false",
        wk.INSTANCE_CAPABILITY_FLEX: "true" if "-flex" in name.split(".")[0] else "false",
        # Karpenter offers default and dedicated; nodescale launches default tenancy only, so its types
        # say so and a pod asking for dedicated hosts finds none rather than a shared one.
        wk.INSTANCE_TENANCY: "default",
    }
    if region:
        labels[wk.REGION] = region
    match = _NAME_SCHEME.match(name)
    if match:
        labels[wk.INSTANCE_CATEGORY] = match.group(1)
        labels[wk.INSTANCE_GENERATION] = match.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        labels[wk.INSTANCE_FAMILY] = parts[0]
        labels[wk.INSTANCE_SIZE] = parts[1]
    if facts.cpu_manufacturer:
        labels[wk.INSTANCE_CPU_MANUFACTURER] = _kabob(facts.cpu_manufacturer)
    if facts.cpu_sustained_mhz:
        labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(facts.cpu_sustained_mhz)
    if facts.gpu_name:
        labels[wk.INSTANCE_GPU_NAME] = _kabob(facts.gpu_name)
        labels[wk.INSTANCE_GPU_MANUFACTURER] = _kabob(facts.gpu_manufacturer)
        labels[wk.INSTANCE_GPU_COUNT] = str(facts.gpu_count)
        labels[wk.INSTANCE_GPU_MEMORY] = str(facts.gpu_memory_mib)
    if facts.local_nvme_gib:
        labels[wk.INSTANCE_LOCAL_NVME] = str(facts.local_nvme_gib)
    if facts.network_mbps:
        labels[wk.INSTANCE_NETWORK_BANDWIDTH] = str(facts.network_mbps)
    if facts.ebs_mbps:
        labels[wk.INSTANCE_EBS_BANDWIDTH] = str(facts.ebs_mbps)
    if facts.accelerator_name:
        labels[wk.INSTANCE_ACCELERATOR_NAME] = _kabob(facts.accelerator_name)
        labels[wk.INSTANCE_ACCELERATOR_MANUFACTURER] = _kabob(facts.accelerator_manufacturer)
        labels[wk.INSTANCE_ACCELERATOR_COUNT] = str(facts.accelerator_count)
    return labels


# -------------------------------------------------------------------------------------------- offerings


def _is_unavailable(unavailable: Unavailable | None, key: tuple[str, str, str], now: float) -> bool:
    if not unavailable:
        return False
    until = unavailable.get(key)
    return until is not None and until > now


def make_offerings(
    facts: TypeFacts,
    zones: Iterable[str],
    on_demand: Mapping[str, float],
    spot: Mapping[tuple[str, str], float],
    unavailable: Unavailable | None = None,
    now: float | None = None,
    zone_ids: Mapping[str, str] | None = None,
) -> tuple[Offering, ...]:
    """One offering per zone and capacity type the type supports, cheapest source of price first:
    the live spot price, else the spot estimate from on-demand; unpriced offerings are unavailable."""
    now = clock.epoch() if now is None else now
    od_price = on_demand.get(facts.name)
    out = []
    for zone in zones:
        for ctype in facts.usage_classes:
            if ctype == wk.CAPACITY_SPOT:
                price = spot.get((facts.name, zone))
                if price is None:
                    price = pricing.spot_estimate(od_price)
            else:
                price = od_price
            available = price is not None and not _is_unavailable(unavailable, (facts.name, zone, ctype), now)
            out.append(Offering(zone, ctype, price or 0.0, available, (zone_ids or {}).get(zone, "")))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class WindowsPricing:
    """What the region charges for Windows nodes: live license-included on-demand prices by type, live
    Windows spot prices by (type, zone), and the license per vCPU-hour that turns a Linux price into a
    Windows one where no live price is known (None: no rate known, Windows priced as Linux)."""

    on_demand: Mapping[str, float]
    spot: Mapping[tuple[str, str], float]
    license_per_vcpu: float | None


def offline_windows_pricing(region: str | None) -> WindowsPricing:
    """Windows prices from the Linux ones and the bundled license rate alone (no API)."""
    return WindowsPricing({}, {}, pricing.windows_license_per_vcpu(region or pricing.ESTIMATE_REGION))


def windows_prices(facts: TypeFacts, offerings: Iterable[Offering], windows: WindowsPricing) -> dict[tuple[str, str], float]:
    """The offerings' prices on a Windows AMI, by (zone, capacity type); {} for a type Windows cannot run.
    An unpriced offering stays unpriced."""
    if not facts.windows:
        return {}
    out: dict[tuple[str, str], float] = {}
    for o in offerings:
        if not o.price:
            continue
        if o.capacity_type == wk.CAPACITY_SPOT:
            live = windows.spot.get((facts.name, o.zone))
        else:
            live = windows.on_demand.get(facts.name)
        # Without a live price: the Linux one plus the license (spot discounts the compute, not the license).
        out[(o.zone, o.capacity_type)] = (
            live if live is not None else pricing.with_windows_license(o.price, facts.vcpu, windows.license_per_vcpu)
        )
    return out


def mark_unavailable(
    types: Sequence[InstanceType], unavailable: Unavailable | None, now: float | None = None
) -> list[InstanceType]:
    """Copies of the types whose offerings in ``unavailable`` (and not yet expired) are unavailable."""
    if not unavailable:
        return list(types)
    now = clock.epoch() if now is None else now
    live = {k for k, until in unavailable.items() if until > now}
    out = []
    for it in types:
        if not any((it.name, o.zone, o.capacity_type) in live for o in it.offerings):
            out.append(it)
            continue
        offerings = tuple(
            dataclasses.replace(o, available=False)
            if (it.name, o.zone, o.capacity_type) in live
            else o
            for o in it.offerings
        )
        out.append(it.copy(offerings=offerings))
    return out


def only_zones(types: Sequence[InstanceType], zones: frozenset[str]) -> list[InstanceType]:
    """Copies of the types whose offerings outside ``zones`` are unavailable. As Karpenter's AWS provider
    does with the zones of a node class's subnets: a type offered in a zone where the node class has no
    subnet cannot be launched there, and a zone spread must not count that zone as a domain to fill."""
    out = []
    for it in types:
        if all(o.zone in zones or not o.available for o in it.offerings):
            out.append(it)
            continue
        offerings = tuple(o if o.zone in zones else dataclasses.replace(o, available=False) for o in it.offerings)
        out.append(it.copy(offerings=offerings))
    return out


# ----------------------------------------------------------------------------------------- building


def build_instance_type(
    facts: TypeFacts,
    region: str | None,
    offerings: tuple[Offering, ...],
    kubelet: KubeletSettings | None = None,
    ephemeral_storage_bytes: int | None = None,
    ami_family: str | None = None,
    windows: WindowsPricing | None = None,
) -> InstanceType:
    capacity, overhead = capacity_and_overhead(
        facts, kubelet, ephemeral_storage_bytes, ami_family, branch_interfaces(facts.name)
    )
    if windows is None:
        windows = offline_windows_pricing(region)
    return InstanceType(
        name=facts.name,
        labels=ec2_labels(facts, region),
        capacity=capacity,
        overhead=overhead,
        offerings=offerings,
        operating_systems=frozenset({"linux", "windows"} if facts.windows else {"linux"}),
        facts=facts,
        windows_prices=windows_prices(facts, offerings, windows),
    )


def build_catalog(
    facts: Iterable[TypeFacts],
    region: str | None,
    zones_by_type: Mapping[str, Sequence[str]],
    on_demand: Mapping[str, float],
    spot: Mapping[tuple[str, str], float],
    unavailable: Unavailable | None = None,
    zone_ids: Mapping[str, str] | None = None,
    windows: WindowsPricing | None = None,
) -> list[InstanceType]:
    """Instance types for every type offered in at least one zone (Mac types excluded), by name.
    ``zone_ids`` (zone name -> zone id) gives each offering its zone id, where the account told it;
    ``windows`` the Windows prices (by default from the Linux ones and the bundled license rate)."""
    now = time.time()
    if windows is None:
        windows = offline_windows_pricing(region)
    out = []
    for f in facts:
        zones = zones_by_type.get(f.name)
        if not zones or f.kube_arch is None:
            continue
        out.append(
            build_instance_type(
                f, region, make_offerings(f, zones, on_demand, spot, unavailable, now, zone_ids), windows=windows
            )
        )
    out.sort(key=lambda it: it.name)
    return out


# ---------------------------------------------------------------------------------------- bundled data


@functools.cache
def _bundle() -> dict[str, Any]:
    data = json.loads(pricing.read_data_file(BUNDLE_FILE))
    if tuple(data.get("fields") or ()) != tuple(TypeFacts.__dataclass_fields__):
        raise CatalogError(
            f"nodescale/data/{BUNDLE_FILE} was built for other fields; rerun scripts/build_catalog.py"
        )
    return data


@functools.cache
def _bundled_facts() -> tuple[TypeFacts, ...]:
    return tuple(TypeFacts.from_row(row) for row in _bundle()["types"])


def bundled_regions() -> tuple[str, ...]:
    return tuple(sorted(_bundle()["regions"]))


def bundled_facts_by_name() -> dict[str, TypeFacts]:
    return {f.name: f for f in _bundled_facts()}


def bundled_zones(region: str) -> dict[str, list[str]]:
    """Zones offering each type in a region, from the bundled recording."""
    entry = _bundle()["regions"].get(region)
    if entry is None:
        raise CatalogError(
            f"region {region!r} is not in the bundled catalog; bundled regions are {', '.join(bundled_regions())}"
        )
    zones = entry["zones"]
    facts = _bundled_facts()
    out: dict[str, list[str]] = {}
    for index, mask in entry["offers"]:
        out[facts[index].name] = [z for bit, z in enumerate(zones) if mask >> bit & 1]
    return out


@functools.cache
def _bundled_catalog(region: str) -> tuple[InstanceType, ...]:
    zones = bundled_zones(region)
    on_demand = pricing.bundled_on_demand(region)
    return tuple(build_catalog(_bundled_facts(), region, zones, on_demand, {}))


def bundled_catalog(region: str = "us-east-1", unavailable: Unavailable | None = None) -> list[InstanceType]:
    """The region's catalog from bundled data only: no network, prices from the bundled table, spot
    estimated. The instance types are shared between calls; use ``InstanceType.copy`` to change one."""
    return mark_unavailable(_bundled_catalog(region), unavailable)


# ------------------------------------------------------------------------------------------ live data


def pricing_api_region(region: str) -> str | None:
    """Where to call the Price List API for a region's prices; None where it cannot answer (China)."""
    if region.startswith("cn-"):
        return None
    return "ap-south-1" if region.startswith(("ap-", "me-", "af-", "il-")) else "us-east-1"


def describe_instance_types(ec2_client: Any) -> list[TypeFacts]:
    out = []
    for page in ec2_client.get_paginator("describe_instance_types").paginate():
        for info in page.get("InstanceTypes") or []:
            out.append(facts_from_describe(info))
    return out


def describe_zone_offerings(ec2_client: Any) -> dict[str, list[str]]:
    zones: dict[str, set[str]] = {}
    paginator = ec2_client.get_paginator("describe_instance_type_offerings")
    for page in paginator.paginate(LocationType="availability-zone"):
        for item in page.get("InstanceTypeOfferings") or []:
            zones.setdefault(item["InstanceType"], set()).add(item["Location"])
    return {k: sorted(v) for k, v in zones.items()}


def live_catalog(
    ec2_client: Any,
    region: str,
    pricing_client: Any | None = None,
    unavailable: Unavailable | None = None,
) -> list[InstanceType]:
    """The region's catalog from EC2 itself; each piece EC2 cannot give falls back to the bundled one."""
    try:
        facts = describe_instance_types(ec2_client)
    except Exception as exc:  # any API failure means "use the recording"
        pricing.warn_once(
            f"describe-types:{region}",
            "DescribeInstanceTypes failed in %s (%s: %s); using the bundled instance types",
            region,
            type(exc).__name__,
            exc,
        )
        facts = list(_bundled_facts())
    try:
        zones = describe_zone_offerings(ec2_client)
    except Exception as exc:  # likewise
        pricing.warn_once(
            f"describe-offerings:{region}",
            "DescribeInstanceTypeOfferings failed in %s (%s: %s); using the bundled offerings",
            region,
            type(exc).__name__,
            exc,
        )
        zones = bundled_zones(region)
    on_demand = pricing.on_demand_prices(region, pricing_client)
    spot = pricing.spot_prices(ec2_client)
    windows = WindowsPricing(
        pricing.live_windows_on_demand(region, pricing_client),
        pricing.spot_prices(ec2_client, operating_system=pricing.WINDOWS),
        pricing.windows_license_per_vcpu(region),
    )
    zone_ids = describe_zone_ids(ec2_client, region)
    return build_catalog(facts, region, zones, on_demand, spot, unavailable, zone_ids, windows)


def describe_zone_ids(ec2_client: Any, region: str) -> dict[str, str]:
    """Zone name -> zone id in this account (zone names map to physical zones per account; ids do not).
    Without it no offering has a zone id, so only pods that select topology.k8s.aws/zone-id go unplaced."""
    try:
        zones = ec2_client.describe_availability_zones()["AvailabilityZones"]
    except Exception as exc:  # any API failure: plan without zone ids rather than not at all
        pricing.warn_once(
            f"describe-zones:{region}",
            "DescribeAvailabilityZones failed in %s (%s: %s); offerings carry no zone id",
            region,
            type(exc).__name__,
            exc,
        )
        return {}
    return {z["ZoneName"]: z["ZoneId"] for z in zones if z.get("ZoneName") and z.get("ZoneId")}
