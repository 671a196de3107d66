"""EventBridge events -> intents. Pure: no I/O, never raises on bad input.

Every event the interruption function can receive becomes either a list of per-instance intents
or one ``Ignored`` with a reason a person can read in the logs. Malformed input is data too: it is
ignored with its reason, so a bad event is dropped rather than retried forever.

This module checks what every event shares (shape, size, account, region) and hands the envelope
to the parser registered for its source and detail-type (``parsers/``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from .intents import Ignored, Intent, IntentAction, Kind, Parsed, ShiftKind, ZoneShift
from .parsers import health, rebalance, spot, state_change, zonal_shift
from .parsers.base import Envelope, parse_time, shown, text
from .parsers.registry import dispatch

SPOT_WARNING = spot.DETAIL_TYPE
REBALANCE = rebalance.DETAIL_TYPE
STATE_CHANGE = state_change.DETAIL_TYPE
HEALTH = health.DETAIL_TYPE
ZONAL_SHIFT_SOURCE = zonal_shift.SOURCE
ZONAL_SHIFT_DETAIL_TYPES = tuple(zonal_shift.DETAIL_TYPES)

INTERRUPT = IntentAction.INTERRUPT
REBALANCE_RISK = IntentAction.REBALANCE_RISK
NO_ACTION = IntentAction.NO_ACTION

GOING_AWAY_STATES = state_change.GOING_AWAY_STATES
HARMLESS_STATES = state_change.HARMLESS_STATES
SPOT_NOTICE = spot.SPOT_NOTICE

# EventBridge caps an event at 256 KB; anything larger did not come from it.
MAX_EVENT_BYTES = 256 * 1024
# AWS's events nest a handful of levels (a Health event's detail.affectedEntities[].tags is the deepest read);
# a deeper one is refused before anything (JSON encoding, hashing, logging) recurses through it.
MAX_EVENT_DEPTH = 32


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    """One event read once: its intents (or why it is ignored) and the detail-type the summary names."""

    result: Parsed
    detail_type: str | None


def read(event: object, account: str | None = None, region: str | None = None) -> ParsedEvent:
    """:func:`parse`, keeping the event's detail-type for the summary."""
    return ParsedEvent(parse(event, account, region), detail_type_of(event))


def detail_type_of(event: object) -> str | None:
    """The event's detail-type as given, if it is a string (whether or not the event is valid)."""
    value = event.get("detail-type") if isinstance(event, Mapping) else None
    return value if isinstance(value, str) else None


def parse(event: object, account: str | None = None, region: str | None = None) -> Parsed:
    """Turn one EventBridge event into intents; ``account``/``region`` are this deployment's own."""
    envelope = _envelope(event, account, region)
    return envelope if isinstance(envelope, Ignored) else dispatch(envelope)


def nesting_deeper_than(value: object, limit: int) -> bool:
    """Whether objects and arrays nest in ``value`` more than ``limit`` levels; iterative, so any depth is safe
    to ask about, and it stops at the first path that is too deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, Mapping) else item if isinstance(item, list | tuple) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _envelope(event: object, account: str | None, region: str | None) -> Envelope | Ignored:
    if not isinstance(event, Mapping):
        return Ignored(f"not an EventBridge event: expected a JSON object, got {type(event).__name__}")
    if nesting_deeper_than(event, MAX_EVENT_DEPTH):
        return Ignored(f"not an EventBridge event: nested deeper than {MAX_EVENT_DEPTH} levels")
    try:
        size = len(json.dumps(event, default=str))
    except (TypeError, ValueError):
        # ValueError also for an integer of more than 4,300 digits (Python's int to str limit).
        return Ignored("not an EventBridge event: not serializable as JSON")
    if size > MAX_EVENT_BYTES:
        return Ignored(f"event of {size} bytes is larger than EventBridge's 256 KB limit")
    event_id = text(event.get("id"))
    for field in ("detail-type", "source", "account", "region"):
        if not isinstance(event.get(field), str) or not event.get(field):
            return Ignored(f"missing or non-string field {field!r}", event_id)
    detail = event.get("detail")
    if not isinstance(detail, Mapping):
        return Ignored("missing or non-object field 'detail'", event_id)
    if account and event["account"] != account:
        return Ignored(f"event for account {shown(event['account'], quote=False)}, this deployment is in {account}", event_id)
    if region and event["region"] != region:
        return Ignored(f"event for region {shown(event['region'], quote=False)}, this deployment is in {region}", event_id)
    resources = event.get("resources")
    names = tuple(r for r in resources if isinstance(r, str)) if isinstance(resources, list) else ()
    return Envelope(event_id, event["source"], event["detail-type"], parse_time(event.get("time")), detail, names)


__all__ = [
    "HEALTH",
    "INTERRUPT",
    "MAX_EVENT_BYTES",
    "MAX_EVENT_DEPTH",
    "NO_ACTION",
    "REBALANCE",
    "REBALANCE_RISK",
    "SPOT_WARNING",
    "STATE_CHANGE",
    "ZONAL_SHIFT_DETAIL_TYPES",
    "ZONAL_SHIFT_SOURCE",
    "Ignored",
    "Intent",
    "IntentAction",
    "Kind",
    "ParsedEvent",
    "ShiftKind",
    "ZoneShift",
    "detail_type_of",
    "nesting_deeper_than",
    "parse",
    "read",
]
