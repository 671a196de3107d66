"""Offerings that recently failed to launch, shared by every function through the DynamoDB table.

An offering (instance type, zone, capacity type) that returned a capacity error, or whose spot
capacity is being reclaimed, is skipped for a few minutes by every invocation. Items live in the
shared table as ``pk = "offering#<type>#<zone>#<capacity-type>"`` with ``expiresAt`` in epoch seconds.
DynamoDB's TTL deletes expired items lazily (up to days later), so reads filter on ``expiresAt``
themselves. Without a table (a bare CLI run, some tests) the same calls use this process's memory.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import clock as clock_module
from ..model.instancetype import InstanceType
from ..names import TABLE_KEY, TABLE_TTL

PREFIX = "offering#"
DEFAULT_TTL_SECONDS = 180.0
_BATCH = 25  # BatchWriteItem's limit

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)

_LOCAL: dict[OfferingKey, tuple[float, str]] = {}
_LOCAL_LOCK = threading.Lock()


def item_key(instance_type: str, zone: str, capacity_type: str) -> str:
    return f"{PREFIX}{instance_type}#{zone}#{capacity_type}"


def parse_key(pk: str) -> OfferingKey | None:
    if not pk.startswith(PREFIX):
        return None
    parts = pk[len(PREFIX) :].split("#")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2]


def mark_unavailable(
    dynamodb: Any,
    table: str | None,
    offerings: Iterable[OfferingKey],
    reason: str,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
    now: float | None = None,
) -> float:
    """Record each offering as unavailable until now + ttl; returns that expiry (epoch seconds)."""
    now = clock_module.epoch() if now is None else now
    expires = int(now + ttl_seconds)
    keys = sorted(set(offerings))
    if not keys:
        return float(expires)
    if not table:
        with _LOCAL_LOCK:
            for k in keys:
                _LOCAL[k] = (float(expires), reason)
        return float(expires)
    requests = [
        {
            "PutRequest": {
                "Item": {
                    TABLE_KEY: {"S": item_key(*k)},
                    "reason": {"S": reason or "unknown"},
                    TABLE_TTL: {"N": str(expires)},
                    "instanceType": {"S": k[0]},
                    "zone": {"S": k[1]},
                    "capacityType": {"S": k[2]},
                }
            }
        }
        for k in keys
    ]
    for start in range(0, len(requests), _BATCH):
        pending: dict = {table: requests[start : start + _BATCH]}
        for attempt in range(5):
            out = dynamodb.batch_write_item(RequestItems=pending)
            pending = out.get("UnprocessedItems") or {}
            if not pending:
                break
            time.sleep(0.05 * 2**attempt)
    return float(expires)


def unavailable(dynamodb: Any, table: str | None, now: float | None = None) -> dict[OfferingKey, float]:
    """Every offering still marked unavailable, with its expiry (epoch seconds)."""
    now = clock_module.epoch() if now is None else now
    if not table:
        with _LOCAL_LOCK:
            for k in [k for k, (exp, _) in _LOCAL.items() if exp <= now]:
                del _LOCAL[k]
            return {k: exp for k, (exp, _) in _LOCAL.items()}
    out: dict[OfferingKey, float] = {}
    paginator = dynamodb.get_paginator("scan")
    pages = paginator.paginate(
        TableName=table,
        FilterExpression="begins_with(pk, :prefix) AND expiresAt > :now",
        ExpressionAttributeValues={":prefix": {"S": PREFIX}, ":now": {"N": str(int(now))}},
        ProjectionExpression="pk, expiresAt",
        ConsistentRead=True,
    )
    for page in pages:
        for item in page.get("Items", []):
            key = parse_key(item[TABLE_KEY]["S"])
            if key is not None:
                out[key] = float(item[TABLE_TTL]["N"])
    return out


def clear_local() -> None:
    """Forget the in-process marks (tests)."""
    with _LOCAL_LOCK:
        _LOCAL.clear()


class UnavailableOfferings:
    """One invocation's view of the table: read once, then kept current by its own marks.

    The launcher consults it for every override it builds, so it must not scan the table each time.
    """

    def __init__(
        self,
        dynamodb: Any = None,
        table: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = clock_module.epoch,
    ) -> None:
        self._dynamodb = dynamodb
        self._table = table
        self._ttl = ttl_seconds
        self._clock = clock
        self._known: dict[OfferingKey, float] | None = None

    def refresh(self) -> dict[OfferingKey, float]:
        self._known = unavailable(self._dynamodb, self._table, self._clock())
        return dict(self._known)

    def snapshot(self) -> dict[OfferingKey, float]:
        if self._known is None:
            self.refresh()
        now = self._clock()
        return {k: exp for k, exp in (self._known or {}).items() if exp > now}

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone, capacity_type) in self.snapshot()

    def mark(self, offerings: Iterable[OfferingKey], reason: str) -> None:
        keys = list(offerings)
        if not keys:
            return
        expires = mark_unavailable(self._dynamodb, self._table, keys, reason, self._ttl, self._clock())
        known = self._known if self._known is not None else unavailable(self._dynamodb, self._table, self._clock())
        known.update(dict.fromkeys(keys, expires))
        self._known = known


def apply(instance_types: Sequence[InstanceType], marked: dict[OfferingKey, float]) -> list[InstanceType]:
    """Copies of the instance types whose marked offerings are no longer available."""
    if not marked:
        return list(instance_types)
    out = []
    for it in instance_types:
        offerings = tuple(
            dataclasses.replace(o, available=False) if (it.name, o.zone, o.capacity_type) in marked else o
            for o in it.offerings
        )
        if offerings == it.offerings:
            out.append(it)
        else:
            out.append(it.copy(offerings=offerings))
    return out

