"""On-demand capacity reservations beside moto, which has none: installed into the moto child process.

The EC2 API (as the EC2 API Reference and User Guide describe it, "Capacity Reservations"):
- `CreateCapacityReservation` (InstanceType, AvailabilityZone, InstanceCount, InstanceMatchCriteria
  open | targeted, EndDateType unlimited | limited with EndDate, TagSpecifications) -> `cr-...`, active;
- `DescribeCapacityReservations` with CapacityReservationIds (an unknown id is
  `InvalidCapacityReservationId.NotFound`) and the filters `state`, `owner-id`, `instance-type`,
  `availability-zone`, `instance-match-criteria`, `reservation-type`, `tag:<key>`, `tag-key`, paged by
  MaxResults/NextToken; a limited reservation past its EndDate is `expired`;
- `CancelCapacityReservation`: `cancelled`, its instances run on as plain on-demand instances.
- Launches: CreateFleet (from a launch template whose CapacityReservationSpecification targets one) and
  RunInstances (the same, or its own CapacityReservationSpecification) launch into the reservation:
  the instance type and zone must be the reservation's, and it must be active with room, else
  `ReservationCapacityExceeded` (CreateFleet: an entry in `Errors` per override, 200; RunInstances: the
  error). Each instance launched takes one from AvailableInstanceCount and names the reservation
  (DescribeInstances `CapacityReservationId`); terminating it gives it back. An on-demand launch whose
  template's preference is not `none` fills an `open` reservation of its type and zone, as EC2 does.
- Capacity blocks cannot be bought through this API (PurchaseCapacityBlock sells AWS's offerings); a
  test makes one with `POST /sim/v1/capacity-block` {"instanceType", "availabilityZone",
  "instanceCount", "endDate" (ISO 8601), "tags"}: reservationType `capacity-block`, targeted, with its
  end date; launches into it need `InstanceMarketOptions.MarketType: capacity-block`, and its instances
  have InstanceLifecycle `capacity-block`.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sim.aws.constants import REGION

ACCOUNT = "123456789012"
FULL = "ReservationCapacityExceeded"
_LOCK = threading.Lock()
_FILTERS = ("state", "owner-id", "instance-type", "availability-zone", "instance-match-criteria",
            "reservation-type", "capacity-reservation-id", "tenancy", "instance-platform")


@dataclass
class Reservation:
    id: str
    instance_type: str
    zone: str
    total: int
    match: str = "open"
    kind: str = "default"
    end: datetime | None = None
    state: str = "active"
    owner: str = ACCOUNT
    tags: dict[str, str] = field(default_factory=dict)
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    instances: set[str] = field(default_factory=set)

    @property
    def available(self) -> int:
        return max(0, self.total - len(self.instances)) if self.state == "active" else 0

    def refresh(self, now: datetime) -> None:
        if self.state == "active" and self.end is not None and self.end <= now:
            self.state = "expired"
            self.instances.clear()  # EC2 reclaims a capacity block's instances; others run on as on-demand

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "CapacityReservationId": self.id,
            "OwnerId": self.owner,
            "CapacityReservationArn": f"arn:aws:ec2:{REGION}:{self.owner}:capacity-reservation/{self.id}",
            "InstanceType": self.instance_type,
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": self.zone,
            "Tenancy": "default",
            "TotalInstanceCount": self.total,
            "AvailableInstanceCount": self.available,
            "EbsOptimized": False,
            "EphemeralStorage": False,
            "State": self.state,
            "StartDate": self.created,
            "EndDateType": "limited" if self.end is not None else "unlimited",
            "InstanceMatchCriteria": self.match,
            "CreateDate": self.created,
            "Tags": [{"Key": k, "Value": v} for k, v in sorted(self.tags.items())],
            "ReservationType": self.kind,
        }
        if self.end is not None:
            out["EndDate"] = self.end
        return out


def _store(backend: Any) -> dict[str, Reservation]:
    store = getattr(backend, "sim_capacity_reservations", None)
    if store is None:
        store = backend.sim_capacity_reservations = {}
    now = datetime.now(UTC)
    for r in store.values():
        r.refresh(now)
    return store


def _error(code: str, message: str) -> Exception:
    from moto.ec2.exceptions import EC2ClientError

    return EC2ClientError(code, message)


def _date(value: Any, name: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise _error("InvalidParameterValue", f"{name} {value!r} is not an ISO 8601 date") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def create(backend: Any, instance_type: str, zone: str, count: int, match: str = "open", end: datetime | None = None,
           tags: dict[str, str] | None = None, kind: str = "default") -> Reservation:
    """A new active reservation (checked as EC2 checks CreateCapacityReservation)."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    if instance_type not in INSTANCE_TYPES:
        raise _error("InvalidParameterValue", f"The instance type '{instance_type}' is not supported.")
    zones = {z.name for z in backend.describe_availability_zones()}
    if zone not in zones:
        raise _error("InvalidParameterValue", f"Invalid availability zone: [{zone}]")
    if count < 1:
        raise _error("InvalidParameterValue", "InstanceCount must be at least 1")
    if match not in ("open", "targeted"):
        raise _error("InvalidParameterValue", f"InstanceMatchCriteria {match!r}: allowed are open, targeted")
    if end is not None and end <= datetime.now(UTC):
        raise _error("InvalidParameterValue", "EndDate must be in the future")
    with _LOCK:
        r = Reservation(f"cr-{secrets.token_hex(8)}", instance_type, zone,
                        count, match, kind, end, tags=dict(tags or {}))
        _store(backend)[r.id] = r
    return r


def _matches(r: Reservation, name: str, values: list[str]) -> bool:
    if name.startswith("tag:"):
        return r.tags.get(name[4:]) in values
    if name == "tag-key":
        return any(k in r.tags for k in values)
    field_value = {
        "state": r.state, "owner-id": r.owner, "instance-type": r.instance_type, "availability-zone": r.zone,
        "instance-match-criteria": r.match, "reservation-type": r.kind, "capacity-reservation-id": r.id,
        "tenancy": "default", "instance-platform": "Linux/UNIX",
    }[name]
    return field_value in values


def describe(backend: Any, ids: list[str], filters: list[dict[str, Any]]) -> list[Reservation]:
    store = _store(backend)
    for f in filters:
        name = f.get("Name", "")
        if name not in _FILTERS and not name.startswith("tag:") and name != "tag-key":
            raise _error("InvalidParameterValue", f"The filter '{name}' is invalid")
    missing = [i for i in ids if i not in store]
    if missing:
        raise _error("InvalidCapacityReservationId.NotFound",
                     f"The capacity reservation ID '{missing[0]}' does not exist")
    chosen = [store[i] for i in ids] if ids else sorted(store.values(), key=lambda r: r.id)
    return [r for r in chosen if all(_matches(r, f["Name"], list(f.get("Value") or f.get("Values") or []))
                                     for f in filters)]


# ---------------------------------------------------------------------------------------------- launches


def _template_data(backend: Any, spec: dict[str, Any]) -> dict[str, Any]:
    try:
        if spec.get("LaunchTemplateId"):
            template = backend.get_launch_template(template_id=spec["LaunchTemplateId"])
        elif spec.get("LaunchTemplateName"):
            template = backend.get_launch_template_by_name(name=spec["LaunchTemplateName"])
        else:
            return {}
    except Exception:  # moto answers for a missing template itself
        return {}
    version = spec.get("Version") or "$Default"
    version = {"$Latest": template.latest_version_number, "$Default": template.default_version_number}.get(
        version, version)
    return template.get_version(version).data or {}


def _target(data: dict[str, Any]) -> str | None:
    spec = data.get("CapacityReservationSpecification") or {}
    return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")


def _preference(data: dict[str, Any]) -> str:
    return (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationPreference") or "open"


def _check(r: Reservation | None, rid: str, instance_type: str, zone: str, market: str | None) -> str | None:
    """Why the launch cannot go into the reservation (an error code and message), or None."""
    if r is None or r.state != "active":
        return f"InvalidCapacityReservationId.NotFound: the capacity reservation {rid} is not active"
    if r.instance_type != instance_type or r.zone != zone:
        return (f"InvalidParameterCombination: the capacity reservation {rid} is for {r.instance_type} in {r.zone}, "
                f"not {instance_type} in {zone}")
    if r.kind == "capacity-block" and market != "capacity-block":
        return f"InvalidParameterCombination: launching into capacity block {rid} needs MarketType capacity-block"
    if r.available <= 0:
        return f"{FULL}: the capacity reservation {rid} has no available capacity"
    return None


def _zone_of(backend: Any, subnet_id: str | None, fallback: str | None) -> str:
    if subnet_id:
        try:
            return str(backend.get_subnet(subnet_id).availability_zone)
        except Exception:
            return fallback or ""
    return fallback or ""


def _mark(backend: Any, r: Reservation, instance_ids: list[str]) -> None:
    for iid in instance_ids:
        instance = backend.get_instance(iid)
        instance.capacity_reservation_id = r.id
        instance.capacity_reservation_specification = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": r.id},
        }
        if r.kind == "capacity-block":
            instance.lifecycle = "capacity-block"
        r.instances.add(iid)


def _fill_open(backend: Any, store: dict[str, Reservation], instances: list[Any]) -> None:
    """On-demand instances whose template leaves them open fill a matching open reservation, as on EC2."""
    for instance in instances:
        if getattr(instance, "capacity_reservation_id", None) or instance.lifecycle == "spot":
            continue
        for r in sorted(store.values(), key=lambda r: r.id):
            if (r.match == "open" and r.kind == "default" and r.available > 0
                    and r.instance_type == instance.instance_type and r.zone == instance.placement.zone):
                _mark(backend, r, [instance.id])
                break


def _fleet_create(response: Any, configs: list[dict[str, Any]], target: dict[str, Any], capacity: int) -> Any:
    """moto's own CreateFleet for these configs and this much on-demand capacity."""
    backend = response.ec2_backend
    return backend.create_fleet(
        on_demand_options=response._get_param("OnDemandOptions", {}),
        spot_options=response._get_param("SpotOptions", {}),
        target_capacity_specification={**target, "TotalTargetCapacity": capacity, "OnDemandTargetCapacity": capacity,
                                       "SpotTargetCapacity": 0, "DefaultTargetCapacityType": "on-demand"},
        launch_template_configs=configs,
        excess_capacity_termination_policy=response._get_param("ExcessCapacityTerminationPolicy"),
        replace_unhealthy_instances=response._get_param("ReplaceUnhealthyInstances"),
        terminate_instances_with_expiration=response._get_param("TerminateInstancesWithExpiration", if_none=True),
        fleet_type=response._get_param("Type", if_none="maintain"),
        valid_from=response._get_param("ValidFrom"),
        valid_until=response._get_param("ValidUntil"),
        tag_specifications=response._get_param("TagSpecifications", []),
    )


def _install_fleet() -> None:
    from moto.core.responses import ActionResult
    from moto.ec2.responses import EC2Response

    original = EC2Response.create_fleet

    def create_fleet(self: Any) -> Any:
        backend = self.ec2_backend
        configs = self._get_param("LaunchTemplateConfigs", [])
        datas = [_template_data(backend, c.get("LaunchTemplateSpecification") or {}) for c in configs]
        targeted = [(c, d, _target(d)) for c, d in zip(configs, datas, strict=True) if _target(d)]
        with _LOCK:
            store = _store(backend)
            if not targeted:
                result = original(self)
                ids = [i for item in (result.result.get("Instances") or []) for i in item.get("InstanceIds") or []]
                if any(_preference(d) != "none" for d in datas):
                    _fill_open(backend, store, [backend.get_instance(i) for i in ids])
                return result
            self.error_on_dryrun()
            target = self._get_param("TargetCapacitySpecification", {})
            wanted = int(target.get("TotalTargetCapacity") or 0)
            rows = []  # (priority, config, override, reservation id, market)
            for config, data, rid in targeted:
                market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
                for override in config.get("Overrides") or [{}]:
                    rows.append((float(override.get("Priority", 0) or 0), config, override, rid, market, data))
            rows.sort(key=lambda row: row[0])
            instances: list[dict[str, Any]] = []
            errors: list[dict[str, Any]] = []
            fleet_id = None
            for _, config, override, rid, market, data in rows:
                left = wanted - sum(len(i["InstanceIds"]) for i in instances)
                itype = override.get("InstanceType") or data.get("InstanceType") or ""
                zone = _zone_of(backend, override.get("SubnetId"), override.get("AvailabilityZone"))
                spec = {"LaunchTemplateAndOverrides": {
                    "LaunchTemplateSpecification": config.get("LaunchTemplateSpecification") or {},
                    "Overrides": {**override, "AvailabilityZone": zone}}, "Lifecycle": "on-demand"}
                if left <= 0:
                    break
                r = store.get(rid)
                why = _check(r, rid, itype, zone, market)
                if why is not None:
                    code, _, message = why.partition(": ")
                    errors.append({**spec, "ErrorCode": code, "ErrorMessage": message})
                    continue
                assert r is not None
                count = min(left, r.available)
                one = dict(config, Overrides=[override])
                fleet = _fleet_create(self, [one], target, count)
                fleet_id = fleet_id or fleet.id
                launched = fleet.instances or []
                _mark(backend, r, [i for item in launched for i in item["InstanceIds"]])
                instances.extend(launched)
                if count < left:  # the reservation ran out before the request was met
                    errors.append({**spec, "ErrorCode": FULL,
                                   "ErrorMessage": f"the capacity reservation {rid} has no more available capacity"})
            result: dict[str, Any] = {"FleetId": fleet_id or f"fleet-{secrets.token_hex(8)}", "Instances": instances}
            if errors:
                result["Errors"] = errors
            return ActionResult(result)

    EC2Response.create_fleet = create_fleet  # type: ignore[method-assign]


def _install_run_instances() -> None:
    from moto.ec2.responses import EC2Response

    original = EC2Response.run_instances

    def run_instances(self: Any) -> Any:
        backend = self.ec2_backend
        data = _template_data(backend, self._get_param("LaunchTemplate", {}) or {})
        own = self._get_param("CapacityReservationSpecification", {}) or {}
        rid = ((own.get("CapacityReservationTarget") or {}).get("CapacityReservationId")) or _target(data)
        preference = own.get("CapacityReservationPreference") or _preference(data)
        with _LOCK:
            store = _store(backend)
            count = int(self._get_param("MaxCount", if_none="1"))
            r = None
            if rid:
                r = store.get(rid)
                itype = self._get_param("InstanceType") or data.get("InstanceType") or "m1.small"
                zone = _zone_of(backend, self._get_param("SubnetId"), self._get_param("Placement.AvailabilityZone"))
                market = self._get_param("InstanceMarketOptions.MarketType") or (
                    data.get("InstanceMarketOptions") or {}).get("MarketType")
                why = _check(r, rid, itype, zone, market)
                if why is None and r is not None and r.available < int(self._get_param("MinCount", if_none="1")):
                    why = f"{FULL}: the capacity reservation {rid} has {r.available} instances available"
                if why is not None:
                    code, _, message = why.partition(": ")
                    raise _error(code, message)
            result = original(self)
            made = result.result  # moto's Reservation of the new instances
            ids = [i.id for i in getattr(made, "instances", None) or []]
            if r is not None:
                _mark(backend, r, ids[: min(count, r.available)])
            elif preference != "none":
                _fill_open(backend, store, [backend.get_instance(i) for i in ids])
            return result

    EC2Response.run_instances = run_instances  # type: ignore[method-assign]


def _install_terminate() -> None:
    from moto.ec2.models.instances import Instance

    original = Instance.terminate

    def terminate(self: Any, *args: Any, **kwargs: Any) -> Any:
        rid = getattr(self, "capacity_reservation_id", None)
        out = original(self, *args, **kwargs)
        if rid:
            with _LOCK:
                r = getattr(self.ec2_backend, "sim_capacity_reservations", {}).get(rid)
                if r is not None:
                    r.instances.discard(self.id)
        return out

    Instance.terminate = terminate  # type: ignore[method-assign]


# ------------------------------------------------------------------------------------------------ the API


def _install_api() -> None:
    from moto.core.responses import ActionResult
    from moto.ec2.responses import EC2Response

    def create_capacity_reservation(self: Any) -> Any:
        end_type = self._get_param("EndDateType") or "unlimited"
        end = self._get_param("EndDate")
        if end_type not in ("unlimited", "limited"):
            raise _error("InvalidParameterValue", f"EndDateType {end_type!r}: allowed are unlimited, limited")
        if (end_type == "limited") != (end is not None):
            raise _error("InvalidParameterCombination", "EndDate is required with EndDateType limited, and only then")
        tags = {k: v for spec in self._get_param("TagSpecifications", []) or []
                if spec.get("ResourceType") == "capacity-reservation"
                for k, v in ((t["Key"], t.get("Value", "")) for t in spec.get("Tags") or spec.get("Tag") or [])}
        self.error_on_dryrun()
        r = create(self.ec2_backend, self._get_param("InstanceType") or "",
                   self._get_param("AvailabilityZone") or "", int(self._get_param("InstanceCount") or 0),
                   self._get_param("InstanceMatchCriteria") or "open", _date(end, "EndDate") if end else None, tags)
        return ActionResult({"CapacityReservation": r.to_api()})

    def describe_capacity_reservations(self: Any) -> Any:
        ids = self._get_param("CapacityReservationIds", []) or []
        filters = self._get_param("Filters", []) or []
        found = describe(self.ec2_backend, ids, filters)
        size = int(self._get_param("MaxResults") or 1000)
        start = int(self._get_param("NextToken") or 0)
        page = found[start : start + size]
        result: dict[str, Any] = {"CapacityReservations": [r.to_api() for r in page]}
        if start + size < len(found):
            result["NextToken"] = str(start + size)
        return ActionResult(result)

    def cancel_capacity_reservation(self: Any) -> Any:
        rid = self._get_param("CapacityReservationId") or ""
        store = _store(self.ec2_backend)
        r = store.get(rid)
        if r is None:
            raise _error("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{rid}' does not exist")
        if r.state != "active":
            raise _error("InvalidCapacityReservationId.NotFound", f"The capacity reservation {rid} is {r.state}")
        if r.kind == "capacity-block":
            raise _error("UnsupportedOperation", "a capacity block cannot be cancelled")
        self.error_on_dryrun()
        with _LOCK:
            r.state = "cancelled"
            r.instances.clear()  # they run on, as on-demand instances outside any reservation
        return ActionResult({"Return": True})

    EC2Response.create_capacity_reservation = create_capacity_reservation  # type: ignore[attr-defined]
    EC2Response.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]
    EC2Response.cancel_capacity_reservation = cancel_capacity_reservation  # type: ignore[attr-defined]


def create_capacity_block(body: dict[str, Any]) -> dict[str, Any]:
    """The control endpoint's capacity block, in every EC2 backend of the region (one account in sim)."""
    from moto.ec2.models import ec2_backends

    itype, zone = body.get("instanceType"), body.get("availabilityZone")
    count, end = body.get("instanceCount", 1), body.get("endDate")
    tags = body.get("tags") or {}
    if not isinstance(itype, str) or not isinstance(zone, str) or not isinstance(end, str) or not isinstance(tags, dict):
        raise ValueError("body must be {'instanceType', 'availabilityZone', 'instanceCount', 'endDate', 'tags'}")
    backend = ec2_backends[ACCOUNT][REGION]
    r = create(backend, itype, zone, int(count), "targeted", _date(end, "endDate"), tags, kind="capacity-block")
    return {"capacityReservationId": r.id}


_INSTALLED = itertools.count()


def install() -> None:
    """Add the API and the launch and termination hooks to moto (once per process)."""
    if next(_INSTALLED):
        return
    _install_api()
    _install_fleet()
    _install_run_instances()
    _install_terminate()
