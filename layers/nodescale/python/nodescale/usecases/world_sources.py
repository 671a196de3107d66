"""Where a world's cloud-side facts come from: the region's instance types (EC2, else the bundled data, kept
for a while per container), the zonal shifts in force, and each node class's capacity reservations."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import clock
from ..aws import capacityreservations, zonalshifts
from ..aws import catalog as catalogs
from ..model.capacityreservation import CapacityReservation
from ..model.instancetype import InstanceType
from ..model.nodepool import NodeClass
from ..model.zonalshift import ActiveShift

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger(__name__)

# The live catalog costs several EC2 calls; a warm Lambda container reuses it for this long.
CATALOG_TTL_SECONDS = 900.0
_CATALOG_LOCK = threading.Lock()
_CATALOG: dict[str, tuple[float, list[InstanceType]]] = {}


def read_shifts(rt: Runtime, types: list[InstanceType]) -> dict[str, ActiveShift]:
    """The zonal shifts in force for the zones the catalog knows by id (DescribeAvailabilityZones): one
    BatchGetItem. Without zone ids (DescribeAvailabilityZones failed) no shift can be mapped to a zone name."""
    zone_ids = {o.zone_id for it in types for o in it.offerings if o.zone_id}
    if not zone_ids:
        return {}
    shifts = zonalshifts.active(rt.aws.dynamodb, rt.settings.table_name, zone_ids, clock.epoch())
    if shifts:
        log.info("zones under a zonal shift: no launches there", extra={"zone_ids": sorted(shifts)})
    return shifts


def read_reservations(ec2: Any, classes: Iterable[NodeClass], now: datetime) -> dict[str, list[CapacityReservation]]:
    """The capacity reservations each node class selects (only classes with capacityReservationSelectorTerms
    ask EC2; classes with the same terms ask once)."""
    out: dict[str, list[CapacityReservation]] = {}
    asked: dict[tuple, list[CapacityReservation]] = {}
    for nc in classes:
        terms = nc.capacity_reservation_selector_terms
        if not terms:
            continue
        key = tuple((t.id, tuple(sorted(t.tags.items())), t.owner_id, t.instance_match_criteria) for t in terms)
        if key not in asked:
            asked[key] = capacityreservations.discover(ec2, terms, now)
        out[nc.name] = asked[key]
    return out


def catalog(rt: Runtime) -> list[InstanceType]:
    """The region's instance types from EC2 (each part EC2 cannot give from the bundled data), kept
    for a while per process; the bundled catalog when EC2 answers nothing usable."""
    region = rt.settings.region
    now = time.monotonic()
    with _CATALOG_LOCK:
        cached = _CATALOG.get(region)
        if cached is not None and now - cached[0] < CATALOG_TTL_SECONDS:
            return cached[1]
    try:
        types = catalogs.live_catalog(rt.aws.ec2, region)
    except catalogs.CatalogError as exc:
        log.warning("live catalog unusable; using the bundled one", extra={"reason": str(exc)})
        types = []
    if not types:
        types = catalogs.bundled_catalog(region)
    with _CATALOG_LOCK:
        _CATALOG[region] = (now, types)
    return types
