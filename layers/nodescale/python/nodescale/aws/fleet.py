"""EC2 Fleet launches: one ``instant`` request per attempt, overrides cheapest first, capacity
errors mapped back to the offerings that failed, and an immediate retry on what remains.

Reserved capacity is tried first when the claim allows it: each reservation has its own launch template
(targeting it, ``TemplateChoice.reservation_id``), the request is an on-demand one (``capacity-block``
for a capacity block), and a full reservation answers ``ReservationCapacityExceeded``.

For each capacity type the pool allows (spot first: it is cheaper, and on-demand is the fallback)
the request holds one launch template config per launch template (an AMI/architecture), with an
override for each compatible instance type (the 60 cheapest) in each allowed subnet, Priority by
price. Spot uses ``price-capacity-optimized``, on-demand ``lowest-price``.

The ClientToken is a hash of the launch's identity (``LaunchRequest.key``, which the caller derives
from the planned node) and of the exact request, so a retry of the same launch (say, after the
previous invocation died mid-call) is answered by EC2 with the first request's instances.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..model import labels as wk
from ..model.instancetype import InstanceType
from . import tags as tagging
from .offerings import UnavailableOfferings
from .subnets import Subnet

log = logging.getLogger(__name__)

MAX_INSTANCE_TYPES = 60
# Errors that say "not this offering, not now": the offering is skipped for a while, the launch
# retried on the rest. Anything else (bad template, permissions) fails the launch as it is.
CAPACITY_ERRORS = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "UnfulfillableCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
        "Unsupported",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "ReservationCapacityExceeded",
    }
)
# Account-wide: every spot offering fails alike, so spot is abandoned for this launch.
SPOT_EXHAUSTED = frozenset({"MaxSpotInstanceCountExceeded"})
FLEET_TAGGED_RESOURCE_TYPES = ("instance", "volume", "fleet")
ALLOCATION = {wk.CAPACITY_SPOT: "price-capacity-optimized", wk.CAPACITY_ON_DEMAND: "lowest-price"}


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    """A launch template and the instance types it may launch (its AMI's architecture)."""

    launch_template: str
    instance_types: tuple[InstanceType, ...]
    reservation_id: str = ""  # the capacity reservation its template targets; "" for spot/on-demand


@dataclass(frozen=True)
class LaunchRequest:
    cluster: str
    nodepool: str
    nodeclass: str
    templates: tuple[TemplateChoice, ...]
    subnets: Mapping[str, Subnet]  # zone -> the subnet to use there; only allowed zones
    capacity_types: tuple[str, ...]  # what the pool allows; tried spot first
    # Identifies the planned node(s) (e.g. a hash of the pool and the pods' UIDs): the same key with
    # the same request gives the same ClientToken, a different key never does.
    key: str
    count: int = 1
    tags: Mapping[str, str] = field(default_factory=dict)  # the node class's tags
    config_hash: str | None = None  # the templates' settings hash, tagged on the instances for drift
    context: str | None = None  # the node class's EC2 Fleet "Context" (reserved capacity), passed through
    pool_tag: str = tagging.NODEPOOL  # the tag naming the pool: PROVISIONER for a v1alpha5 Provisioner

    @property
    def launch_id(self) -> str:
        pool = self.nodepool if self.pool_tag == tagging.NODEPOOL else f"{self.pool_tag}={self.nodepool}"
        return hashlib.sha256(f"{self.cluster}\0{pool}\0{self.key}".encode()).hexdigest()[:20]

    def instance_tags(self) -> dict[str, str]:
        tags = tagging.resource_tags(self.cluster, self.nodepool, self.nodeclass, self.tags, self.pool_tag)
        tags[tagging.LAUNCH] = self.launch_id
        if self.config_hash:
            tags[tagging.CONFIG_HASH] = self.config_hash
        return tags


@dataclass(frozen=True, slots=True)
class Override:
    launch_template: str
    instance_type: str
    zone: str
    subnet_id: str
    capacity_type: str
    price: float
    priority: float
    reservation_id: str = ""
    reservation_type: str = ""

    @property
    def offering(self) -> tuple[str, str, str]:
        return (self.instance_type, self.zone, self.capacity_type)


@dataclass(frozen=True, slots=True)
class LaunchedInstance:
    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    capacity_type: str
    price: float
    launch_template: str
    launch_id: str
    reservation_id: str = ""  # the capacity reservation it was launched into


@dataclass(frozen=True, slots=True)
class OfferingError:
    instance_type: str
    zone: str
    capacity_type: str
    code: str
    message: str = ""

    @property
    def offering(self) -> tuple[str, str, str]:
        return (self.instance_type, self.zone, self.capacity_type)

    @property
    def is_capacity_error(self) -> bool:
        return self.code in CAPACITY_ERRORS


@dataclass
class LaunchResult:
    instances: list[LaunchedInstance] = field(default_factory=list)
    offering_errors: list[OfferingError] = field(default_factory=list)
    # Failures of a whole request (code, message): a missing template, a permission, a bad parameter.
    request_errors: list[tuple[str, str]] = field(default_factory=list)
    client_tokens: list[str] = field(default_factory=list)
    requested: int = 0

    @property
    def unfulfilled(self) -> int:
        return max(0, self.requested - len(self.instances))

    def errors_by_code(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.offering_errors:
            counts[e.code] = counts.get(e.code, 0) + 1
        for code, _ in self.request_errors:
            counts[code] = counts.get(code, 0) + 1
        return counts


def capacity_order(allowed: Sequence[str]) -> tuple[str, ...]:
    """Reserved capacity first (paid for already), then spot, and on-demand as the fallback."""
    order = [c for c in (wk.CAPACITY_RESERVED, wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND) if c in allowed]
    return tuple(order)


def plan_overrides(
    request: LaunchRequest,
    capacity_type: str,
    unavailable: Mapping[tuple[str, str, str], float] | None = None,
) -> list[Override]:
    """Every usable (template, type, subnet) for one capacity type, cheapest first, 60 types at most."""
    unavailable = unavailable or {}
    reserved = capacity_type == wk.CAPACITY_RESERVED
    candidates: list[tuple[float, str, str, list[tuple[float, str, str, str]]]] = []
    seen: set[tuple[str, str]] = set()
    for choice in request.templates:
        if bool(choice.reservation_id) != reserved:
            continue  # a reservation's template launches into it only; the others never do
        for it in choice.instance_types:
            if (it.name, choice.reservation_id) in seen:  # a type launches with one template only
                continue
            zones = [
                (o.price, o.zone, o.reservation_id, o.reservation_type)
                for o in it.offerings
                if o.available
                and o.capacity_type == capacity_type
                and o.reservation_id == choice.reservation_id
                and o.zone in request.subnets
                and (it.name, o.zone, capacity_type) not in unavailable
            ]
            if zones:
                seen.add((it.name, choice.reservation_id))
                candidates.append((min(z[0] for z in zones), it.name, choice.launch_template, sorted(zones)))
    candidates.sort(key=lambda c: (c[0], c[1]))
    rows = []
    for _, name, template, zones in candidates[:MAX_INSTANCE_TYPES]:
        for price, zone, rid, rtype in zones:
            rows.append((price, name, zone, template, rid, rtype))
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[4]))
    return [
        Override(template, name, zone, request.subnets[zone].id, capacity_type, price, float(rank), rid, rtype)
        for rank, (price, name, zone, template, rid, rtype) in enumerate(rows)
    ]


def client_token(request: LaunchRequest, capacity_type: str, overrides: Sequence[Override], count: int) -> str:
    body = {
        "cluster": request.cluster,
        "nodepool": request.nodepool,
        "key": request.key,
        "capacityType": capacity_type,
        "count": count,
        "overrides": [[o.launch_template, o.instance_type, o.subnet_id] for o in overrides],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:64]


def fleet_request(request: LaunchRequest, capacity_type: str, overrides: Sequence[Override], count: int) -> dict:
    """The CreateFleet parameters for one attempt."""
    by_template: dict[str, list[dict]] = {}
    for o in overrides:
        by_template.setdefault(o.launch_template, []).append(
            {"InstanceType": o.instance_type, "SubnetId": o.subnet_id, "Priority": o.priority}
        )
    params: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": client_token(request, capacity_type, overrides, count),
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                "Overrides": items,
            }
            for name, items in by_template.items()
        ],
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": capacity_type,
        },
        # What an instant fleet's request can tag (EC2 API Reference, CreateFleet: fleet, instance; volumes
        # too, as Karpenter's requests do). Network interfaces are tagged by the launch template
        # (launchtemplates.LAUNCH_TAGGED_RESOURCE_TYPES): together every resource the functions' launch
        # policy requires the ownership tag on carries it.
        "TagSpecifications": tagging.specifications(FLEET_TAGGED_RESOURCE_TYPES, request.instance_tags()),
    }
    if request.context:
        params["Context"] = request.context
    if capacity_type == wk.CAPACITY_SPOT:
        params["TargetCapacitySpecification"]["SpotTargetCapacity"] = count
        params["SpotOptions"] = {"AllocationStrategy": ALLOCATION[wk.CAPACITY_SPOT]}
    elif capacity_type == wk.CAPACITY_RESERVED:
        # Reserved instances are on-demand instances launched into a reservation by their template's
        # target; a capacity block is its own capacity type (Karpenter's CreateFleet for reserved launches).
        block = any(o.reservation_type == "capacity-block" for o in overrides)
        params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] = "capacity-block" if block else "on-demand"
        params["TargetCapacitySpecification"]["OnDemandTargetCapacity"] = count
        params["OnDemandOptions"] = {"AllocationStrategy": ALLOCATION[wk.CAPACITY_ON_DEMAND]}
    else:
        params["TargetCapacitySpecification"]["OnDemandTargetCapacity"] = count
        params["OnDemandOptions"] = {"AllocationStrategy": ALLOCATION[wk.CAPACITY_ON_DEMAND]}
    return params


def parse_response(
    response: Mapping[str, Any], overrides: Sequence[Override], launch_id: str = ""
) -> tuple[list[LaunchedInstance], list[OfferingError], list[tuple[str, str]]]:
    """Instances launched, errors tied to an offering, and errors of the request as a whole."""
    by_key = {(o.instance_type, o.subnet_id, o.launch_template): o for o in overrides}
    by_type = {(o.instance_type, o.subnet_id): o for o in overrides}
    zone_of = {o.subnet_id: o.zone for o in overrides}
    default_ct = overrides[0].capacity_type if overrides else wk.CAPACITY_ON_DEMAND
    instances: list[LaunchedInstance] = []
    for item in response.get("Instances") or []:
        spec = item.get("LaunchTemplateAndOverrides") or {}
        ov = spec.get("Overrides") or {}
        itype = ov.get("InstanceType") or item.get("InstanceType", "")
        subnet = ov.get("SubnetId", "")
        template = (spec.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateName", "")
        planned = by_key.get((itype, subnet, template)) or by_type.get((itype, subnet))
        zone = ov.get("AvailabilityZone") or zone_of.get(subnet, "")
        # A reserved launch's instances are on-demand to EC2 (Lifecycle "on-demand"), reserved to us.
        ct = default_ct if default_ct == wk.CAPACITY_RESERVED else _capacity_type(item.get("Lifecycle"), default_ct)
        for iid in item.get("InstanceIds") or []:
            instances.append(
                LaunchedInstance(
                    iid,
                    itype,
                    zone,
                    subnet,
                    ct,
                    planned.price if planned is not None and planned.capacity_type == ct else 0.0,
                    template or (planned.launch_template if planned else ""),
                    launch_id,
                    planned.reservation_id if planned is not None else "",
                )
            )
    offering_errors: list[OfferingError] = []
    request_errors: list[tuple[str, str]] = []
    for err in response.get("Errors") or []:
        code = err.get("ErrorCode", "Unknown")
        message = err.get("ErrorMessage", "")
        ov = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        itype = ov.get("InstanceType")
        zone = ov.get("AvailabilityZone") or zone_of.get(ov.get("SubnetId", ""), "")
        if itype and zone:
            ct = default_ct if default_ct == wk.CAPACITY_RESERVED else _capacity_type(err.get("Lifecycle"), default_ct)
            offering_errors.append(OfferingError(itype, zone, ct, code, message))
        else:
            request_errors.append((code, message))
    return instances, offering_errors, request_errors


def _capacity_type(lifecycle: str | None, default: str) -> str:
    if lifecycle == "spot":
        return wk.CAPACITY_SPOT
    if lifecycle in ("on-demand", "normal", "scheduled"):
        return wk.CAPACITY_ON_DEMAND
    return default


def launch(
    ec2: Any,
    request: LaunchRequest,
    offerings: UnavailableOfferings,
    max_attempts_per_capacity_type: int = 4,
    fence: Callable[[], None] | None = None,
) -> LaunchResult:
    """Launch ``request.count`` instances, skipping unavailable offerings and retrying at once on
    what remains after each capacity error; reserved first, then spot, then on-demand, as the claim allows.

    ``fence`` is called right before each CreateFleet (the launch lease's check): whatever it raises
    stops the launch before that request is sent."""
    result = LaunchResult(requested=request.count)
    for capacity_type in capacity_order(request.capacity_types):
        for _ in range(max_attempts_per_capacity_type):
            remaining = request.count - len(result.instances)
            if remaining <= 0:
                return result
            overrides = plan_overrides(request, capacity_type, offerings.snapshot())
            if not overrides:
                break
            params = fleet_request(request, capacity_type, overrides, remaining)
            if fence is not None:
                fence()
            result.client_tokens.append(params["ClientToken"])
            try:
                response = ec2.create_fleet(**params)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                result.request_errors.append((error.get("Code", "Unknown"), error.get("Message", "")))
                log.warning(
                    "create_fleet failed",
                    extra={"nodepool": request.nodepool, "capacity_type": capacity_type, "code": error.get("Code")},
                )
                break
            instances, offering_errors, request_errors = parse_response(response, overrides, request.launch_id)
            result.instances.extend(instances)
            result.offering_errors.extend(offering_errors)
            result.request_errors.extend(request_errors)
            failed = [e for e in offering_errors if e.is_capacity_error]
            for code in sorted({e.code for e in failed}):
                offerings.mark({e.offering for e in failed if e.code == code}, code)
            if any(e.code in SPOT_EXHAUSTED for e in failed) and capacity_type == wk.CAPACITY_SPOT:
                offerings.mark({o.offering for o in overrides}, "MaxSpotInstanceCountExceeded")
                break
            if instances:
                continue  # partly fulfilled: ask again for the rest
            if not failed:
                break  # nothing launched and nothing to route around: retrying would fail alike
        if len(result.instances) >= request.count:
            break
    return result
