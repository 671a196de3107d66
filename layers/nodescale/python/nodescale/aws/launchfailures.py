"""The last launch failure of each NodePool, shared by every function and the CLI through the DynamoDB table.

A launch that fails for a reason other than a capacity shortage (AccessDenied on ``iam:PassRole``, a node
class whose role has no instance profile, no AMI...) fails the same way on every pass until someone fixes
the cause. ``nodescale status`` and ``nodescale explain`` run in another process than the launch, so the
failure is recorded where they can read it: one item per pool, ``pk = "launchfailure#<pool>"``, with the
error's code and message and when it happened. A launch of the pool that succeeds deletes the item; an
item not refreshed for ``TTL_SECONDS`` (nothing tried to launch since) is ignored and, later, removed by
DynamoDB's TTL. Without a table (a bare CLI run, unit tests) the same calls use this process's memory.

Capacity errors are not recorded: the provisioner retries other offerings, and the unavailable-offerings
cache (aws/offerings.py) already says which offerings ran out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import clock
from ..names import TABLE_KEY, TABLE_TTL
from .stateitems import get_items

PREFIX = "launchfailure#"
# Several provisioner passes: a failure that is still happening is refreshed long before, and one nobody
# retried (no pod asks for the pool any more) stops being reported.
TTL_SECONDS = 15 * 60.0
_MESSAGE_LIMIT = 1000  # EC2's messages are short; a user data or selector error may quote a document

_LOCAL: dict[str, LaunchFailure] = {}
_LOCAL_LOCK = threading.Lock()


@dataclass(frozen=True)
class LaunchFailure:
    """Why the pool's last launch failed: the error code (EC2's, IAM's, or the client's exception name)."""

    nodepool: str
    code: str
    message: str
    at: float  # epoch seconds

    def describe(self) -> str:
        """The one line status and explain show: ``launch failing: <code>: <message>``."""
        return f"launch failing: {self.code}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"nodePool": self.nodepool, "code": self.code, "message": self.message,
                "since": clock.format_timestamp(datetime.fromtimestamp(self.at, UTC))}


def item_key(nodepool: str) -> str:
    return f"{PREFIX}{nodepool}"


def record(dynamodb: Any, table: str | None, failure: LaunchFailure) -> None:
    """Record ``failure`` as its pool's last launch failure (replacing the one before)."""
    failure = LaunchFailure(failure.nodepool, failure.code, failure.message[:_MESSAGE_LIMIT], failure.at)
    if not table:
        with _LOCAL_LOCK:
            _LOCAL[failure.nodepool] = failure
        return
    dynamodb.put_item(
        TableName=table,
        Item={
            TABLE_KEY: {"S": item_key(failure.nodepool)},
            "nodePool": {"S": failure.nodepool},
            "code": {"S": failure.code or "Unknown"},
            "message": {"S": failure.message or "-"},
            "at": {"N": str(round(failure.at, 3))},
            TABLE_TTL: {"N": str(int(failure.at + TTL_SECONDS))},
        },
    )


def clear(dynamodb: Any, table: str | None, nodepool: str) -> None:
    """The pool launched: its last failure is history."""
    if not table:
        with _LOCAL_LOCK:
            _LOCAL.pop(nodepool, None)
        return
    dynamodb.delete_item(TableName=table, Key={TABLE_KEY: {"S": item_key(nodepool)}})


def failing(dynamodb: Any, table: str | None, nodepools: Iterable[str], now: float | None = None) -> dict[str, LaunchFailure]:
    """The pools among ``nodepools`` whose last launch failed within ``TTL_SECONDS`` of ``now``."""
    now = clock.epoch() if now is None else now
    wanted = sorted(set(nodepools))
    if not wanted:
        return {}
    if not table:
        with _LOCAL_LOCK:
            found = [_LOCAL[p] for p in wanted if p in _LOCAL]
    else:
        found = [_from_item(item) for item in get_items(dynamodb, table, [item_key(p) for p in wanted])]
    return {f.nodepool: f for f in found if f.at + TTL_SECONDS > now}


def _from_item(item: dict[str, Any]) -> LaunchFailure:
    return LaunchFailure(
        nodepool=item.get("nodePool", {}).get("S") or item[TABLE_KEY]["S"][len(PREFIX) :],
        code=item.get("code", {}).get("S", "Unknown"),
        message=item.get("message", {}).get("S", ""),
        at=float(item.get("at", {}).get("N", "0")),
    )


def clear_local() -> None:
    """Forget the in-process records (tests)."""
    with _LOCAL_LOCK:
        _LOCAL.clear()
