"""The SQS envelope the interruption queue's event source mapping delivers: one message per record, read purely.

Karpenter reads its interruption events from an SQS queue (aws/karpenter-provider-aws
pkg/controllers/interruption, suite_test.go: "should delete a message when the message can't be parsed":
a message it cannot parse is deleted, never retried); these tests restate that for the batch Lambda hands over.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def test_the_mapping_figures_follow_awss_advice_and_karpenters_queue() -> None:
    # Karpenter's CloudFormation KarpenterInterruptionQueue: MessageRetentionPeriod 300.
    assert queue.MESSAGE_RETENTION_SECONDS == 300
    # Lambda: a visibility timeout of at least six times the function's timeout for an event source mapping.
    assert queue.VISIBILITY_TIMEOUT_FACTOR >= 6
    # A wave of 500 warnings (issue 18's 5% of 10,000 nodes) is a handful of invocations, not 500.
    assert 500 / queue.BATCH_SIZE <= 10 and queue.MAX_BATCHING_WINDOW_SECONDS <= 10
