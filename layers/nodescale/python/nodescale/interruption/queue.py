"""The interruption queue: EventBridge events delivered through SQS, read in batches. Pure: no I/O.

Every interruption rule targets one SQS queue, and the interruption function reads it through a Lambda
event source mapping, as Karpenter's controller polls its ``KarpenterInterruptionQueue``
(aws/karpenter-provider-aws ``pkg/controllers/interruption``). A wave of warnings then costs one
invocation (and one read of the world) per batch rather than per event.

The batch Lambda hands over (the AWS Lambda docs' "Example Amazon SQS message event")::

    {"Records": [{"messageId": "...", "receiptHandle": "...", "body": "<EventBridge event as JSON>",
                  "attributes": {...}, "messageAttributes": {}, "md5OfBody": "...",
                  "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:...", "awsRegion": "..."}]}

:func:`read_batch` turns it into one :class:`Message` per record: the EventBridge event, or why the record
is dropped. A dropped record is never reported as a failure: a body that cannot be read now will not be
readable on a retry either, so retrying it would only fill the queue until its redrive.

The queue's and the mapping's figures live here so the stack and the bench read the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SQS_EVENT_SOURCE = "aws:sqs"

# Records per invocation: a wave of 500 warnings is five invocations, each one world read. Lambda's
# ceiling for a standard queue is 10,000 with a window; 100 keeps one invocation's drains well inside
# the function's timeout at the pods per node measured (docs/scale.md).
BATCH_SIZE = 100
# How long the mapping gathers records before invoking with fewer than BATCH_SIZE: a burst of warnings
# arrives within a second or two, and a spot notice leaves two minutes, so a few seconds are cheap.
MAX_BATCHING_WINDOW_SECONDS = 5
# AWS advises a visibility timeout of at least six times the function's timeout for an event source mapping,
# so a batch being retried by Lambda is not handed to a second invocation meanwhile.
VISIBILITY_TIMEOUT_FACTOR = 6
# Receives before a message moves to the dead-letter queue (a record that keeps failing).
MAX_RECEIVE_COUNT = 3
# A record the function names as a batch item failure is made visible again this soon (ChangeMessageVisibility),
# not after the queue's visibility timeout: its MAX_RECEIVE_COUNT tries then fit in a spot notice's two minutes
# (three tries about 45 s apart at most, with the batching window and a slow invocation), and a record that
# keeps failing reaches the dead-letter queue within minutes.
RETRY_VISIBILITY_SECONDS = 15
# EventBridge caps an event at 256 KB: a longer body did not come from it and is not parsed at all.
MAX_BODY_CHARACTERS = 256 * 1024


def visibility_timeout_seconds(function_timeout_seconds: int) -> int:
    """The queue's visibility timeout for a function with this timeout (AWS's advice, see above)."""
    return VISIBILITY_TIMEOUT_FACTOR * function_timeout_seconds


def retention_seconds(function_timeout_seconds: int) -> int:
    """How long the queue keeps a message: long enough that MAX_RECEIVE_COUNT receives which each end with the
    full visibility timeout (an invocation that crashed or timed out, so nothing shortened it) still end in
    the dead-letter queue rather than expiring unseen, plus one more visibility timeout for the receive that
    moves it. (Karpenter's queue keeps 300 s; a retried record that expires there is lost without a trace.)
    An old event is harmless: every event is acted on against the world as read now, and an instance that is
    gone has nothing left to drain."""
    return (MAX_RECEIVE_COUNT + 1) * visibility_timeout_seconds(function_timeout_seconds)


@dataclass(frozen=True, slots=True)
class Message:
    """One SQS record: its ``event`` (the EventBridge event it carries) or the reason it is ``dropped``; its
    ``receipt_handle`` and ``queue_arn``, to make it visible again soon when it fails."""

    message_id: str
    event: Mapping[str, Any] | None = None
    dropped: str = ""
    receipt_handle: str = ""
    queue_arn: str = ""


def is_batch(event: object) -> bool:
    """True for an SQS batch from an event source mapping (a ``Records`` list of ``aws:sqs`` records); an
    EventBridge event (``nodescale replay``, a direct invocation) is not one."""
    if not isinstance(event, Mapping) or "detail-type" in event:
        return False
    records = event.get("Records")
    return (
        isinstance(records, list)
        and bool(records)
        and all(isinstance(r, Mapping) and r.get("eventSource") == SQS_EVENT_SOURCE for r in records)
    )


def read_batch(batch: Mapping[str, Any]) -> list[Message]:
    """One :class:`Message` per record of an SQS batch, in order (see :func:`is_batch`)."""
    records = batch.get("Records")
    return [read_record(record, index) for index, record in enumerate(records if isinstance(records, list) else [])]


def read_record(record: object, index: int = 0) -> Message:
    """The EventBridge event one record carries, or why it is dropped (named with the record's messageId)."""
    if not isinstance(record, Mapping):
        return Message(f"record-{index}", dropped=f"record {index} is not an object")
    message_id = record.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        return Message(f"record-{index}", dropped=f"record {index} has no messageId")
    body = record.get("body")
    if not isinstance(body, str):
        return Message(message_id, dropped="the body is not a string")
    if len(body) > MAX_BODY_CHARACTERS:
        return Message(message_id, dropped=f"the body has {len(body)} characters, more than EventBridge's "
                                           f"{MAX_BODY_CHARACTERS} (256 KB)")
    try:
        event = json.loads(body)
    except RecursionError:
        return Message(message_id, dropped="the body is JSON nested too deeply to read")
    except ValueError as exc:
        # JSONDecodeError names where; other ValueErrors (an integer of more than 4,300 digits) only what.
        where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return Message(message_id, dropped=f"the body is not JSON ({detail.split(';')[0]}{where})")
    if not isinstance(event, Mapping):
        return Message(message_id, dropped=f"the body is JSON but not an object (got {type(event).__name__})")
    handle, arn = record.get("receiptHandle"), record.get("eventSourceARN")
    return Message(message_id, event=event, receipt_handle=handle if isinstance(handle, str) else "",
                   queue_arn=arn if isinstance(arn, str) else "")


__all__ = [
    "BATCH_SIZE",
    "MAX_BATCHING_WINDOW_SECONDS",
    "MAX_BODY_CHARACTERS",
    "MAX_RECEIVE_COUNT",
    "RETRY_VISIBILITY_SECONDS",
    "SQS_EVENT_SOURCE",
    "VISIBILITY_TIMEOUT_FACTOR",
    "Message",
    "is_batch",
    "read_batch",
    "read_record",
    "retention_seconds",
    "visibility_timeout_seconds",
]
