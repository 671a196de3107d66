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
# Karpenter's KarpenterInterruptionQueue keeps a message 300 s: an event older than that is about an
# instance whose two-minute notice has run out, and acting on it late helps nobody.
MESSAGE_RETENTION_SECONDS = 300
# AWS advises a visibility timeout of at least six times the function's timeout for an event source mapping,
# so a batch being retried by Lambda is not handed to a second invocation meanwhile.
VISIBILITY_TIMEOUT_FACTOR = 6
# Receives before a message moves to the dead-letter queue (a record that keeps failing).
MAX_RECEIVE_COUNT = 3


@dataclass(frozen=True, slots=True)
class Message:
    """One SQS record: its ``event`` (the EventBridge event it carries) or the reason it is ``dropped``."""

    message_id: str
    event: Mapping[str, Any] | None = None
    dropped: str = ""


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
    try:
        event = json.loads(body)
    except ValueError as exc:
        return Message(message_id, dropped=f"the body is not JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(event, Mapping):
        return Message(message_id, dropped=f"the body is JSON but not an object (got {type(event).__name__})")
    return Message(message_id, event=event)


__all__ = [
    "BATCH_SIZE",
    "MAX_BATCHING_WINDOW_SECONDS",
    "MAX_RECEIVE_COUNT",
    "MESSAGE_RETENTION_SECONDS",
    "SQS_EVENT_SOURCE",
    "VISIBILITY_TIMEOUT_FACTOR",
    "Message",
    "is_batch",
    "read_batch",
    "read_record",
]
