"""Availability Zones under an ARC zonal shift, shared by every function through the DynamoDB table.

One item per zone id, ``pk = "zonalshift#<zone-id>"``, with two attributes per kind of shift
(``autoshift``, ``fis-autoshift``, ``manual``): ``<kind>At``, the time of the last event of that kind
(epoch seconds), and ``<kind>Until``, when the shift ends at the latest (0 once an event ended it).
A write only lands if its event is not older than the last one recorded for that kind, so events
delivered late or twice (EventBridge is at-least-once and unordered) never undo a newer one: a
"Completed" that arrives before its "In Progress" still wins.

ARC's events carry no expiry, and a manual shift that expires sends none the ARC guide lists, so every
shift is bounded by ``MAX_SHIFT`` (three days, the longest ``expiresIn`` StartZonalShift accepts) from
its last event. The item's TTL (``expiresAt``) is the same bound past the write.

Readers ask for the zone ids they know (the catalog's, from DescribeAvailabilityZones): one BatchGetItem.
Without a table (a bare CLI run, unit tests) the same calls use this process's memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import ClientError

from .. import clock
from ..model.zonalshift import ActiveShift
from ..names import TABLE_KEY, TABLE_TTL
from .stateitems import get_items

PREFIX = "zonalshift#"
KINDS = ("autoshift", "fis-autoshift", "manual")
MAX_SHIFT_SECONDS = 3 * 24 * 3600.0

# zone id -> kind -> (event time, until)
_LOCAL: dict[str, dict[str, tuple[float, float]]] = {}
_LOCAL_LOCK = threading.Lock()


def item_key(zone_id: str) -> str:
    return f"{PREFIX}{zone_id}"


def _attr(kind: str) -> str:
    return "".join(part.title() if i else part for i, part in enumerate(kind.split("-")))


def record(
    dynamodb: Any,
    table: str | None,
    zone_id: str,
    kind: str,
    active: bool,
    event_time: float,
    now: float | None = None,
) -> bool:
    """Record that a ``kind`` shift away from ``zone_id`` started (``active``) or ended at ``event_time``;
    False when a newer event of that kind is recorded already (this one changes nothing)."""
    if kind not in KINDS:
        raise ValueError(f"unknown zonal shift kind {kind!r}: allowed are {KINDS}")
    now = clock.epoch() if now is None else now
    until = event_time + MAX_SHIFT_SECONDS if active else 0.0
    if not table:
        with _LOCAL_LOCK:
            kinds = _LOCAL.setdefault(zone_id, {})
            if kind in kinds and kinds[kind][0] > event_time:
                return False
            kinds[kind] = (event_time, until)
        return True
    at, bound = f"{_attr(kind)}At", f"{_attr(kind)}Until"
    try:
        dynamodb.update_item(
            TableName=table,
            Key={TABLE_KEY: {"S": item_key(zone_id)}},
            UpdateExpression="SET #at = :t, #until = :u, #ttl = :ttl, zoneId = :z",
            ConditionExpression="attribute_not_exists(#at) OR #at <= :t",
            ExpressionAttributeNames={"#at": at, "#until": bound, "#ttl": TABLE_TTL},
            ExpressionAttributeValues={
                ":t": {"N": _number(event_time)},
                ":u": {"N": _number(until)},
                ":ttl": {"N": str(int(max(now, event_time) + MAX_SHIFT_SECONDS))},
                ":z": {"S": zone_id},
            },
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise
    return True


def active(dynamodb: Any, table: str | None, zone_ids: Iterable[str], now: float | None = None) -> dict[str, ActiveShift]:
    """The zones among ``zone_ids`` shifted away from at ``now``: zone id -> its shift."""
    now = clock.epoch() if now is None else now
    wanted = sorted(set(zone_ids))
    if not wanted:
        return {}
    if not table:
        with _LOCAL_LOCK:
            found = {z: {k: until for k, (_, until) in _LOCAL.get(z, {}).items()} for z in wanted}
        return _active(found, now)
    found: dict[str, dict[str, float]] = {}
    for item in get_items(dynamodb, table, [item_key(z) for z in wanted]):
        zone = item.get("zoneId", {}).get("S") or item[TABLE_KEY]["S"][len(PREFIX) :]
        found[zone] = {k: float(item[f"{_attr(k)}Until"]["N"]) for k in KINDS if f"{_attr(k)}Until" in item}
    return _active(found, now)


def _active(found: dict[str, dict[str, float]], now: float) -> dict[str, ActiveShift]:
    out = {}
    for zone, kinds in found.items():
        live = {k: until for k, until in kinds.items() if until > now}
        if live:
            out[zone] = ActiveShift(zone, tuple(sorted(live)), max(live.values()))
    return out


def _number(value: float) -> str:
    return str(round(value, 3))


def clear_local() -> None:
    """Forget the in-process records (tests)."""
    with _LOCAL_LOCK:
        _LOCAL.clear()
