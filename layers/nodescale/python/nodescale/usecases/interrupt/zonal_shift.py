"""An ARC zonal shift event, recorded: launches keep out of (or come back to) its Availability Zone.

    handle_shift(rt, shift, detail_type) -> EventSummary

The interruption function receives the event (``entry.process``); this records it in the shared
table (``aws/zonalshifts``), where every function's next read of the world finds it and takes that
zone's offerings out of what it may launch (``world.read_world``). Nothing is drained here: the nodes
in the zone keep running (ARC moves traffic, not capacity); a NodePool may ask for them to be replaced
(``nodescale.io/zonal-shift: replace``, done by the disruption function).

A shift of a zone this region does not have, or a manual shift of another resource, is ignored with
its reason. Repeats and late deliveries do no harm: the record keeps the newest event per kind.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from ... import clock, telemetry
from ...aws import catalog as ec2_catalog
from ...aws import zonalshifts
from ...interruption.actions import zone_shift_ignored
from ...interruption.intents import Ignored, ZoneShift
from ...runtime import Runtime
from .summary import EventSummary, ZonalShiftRecord

log = logging.getLogger(__name__)

ZONAL_SHIFT_KIND = "ZonalShift"  # the Interruptions metric's Kind dimension for these events


def handle_shift(rt: Runtime, shift: ZoneShift, detail_type: str | None) -> EventSummary:
    """Record ``shift`` (or say why it is ignored); the summary the interruption function returns."""
    reason = zone_shift_ignored(shift, rt.cluster)
    # Zone id -> name from DescribeAvailabilityZones: the summary names the zone as launches do, and an id
    # this region does not have is not ours. Without an answer the shift is recorded all the same.
    names = ec2_catalog.describe_zone_ids(rt.aws.ec2, rt.settings.region)
    zone = next((name for name, zid in names.items() if zid == shift.zone_id), None)
    if reason is None and names and zone is None:
        reason = f"zone id {shift.zone_id} is not an Availability Zone of {rt.settings.region} in this account"
    if reason is not None:
        ignored = Ignored(reason, shift.event_id)
        log.warning("event ignored", extra={"event_id": shift.event_id, "reason": reason})
        telemetry.count(telemetry.IGNORED_EVENTS)
        return EventSummary(shift.event_id, detail_type, ignored=ignored.reason)
    now = clock.epoch()
    event_time = shift.event_time.timestamp() if shift.event_time is not None else now
    recorded = zonalshifts.record(rt.aws.dynamodb, rt.settings.table_name, shift.zone_id, shift.kind,
                                  shift.active, event_time, now)
    telemetry.count(telemetry.INTERRUPTIONS, **{telemetry.KIND_DIMENSION: ZONAL_SHIFT_KIND})
    until = clock.format_timestamp(
        datetime.fromtimestamp(event_time + zonalshifts.MAX_SHIFT_SECONDS, UTC)) if shift.active else None
    record = ZonalShiftRecord(shift.zone_id, zone, shift.kind, shift.active, recorded, until)
    summary = EventSummary(shift.event_id, detail_type, zonal_shift=record, handled_at=clock.format_timestamp(clock.now()))
    log.info("zonal shift recorded", extra={"summary": summary.to_json()})
    return summary

