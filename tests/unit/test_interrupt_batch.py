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
from nodescale.aws.idempotency import Repeat, once_per_event
from nodescale.runtime import Runtime
from nodescale.settings import Settings
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt import handle as interrupting
from nodescale.usecases.interrupt.summary import BatchAnswer, EventSummary
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


def run(rt: Runtime | None, sqs_batch: dict[str, Any]) -> BatchAnswer:
    built: list[bool] = []

    def runtime() -> Runtime:
        built.append(True)
        assert rt is not None, "a runtime was built for a batch with nothing to act on"
        return rt

    settings = rt.settings if rt else Settings(cluster_name=fakes.CLUSTER, region=fakes.REGION, table_name=None)
    # Through the use-case's entry point, as the handler calls it: an SQS batch is recognised by its shape.
    response = entry.process(sqs_batch, settings, runtime, account=ACCOUNT, deadline_monotonic=0.0)
    assert isinstance(response, BatchAnswer)
    json.dumps(response.to_json())  # plain JSON, as Lambda returns it
    return response


def test_unreadable_bodies_are_dropped_not_retried_and_need_no_clients() -> None:
    response = run(None, batch("Test message.", [1], {"detail-type": "x"}, warning(I1) | {"account": "999"}))
    # Nothing to retry: a body that cannot be read now never will be (Karpenter deletes such a message).
    assert response.failures == ()
    assert [m for m, _ in response.records] == ["m0", "m1", "m2", "m3"]
    reasons = [a.ignored for _, a in response.records]
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
    assert failed.failures == ("m0", "m2")
    assert dynamodb.scan(TableName=TABLE)["Items"] == []  # in-progress records released

    ec2.healthy = True
    retried = run(rt, sqs_batch)
    assert retried.failures == ()
    summaries = dict(retried.records)
    assert [r.action for r in summaries["m0"].instances + summaries["m2"].instances] == [
        interrupting.IGNORED, interrupting.IGNORED]
    assert isinstance(summaries["m0"], EventSummary)  # acted on now, not a repeat
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

    assert response.failures == ("m0", "m1")
    assert sqs.changed == [("receipt-m1", queue.RETRY_VISIBILITY_SECONDS)]


def test_events_handled_already_are_answered_from_their_records_whichever_path_handled_them(dynamodb: Any) -> None:
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN), fakes.instance(I2, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    first, second = warning(I1), warning(I2)
    # `second` came once directly (the EventBridge path, e.g. `nodescale replay`).
    direct = once_per_event(lambda e: Repeat({"eventId": e["id"], "via": "direct"}), dict(second), table=TABLE,
                            dynamodb=dynamodb)
    assert direct.to_json() == {"eventId": second["id"], "via": "direct", "duplicate": True}

    one = run(rt, batch(first, second))
    describes = len(ec2.calls)
    again = run(rt, batch(first, first))

    by_message = dict(one.records)
    # The stored document as it was written (here by another caller's summary), never parsed strictly (#29.3).
    assert by_message["m1"] == Repeat({"eventId": second["id"], "via": "direct", "duplicate": True})
    assert isinstance(by_message["m0"], EventSummary)
    # The repeat batch (the same event twice in it) is answered from the record: nothing is acted on again;
    # EC2 is asked whose instance it is once, while the records are claimed (#33.3: the check no longer
    # waits for the claims, so it cannot know the event was handled).
    assert ec2.calls[describes:] == [("describe_instances", {"Filters": [{"Name": "instance-id", "Values": [I1]}]})]
    assert [type(a) for _, a in again.records] == [Repeat, Repeat]
    assert again.records[0][1] == Repeat(by_message["m0"].to_json())
    assert one.failures == again.failures == ()


def test_a_copy_of_an_event_in_the_same_batch_is_acted_on_once(dynamodb: Any) -> None:
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    event = warning(I1)
    response = run(rt, batch(event, dict(event)))
    (_, first), (_, copy) = response.records
    assert isinstance(first, EventSummary)
    assert copy == Repeat(first.to_json())
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
    assert response.failures == ("m0",)
    assert response.records[1][1].instances[0].action == interrupting.IGNORED


def test_two_events_about_one_instance_act_on_it_once_the_going_away_one_first(dynamodb: Any) -> None:
    # A rebalance recommendation and then the spot warning for the same instance in one batch: one node, so
    # one action (the warning's), and its pods would be planned once.
    ec2 = fakes.FakeEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    text = (EVENTS / "rebalance-recommendation.json").read_text().replace("i-0a1b2c3d4e5f60718", I1)
    rebalance, spot = {**json.loads(text), "id": "rebalance-1"}, warning(I1)
    response = run(rt, batch(rebalance, spot))
    (first,), (second,) = (a.instances for _, a in response.records)
    assert first.reason == f"acted on with event {spot['id']} of the same batch"
    assert second.action == interrupting.IGNORED  # the warning's own outcome: not this cluster's instance
    (describe,) = ec2.calls
    assert describe[1]["Filters"][0]["Values"] == [I1]


def test_a_batch_answer_is_lambdas_partial_batch_response_with_each_records_answer_in_order(dynamodb: Any) -> None:
    """#29.3: the BatchAnswer's JSON, the function's contract, is exactly the document it always was: literal keys
    in their order, each record's answer after its messageId (a dropped body, an event acted on, a copy of it,
    a failed record)."""
    ec2 = ThrottledEc2([fakes.instance(I1, FOREIGN)])
    rt = runtime_with(ec2, dynamodb)
    event = warning(I1)
    acted = run(rt, batch("not json", event, dict(event)))
    ec2.healthy = True
    document = acted.to_json()
    assert list(document) == ["batchItemFailures", "events"]
    assert document["batchItemFailures"] == [{"itemIdentifier": "m1"}, {"itemIdentifier": "m2"}]
    dropped, failed, copy = document["events"]
    assert list(dropped) == ["messageId", "eventId", "detailType", "ignored", "instances"]
    assert dropped["eventId"] is None and dropped["detailType"] is None and dropped["instances"] == []
    assert failed == {"messageId": "m1", "eventId": event["id"], "failed": True}
    assert copy == {"messageId": "m2", "eventId": event["id"], "failed": True}

    handled = run(rt, batch(event, dict(event))).to_json()
    first, repeat = handled["events"]
    assert list(first) == ["messageId", "eventId", "detailType", "ignored", "instances", "seconds", "handledAt"]
    assert first["instances"] == [{"instanceId": I1, "kind": "SpotInterruption", "node": None, "action": "ignored",
                                   "reason": first["instances"][0]["reason"]}]
    assert list(repeat) == [*first, "duplicate"] and repeat == {**first, "messageId": "m1", "duplicate": True}
