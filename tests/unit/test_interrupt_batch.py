"""An SQS batch of interruption events: bad records dropped, duplicates answered from their idempotency record,
failures reported as Lambda's partial batch response (and their records released so the retry runs).

Restates aws/karpenter-provider-aws pkg/controllers/interruption suite_test.go: "should delete a message when
the message can't be parsed" (a bad body is not retried) and "should handle multiple messages that cause
nodeClaim deletion" (many messages, one pass). Acting on nodes with one world read is shown on sim
(tests/integration/test_interruption_batch.py), where replacement and drain are real.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from nodescale.aws.clients import AwsClients
from nodescale.aws.idempotency import once_per_event
from nodescale.runtime import Runtime
from nodescale.settings import Settings
from nodescale.usecases.interrupt import batch as interrupt_batch
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt import handle as interrupting
from tests import fakes

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
ACCOUNT = "123456789012"
TABLE = "nodescale-demo-cluster"
I1, I2 = "i-00000000000000001", "i-00000000000000002"
FOREIGN = {"karpenter.sh/nodepool": "default"}  # no nodescale.io/cluster tag: never ours to touch


def warning(instance_id: str) -> dict[str, Any]:
    text = (EVENTS / "spot-interruption-warning.json").read_text().replace("i-0a1b2c3d4e5f60718", instance_id)
    return {**json.loads(text), "id": str(uuid.uuid4())}


def batch(*bodies: object) -> dict[str, Any]:
    """Records as the event source mapping hands them over (tests/fixtures/events/sqs/sqs-batch.json's shape)."""
    (template, _) = json.loads((EVENTS / "sqs" / "sqs-batch.json").read_text())["Records"]
    return {"Records": [{**template, "messageId": f"m{i}", "body": b if isinstance(b, str) else json.dumps(b)}
                        for i, b in enumerate(bodies)]}


class ThrottledEc2(fakes.FakeEc2):
    """EC2 answering every describe with throttling, until `healthy` is set."""

    healthy = False

    def get_paginator(self, name: str) -> Any:
        if not self.healthy:
            raise ClientError({"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, "DescribeInstances")
        return super().get_paginator(name)


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with fakes.state_table(TABLE) as client:
        yield client


def runtime_with(ec2: Any, dynamodb: Any) -> Runtime:
    settings = Settings(cluster_name=fakes.CLUSTER, region=fakes.REGION, table_name=TABLE)
    aws = AwsClients(ec2=ec2, ssm=fakes.FakeService(), eks=fakes.FakeService(), dynamodb=dynamodb,
                     iam=fakes.FakeService())
    return Runtime(settings, aws, fakes.RecordingApi({}))


def run(rt: Runtime | None, sqs_batch: dict[str, Any]) -> dict[str, Any]:
    built: list[bool] = []

    def runtime() -> Runtime:
        built.append(True)
        assert rt is not None, "a runtime was built for a batch with nothing to act on"
        return rt

    settings = rt.settings if rt else Settings(cluster_name=fakes.CLUSTER, region=fakes.REGION, table_name=None)
    # Through the use-case's entry point, as the handler calls it: an SQS batch is recognised by its shape.
    response = entry.process(sqs_batch, settings, runtime, account=ACCOUNT, deadline_monotonic=0.0)
    json.dumps(response)  # plain JSON, as Lambda returns it
    return response


def test_unreadable_bodies_are_dropped_not_retried_and_need_no_clients() -> None:
    response = run(None, batch("Test message.", [1], {"detail-type": "x"}, warning(I1) | {"account": "999"}))
    # Nothing to retry: a body that cannot be read now never will be (Karpenter deletes such a message).
    assert response[interrupt_batch.FAILURES] == []
    assert [e["messageId"] for e in response[interrupt_batch.EVENTS]] == ["m0", "m1", "m2", "m3"]
    reasons = [e["ignored"] for e in response[interrupt_batch.EVENTS]]
    assert reasons[0].startswith("the body is not JSON")
    assert reasons[1] == "the body is JSON but not an object (got list)"
    assert reasons[2] == "missing or non-string field 'source'"
    assert reasons[3] == "event for account 999, this deployment is in 123456789012"


def test_a_throttled_joint_act_fails_every_record_of_it_and_the_retry_runs(dynamodb: Any) -> None:
    ec2 = ThrottledEc2([fakes.instance(I1, FOREIGN), fakes.instance(I2, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    sqs_batch = batch(warning(I1), "not json", warning(I2))
    failed = run(rt, sqs_batch)
    # Only the records the joint act held are returned to the queue; the unreadable one is dropped.
    assert failed[interrupt_batch.FAILURES] == [{"itemIdentifier": "m0"}, {"itemIdentifier": "m2"}]
    assert dynamodb.scan(TableName=TABLE)["Items"] == []  # in-progress records released

    ec2.healthy = True
    retried = run(rt, sqs_batch)
    assert retried[interrupt_batch.FAILURES] == []
    summaries = {e["messageId"]: e for e in retried[interrupt_batch.EVENTS]}
    assert [r["action"] for r in summaries["m0"]["instances"] + summaries["m2"]["instances"]] == [
        interrupting.IGNORED, interrupting.IGNORED]
    assert not summaries["m0"].get("duplicate")
    assert rt.api.writes == []  # foreign instances: nothing touched


class RecordingSqs:
    """ChangeMessageVisibilityBatch as SQS answers it, each entry recorded."""

    def __init__(self) -> None:
        self.meta = SimpleNamespace(endpoint_url="https://sqs.us-east-1.amazonaws.com")
        self.changed: list[tuple[str, int]] = []

    def change_message_visibility_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.changed += [(e["ReceiptHandle"], e["VisibilityTimeout"]) for e in Entries]
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}


def test_a_failed_record_comes_back_soon_but_one_another_invocation_holds_waits_out_the_visibility(
    dynamodb: Any,
) -> None:
    """#27.3: a record that failed (throttled) is made visible again in RETRY_VISIBILITY_SECONDS, so its
    retries fit in the spot notice; a record whose event another invocation is still acting on fails too,
    but keeps the full visibility timeout, so it does not spend its receives (and reach the dead-letter
    queue) while that invocation finishes."""
    from nodescale.aws.idempotency import EventRecords
    from nodescale.interruption import queue

    ec2 = ThrottledEc2([fakes.instance(I1, FOREIGN), fakes.instance(I2, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    sqs = RecordingSqs()
    rt.aws.sqs = sqs
    held, throttled = warning(I1), warning(I2)
    EventRecords(TABLE, dynamodb).claim(dict(held))  # another invocation is acting on it: in progress
    sqs_batch = batch(held, throttled)
    for i, record in enumerate(sqs_batch["Records"]):
        record["receiptHandle"] = f"receipt-m{i}"

    response = run(rt, sqs_batch)

    assert response[interrupt_batch.FAILURES] == [{"itemIdentifier": "m0"}, {"itemIdentifier": "m1"}]
    assert sqs.changed == [("receipt-m1", queue.RETRY_VISIBILITY_SECONDS)]


def test_events_handled_already_are_answered_from_their_records_whichever_path_handled_them(dynamodb: Any) -> None:
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN), fakes.instance(I2, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    first, second = warning(I1), warning(I2)
    # `second` came once directly (the EventBridge path, e.g. `nodescale replay`).
    direct = once_per_event(lambda e: {"eventId": e["id"], "via": "direct"}, dict(second), table=TABLE,
                            dynamodb=dynamodb)
    assert direct == {"eventId": second["id"], "via": "direct"}

    one = run(rt, batch(first, second))
    describes = len(ec2.calls)
    again = run(rt, batch(first, first))

    by_message = {e["messageId"]: e for e in one[interrupt_batch.EVENTS]}
    assert by_message["m1"] == {"messageId": "m1", "eventId": second["id"], "via": "direct", "duplicate": True}
    assert not by_message["m0"].get("duplicate")
    # The repeat batch (the same event twice in it) is answered from the record: EC2 is not asked again.
    assert len(ec2.calls) == describes
    assert [e.get("duplicate") for e in again[interrupt_batch.EVENTS]] == [True, True]
    assert again[interrupt_batch.EVENTS][0]["instances"] == by_message["m0"]["instances"]
    assert one[interrupt_batch.FAILURES] == again[interrupt_batch.FAILURES] == []


def test_a_copy_of_an_event_in_the_same_batch_is_acted_on_once(dynamodb: Any) -> None:
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    event = warning(I1)
    response = run(rt, batch(event, dict(event)))
    first, copy = response[interrupt_batch.EVENTS]
    assert copy == {**first, "messageId": "m1", "duplicate": True}
    assert [name for name, _ in ec2.calls] == ["describe_instances"]  # one ownership check


class ShiftsThrottled:
    """The shared table, throttling every write of a zonal shift's record (the others go through)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def update_item(self, **kwargs: Any) -> Any:
        if kwargs["Key"]["pk"]["S"].startswith("zonalshift"):
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}},
                              "UpdateItem")
        return self.client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_zonal_shift_that_cannot_be_recorded_fails_only_its_own_record(dynamodb: Any) -> None:
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, ShiftsThrottled(dynamodb))
    shift = json.loads((EVENTS / "zonal-autoshift-in-progress.json").read_text())
    response = run(rt, batch(shift, warning(I1)))
    assert response[interrupt_batch.FAILURES] == [{"itemIdentifier": "m0"}]
    assert response[interrupt_batch.EVENTS][1]["instances"][0]["action"] == interrupting.IGNORED


def test_two_events_about_one_instance_act_on_it_once_the_going_away_one_first(dynamodb: Any) -> None:
    # A rebalance recommendation and then the spot warning for the same instance in one batch: one node, so
    # one action (the warning's), and its pods would be planned once.
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    text = (EVENTS / "rebalance-recommendation.json").read_text().replace("i-0a1b2c3d4e5f60718", I1)
    rebalance, spot = {**json.loads(text), "id": "rebalance-1"}, warning(I1)
    response = run(rt, batch(rebalance, spot))
    (first,), (second,) = (e["instances"] for e in response[interrupt_batch.EVENTS])
    assert first["reason"] == f"acted on with event {spot['id']} of the same batch"
    assert second["action"] == interrupting.IGNORED  # the warning's own outcome: not this cluster's instance
    (describe,) = ec2.calls
    assert describe[1]["Filters"][0]["Values"] == [I1]
