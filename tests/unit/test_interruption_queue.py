"""The SQS envelope the interruption queue's event source mapping delivers: one message per record, read purely.

Karpenter reads its interruption events from an SQS queue (aws/karpenter-provider-aws
pkg/controllers/interruption, suite_test.go: "should delete a message when the message can't be parsed":
a message it cannot parse is deleted, never retried); these tests restate that for the batch Lambda hands over.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodescale.interruption import queue

BATCH = json.loads((Path(__file__).parent.parent / "fixtures" / "events" / "sqs" / "sqs-batch.json").read_text())
EVENTS = Path(__file__).parent.parent / "fixtures" / "events"


def test_the_recorded_batch_yields_each_records_eventbridge_event_in_order() -> None:
    assert queue.is_batch(BATCH)
    messages = queue.read_batch(BATCH)
    assert [m.message_id for m in messages] == [r["messageId"] for r in BATCH["Records"]]
    assert [m.event for m in messages] == [
        json.loads((EVENTS / name).read_text())
        for name in ("spot-interruption-warning.json", "rebalance-recommendation.json")
    ]
    assert all(m.dropped == "" for m in messages)


def test_an_eventbridge_event_or_any_other_shape_is_not_a_batch() -> None:
    # `nodescale replay` and direct invocations keep their single-event path.
    assert not queue.is_batch(json.loads((EVENTS / "spot-interruption-warning.json").read_text()))
    assert not queue.is_batch({"Records": []})
    assert not queue.is_batch({"Records": [{"eventSource": "aws:sns"}]})  # an SNS or S3 batch is not ours
    assert not queue.is_batch([BATCH])
    assert not queue.is_batch({**BATCH, "detail-type": "x"})


def test_unreadable_bodies_are_dropped_with_their_reason_and_message_id() -> None:
    record = BATCH["Records"][0]
    batch = {"Records": [
        {**record, "messageId": "m-text", "body": "Test message."},
        {**record, "messageId": "m-list", "body": "[1, 2]"},
        {**record, "messageId": "m-none", "body": None},
        {**record, "messageId": ""},
        record,
    ]}
    messages = queue.read_batch(batch)
    assert [(m.message_id, m.event is None) for m in messages] == [
        ("m-text", True), ("m-list", True), ("m-none", True), ("record-3", True), (record["messageId"], False)]
    assert messages[0].dropped.startswith("the body is not JSON (Expecting value at character 0")
    assert messages[1].dropped == "the body is JSON but not an object (got list)"
    assert messages[2].dropped == "the body is not a string"
    assert messages[3].dropped == "record 3 has no messageId"


def test_the_mapping_figures_follow_awss_advice() -> None:
    # Lambda: a visibility timeout of at least six times the function's timeout for an event source mapping.
    assert queue.VISIBILITY_TIMEOUT_FACTOR >= 6
    assert queue.visibility_timeout_seconds(150) == queue.VISIBILITY_TIMEOUT_FACTOR * 150
    # A wave of 500 warnings (issue 18's 5% of 10,000 nodes) is a handful of invocations, not 500.
    assert 500 / queue.BATCH_SIZE <= 10 and queue.MAX_BATCHING_WINDOW_SECONDS <= 10


@pytest.mark.parametrize("timeout", [3, 150, 900])
def test_a_retried_record_reaches_the_dead_letter_queue_before_it_expires(timeout: int) -> None:
    """#27.3: the queue kept a message 300 s but hid a received one 900 s, so a failed record expired unseen.
    Retention covers MAX_RECEIVE_COUNT receives each ending with the full visibility timeout (an invocation that
    crashed), and the receive that moves it; a failure the function reports comes back well inside a spot
    notice, every try of it included."""
    visibility = queue.visibility_timeout_seconds(timeout)
    assert queue.retention_seconds(timeout) > queue.MAX_RECEIVE_COUNT * visibility
    assert queue.retention_seconds(timeout) <= 14 * 24 * 3600  # SQS's longest retention
    notice, window = 120, queue.MAX_BATCHING_WINDOW_SECONDS
    assert queue.MAX_RECEIVE_COUNT * (queue.RETRY_VISIBILITY_SECONDS + window) < notice


def record(body: str, message_id: str = "m") -> dict:
    return {**BATCH["Records"][0], "messageId": message_id, "body": body}


def test_poison_bodies_are_dropped_each_with_its_reason_and_the_warning_beside_them_is_read() -> None:
    """#27.4: a 120 KB deeply nested body raised RecursionError and an integer of more than 4,300 digits an
    AttributeError (a ValueError without .msg) out of read_batch, failing the whole batch."""
    warning = BATCH["Records"][0]
    batch = {"Records": [
        record("[" * 120_000 + "]" * 120_000, "deep"),
        record('{"a": ' + "9" * 5000 + "}", "long-number"),
        record(" " * (queue.MAX_BODY_CHARACTERS + 1), "huge"),
        warning,
    ]}
    messages = queue.read_batch(batch)
    assert [m.message_id for m in messages] == ["deep", "long-number", "huge", warning["messageId"]]
    assert messages[0].dropped == "the body is JSON nested too deeply to read"
    assert messages[1].dropped.startswith("the body is not JSON (Exceeds the limit (4300 digits)")
    assert messages[2].dropped.startswith(f"the body has {queue.MAX_BODY_CHARACTERS + 1} characters")
    assert messages[3].event == json.loads(warning["body"]) and not messages[3].dropped
    assert (messages[3].receipt_handle, messages[3].queue_arn) == (warning["receiptHandle"], warning["eventSourceARN"])
