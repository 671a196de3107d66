"""A short lease in the shared DynamoDB table, so only one invocation plans and launches at a time.

The provisioner, the interruption function and the disruption function all launch capacity. Each
reads the world, plans and launches; two doing so at once could each see the same headroom under a
NodePool limit and both launch into it. Holding the lease from re-reading this cluster's instances
to the end of the launch closes that gap. A holder that dies (a Lambda timeout mid-launch) loses the
lease when it expires, so nothing waits on it for long.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import ClientError

from .. import clock
from ..names import TABLE_KEY, TABLE_TTL

PREFIX = "lease#"
DEFAULT_TTL_SECONDS = 60.0

_LOCAL: dict[str, threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


class LeaseBusy(RuntimeError):
    """Another invocation held the lease for longer than this one could wait."""


def check_table(dynamodb: Any, table: str, name: str = "launch") -> None:
    """Read lease ``name``'s item: raises ClientError (ResourceNotFoundException for a missing table,
    AccessDenied...) or BotoCoreError when the table cannot serve as the lease, before anything is changed."""
    dynamodb.get_item(TableName=table, Key={TABLE_KEY: {"S": PREFIX + name}}, ProjectionExpression=TABLE_KEY)


@contextlib.contextmanager
def hold(
    dynamodb: Any,
    table: str | None,
    name: str,
    *,
    wait_seconds: float = 20.0,
    ttl_seconds: float = DEFAULT_TTL_SECONDS,
    poll_seconds: float = 0.2,
) -> Iterator[str]:
    """Hold lease ``name`` for the duration of the block; raises LeaseBusy after ``wait_seconds``."""
    owner = uuid.uuid4().hex
    if not table:
        # Without a table (a bare CLI run, unit tests) invocations share this process only.
        with _LOCAL_GUARD:
            lock = _LOCAL.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=wait_seconds):
            raise LeaseBusy(f"lease {name} is held by another invocation in this process")
        try:
            yield owner
        finally:
            lock.release()
        return
    key = {TABLE_KEY: {"S": PREFIX + name}}
    deadline = time.monotonic() + wait_seconds
    while True:
        now = clock.epoch()
        try:
            dynamodb.put_item(
                TableName=table,
                Item={**key, "owner": {"S": owner}, TABLE_TTL: {"N": str(int(now + ttl_seconds))}},
                ConditionExpression="attribute_not_exists(pk) OR expiresAt < :now",
                ExpressionAttributeValues={":now": {"N": str(int(now))}},
            )
            break
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        if time.monotonic() >= deadline:
            raise LeaseBusy(f"lease {name} is held by another invocation; waited {wait_seconds:.0f}s")
        time.sleep(poll_seconds)
    try:
        yield owner
    finally:
        with contextlib.suppress(ClientError):
            # Only our own lease: if it expired and another took it, theirs stays.
            dynamodb.delete_item(
                TableName=table,
                Key=key,
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":me": {"S": owner}},
            )
