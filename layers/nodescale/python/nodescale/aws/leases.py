"""A short lease in the shared DynamoDB table, so only one invocation plans and launches at a time.

The provisioner, the interruption function and the disruption function all launch capacity. Each
reads the world, plans and launches; two doing so at once could each see the same headroom under a
NodePool limit and both launch into it. Holding the lease from re-reading this cluster's instances
to the end of the launch closes that gap. A holder that dies (a Lambda timeout mid-launch) loses the
lease when it expires, so nothing waits on it for long.

A holder that is only slow keeps it: a heartbeat thread renews it (a conditional update on the
owner) every third of its TTL, on the clock the project decides by (``clock.epoch()``, sim's simulated
clock included). A process frozen or stalled renews nothing, so its lease expires and another takes
it; so before each launch the holder renews it once more, conditionally, as a fence
(``Lease.check()``): a holder whose lease was taken, or whose renewal failed, refuses to launch
(``LeaseLost``) instead of launching beside the new holder. Each acquisition has its own owner id,
so a renewal by a holder that lost the lease can never succeed, even when it comes back later.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .. import clock
from ..names import TABLE_KEY, TABLE_TTL

log = logging.getLogger(__name__)

PREFIX = "lease#"
DEFAULT_TTL_SECONDS = 60.0
# The heartbeat looks at the clock at most this far apart (real seconds), and more often when the clock
# runs faster than real time (sim), so a renewal is never a whole TTL late.
MAX_TICK_SECONDS = 1.0
MIN_TICK_SECONDS = 0.02

_LOCAL: dict[str, threading.Lock] = {}
_LOCAL_GUARD = threading.Lock()


class LeaseBusy(RuntimeError):
    """Another invocation held the lease for longer than this one could wait."""


class LeaseLost(RuntimeError):
    """This invocation no longer holds its lease (it expired and was taken, or could not be renewed): it must
    not act as the holder."""


class Lease:
    """A lease this invocation holds: ``check()`` before each act only its holder may do."""

    def __init__(self, dynamodb: Any, table: str | None, name: str, owner: str, ttl_seconds: float) -> None:
        self.dynamodb = dynamodb
        self.table = table
        self.name = name
        self.owner = owner
        self.ttl_seconds = ttl_seconds
        self.renewed_at = clock.epoch() if table else 0.0  # on the project's clock
        self.renewals = 0
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def key(self) -> dict[str, dict[str, str]]:
        return {TABLE_KEY: {"S": PREFIX + self.name}}

    @property
    def lost(self) -> str | None:
        """Why this invocation no longer holds the lease, or None while it does (as far as it knows)."""
        return self._lost

    def renew(self) -> None:
        """Extend the lease to a TTL from now if this acquisition still owns it. Raises LeaseLost when it does
        not (and the lease stays lost); ClientError/BotoCoreError when DynamoDB could not say."""
        if not self.table:
            return  # the in-process lock cannot expire
        with self._lock:
            if self._lost:
                raise LeaseLost(self._lost)
            now = clock.epoch()
            try:
                self.dynamodb.update_item(
                    TableName=self.table,
                    Key=self.key,
                    UpdateExpression="SET #t = :until",
                    # The owner alone: a lease that expired but was not taken is still this one's (no one
                    # else launched under it); once another took it, the owner differs for good.
                    ConditionExpression="#o = :me",
                    ExpressionAttributeNames={"#o": "owner", "#t": TABLE_TTL},
                    ExpressionAttributeValues={":me": {"S": self.owner}, ":until": {"N": str(int(now + self.ttl_seconds))}},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                self._lost = (f"lease {self.name} expired and was taken by another invocation "
                              f"(last renewed {now - self.renewed_at:.0f}s ago, TTL {self.ttl_seconds:.0f}s)")
                raise LeaseLost(self._lost) from None
            self.renewed_at = now
            self.renewals += 1

    def check(self) -> None:
        """The fence before an act only the holder may do (a launch): renews the lease, so the act has a
        whole TTL to itself. Raises LeaseLost when the lease was taken or its renewal failed: a holder that
        cannot show it holds the lease acts as if it did not."""
        try:
            self.renew()
        except (ClientError, BotoCoreError) as exc:
            code = exc.response.get("Error", {}).get("Code") if isinstance(exc, ClientError) else type(exc).__name__
            raise LeaseLost(f"lease {self.name} could not be renewed ({code}): not acting as its holder") from None

    # -------------------------------------------------------------------------------------------- heartbeat

    def start(self) -> None:
        if not self.table:
            return
        # The caller's context (credentials scoped per function in sim/) goes with the thread.
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._beat,), name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _beat(self) -> None:
        """Renew every third of the TTL of the project's clock until stopped or lost. Wakes often enough for
        a clock faster than real time; a frozen process wakes late or never, and its lease expires."""
        every = self.ttl_seconds / 3
        real, seen = time.monotonic(), clock.epoch()
        tick = MAX_TICK_SECONDS
        while not self._stop.wait(tick):
            try:
                now = clock.epoch()
            except clock.ClockError as exc:
                log.warning("lease heartbeat cannot read the clock", extra={"lease": self.name, "error": str(exc)})
                continue
            elapsed = time.monotonic() - real
            rate = max(1.0, (now - seen) / elapsed) if elapsed > 0 else 1.0
            real, seen = time.monotonic(), now
            tick = min(MAX_TICK_SECONDS, max(MIN_TICK_SECONDS, every / (3 * rate)))
            if now - self.renewed_at < every:
                continue
            try:
                self.renew()
            except LeaseLost as exc:
                log.error("lease lost while held; this invocation launches nothing more under it",
                          extra={"lease": self.name, "reason": str(exc)})
                return
            except (ClientError, BotoCoreError) as exc:
                # Not proof of loss: tried again next tick; the fence before a launch decides.
                log.warning("lease renewal failed", extra={"lease": self.name, "error": str(exc)})


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
) -> Iterator[Lease]:
    """Hold lease ``name`` for the duration of the block, renewed while it runs; raises LeaseBusy after
    ``wait_seconds``. The block calls ``check()`` on the lease before each act only its holder may do."""
    if ttl_seconds <= 0:
        raise ValueError(f"lease {name}: ttl_seconds={ttl_seconds!r}: allowed is a number of seconds above 0")
    lease = Lease(dynamodb, table, name, uuid.uuid4().hex, ttl_seconds)
    if not table:
        # Without a table (a bare CLI run, unit tests) invocations share this process only.
        with _LOCAL_GUARD:
            lock = _LOCAL.setdefault(name, threading.Lock())
        if not lock.acquire(timeout=wait_seconds):
            raise LeaseBusy(f"lease {name} is held by another invocation in this process")
        try:
            yield lease
        finally:
            lock.release()
        return
    _acquire(lease, wait_seconds, poll_seconds)
    lease.start()
    try:
        yield lease
    finally:
        lease.stop()
        with contextlib.suppress(ClientError, BotoCoreError):
            # Only our own lease: if it expired and another took it, theirs stays.
            dynamodb.delete_item(
                TableName=table,
                Key=lease.key,
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":me": {"S": lease.owner}},
            )


def _acquire(lease: Lease, wait_seconds: float, poll_seconds: float) -> None:
    deadline = time.monotonic() + wait_seconds
    while True:
        now = clock.epoch()
        try:
            lease.dynamodb.put_item(
                TableName=lease.table,
                Item={**lease.key, "owner": {"S": lease.owner}, TABLE_TTL: {"N": str(int(now + lease.ttl_seconds))}},
                ConditionExpression="attribute_not_exists(pk) OR expiresAt < :now",
                ExpressionAttributeValues={":now": {"N": str(int(now))}},
            )
            lease.renewed_at = now
            return
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
        if time.monotonic() >= deadline:
            raise LeaseBusy(f"lease {lease.name} is held by another invocation; waited {wait_seconds:.0f}s")
        time.sleep(poll_seconds)
