"""ARC zonal shift and zonal autoshift: traffic is shifted away from an Availability Zone, or back.

The shapes are the ARC Developer Guide's ("Using zonal autoshift with Amazon EventBridge", example
events): source ``aws.arc-zonal-shift``, the zone in ``detail.metadata.awayFrom`` as an Availability
Zone *id* (``use1-az2``, the same physical zone in every account, unlike a zone name), the shifted
resources in the envelope's ``resources`` (empty for an autoshift observer notification). The events
carry no expiry: a manual shift's end is "Manual Shift Canceled", or its expiry (which sends no event
the guide lists), so the store bounds every shift (``aws/zonalshifts.MAX_SHIFT``).

Practice runs are not parsed: they test that an application copes without a zone's *traffic*, and
keeping capacity out of the zone every week is not what they ask. The stack's rule does not send them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..intents import Ignored, Parsed, ShiftKind, ZoneShift
from .base import Envelope, shown

SOURCE = "aws.arc-zonal-shift"

# detail-type -> (kind, whether traffic is shifted away after it)
DETAIL_TYPES: dict[str, tuple[ShiftKind, bool]] = {
    "Autoshift In Progress": (ShiftKind.AUTOSHIFT, True),
    "Autoshift Completed": (ShiftKind.AUTOSHIFT, False),
    "FIS Experiment Autoshift In Progress": (ShiftKind.FIS_AUTOSHIFT, True),
    "FIS Experiment Autoshift Completed": (ShiftKind.FIS_AUTOSHIFT, False),
    "FIS Experiment Autoshift Canceled": (ShiftKind.FIS_AUTOSHIFT, False),
    "Manual Shift Started": (ShiftKind.MANUAL, True),
    "Manual Shift Updated": (ShiftKind.MANUAL, True),  # e.g. a new expiry: still shifted
    "Manual Shift Canceled": (ShiftKind.MANUAL, False),
}

# An Availability Zone id: a region's short code, "-az" and a number (use1-az1, apne1-az4, usw2-lax1-az1).
_ZONE_ID = re.compile(r"^[a-z]{2,}[0-9]+(-[a-z]+[0-9]*)?-az[0-9]+$")


def parse(event: Envelope) -> Parsed:
    kind, active = DETAIL_TYPES[event.detail_type]
    metadata = event.detail.get("metadata")
    away = metadata.get("awayFrom") if isinstance(metadata, Mapping) else None
    if not isinstance(away, str) or not _ZONE_ID.match(away):
        return Ignored(f"{event.detail_type} without an Availability Zone id in detail.metadata.awayFrom "
                       f"(got {shown(away)}, expected e.g. 'use1-az1')", event.event_id)
    return ZoneShift(away, kind, active, event.event_id, event.time, event.resources)
