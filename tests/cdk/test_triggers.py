"""The EventBridge rules: exact patterns, the interruption queue as target (read by the function in batches),
DLQ, retries, event age."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.function_specs import INTERRUPTION
from nodescale.interruption import queue as interruption_queue
from sim.aws import seed
from tests.cdk.conftest import Synth

EXPECTED_PATTERNS = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
    "scheduled-change": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
    # The detail-types the ARC Developer Guide lists ("Using zonal autoshift with Amazon EventBridge"),
    # but for practice runs.
    "zonal-shift": {
        "source": ["aws.arc-zonal-shift"],
        "detail-type": ["Autoshift In Progress", "Autoshift Completed", "FIS Experiment Autoshift In Progress",
                        "FIS Experiment Autoshift Completed", "FIS Experiment Autoshift Canceled",
                        "Manual Shift Started", "Manual Shift Updated", "Manual Shift Canceled"],
    },
    "reservation-interruption": {
        "source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
}


def _rules_by_suffix(synth: Synth) -> dict[str, dict[str, Any]]:
    prefix = f"nodescale-{synth.stack.config.cluster_name}-"
    return {r["Properties"]["Name"].removeprefix(prefix): r["Properties"] for r in synth.resources("AWS::Events::Rule").values()}


@pytest.mark.parametrize("suffix", sorted(EXPECTED_PATTERNS))
def test_interruption_rule_pattern_and_target(default: Synth, suffix: str) -> None:
    rule = _rules_by_suffix(default)[suffix]
    assert rule["EventPattern"] == EXPECTED_PATTERNS[suffix]
    (target,) = rule["Targets"]
    # The queue, not the function: a wave of warnings is read in batches (one world read each).
    assert target["Arn"] == {"Fn::GetAtt": [default.logical_id(default.stack.interruption_queue), "Arn"]}
    assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [default.logical_id(default.stack.dead_letter_queue), "Arn"]}}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 4, "MaximumEventAgeInSeconds": 900}


def test_only_the_expected_event_rules_exist(default: Synth) -> None:
    rules = _rules_by_suffix(default)
    assert sorted(rules) == sorted([*EXPECTED_PATTERNS, "provisioner-tick", "disruption-tick"])


@pytest.mark.parametrize("name", ["provisioner", "disruption"])
def test_schedule_every_minute_drops_missed_ticks(default: Synth, name: str) -> None:
    rule = _rules_by_suffix(default)[f"{name}-tick"]
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    (target,) = rule["Targets"]
    function = getattr(default.stack, name)
    assert target["Arn"] == {"Fn::GetAtt": [default.logical_id(function), "Arn"]}
    # Dropped, not queued: no retry, the shortest event age EventBridge allows, no dead-letter queue.
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}
    assert "DeadLetterConfig" not in target
    # Lambda's own asynchronous queue must not hold a throttled tick either (reserved concurrency 1).
    default.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": default.logical_id(function)}, "MaximumRetryAttempts": 0,
         "MaximumEventAgeInSeconds": 60},
    )


def test_interruption_failures_land_in_the_dead_letter_queue(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": default.logical_id(default.stack.interruption)},
            "MaximumRetryAttempts": 2,
            "MaximumEventAgeInSeconds": 900,
            "DestinationConfig": {"OnFailure": {"Destination": {
                "Fn::GetAtt": [default.logical_id(default.stack.dead_letter_queue), "Arn"]}}},
        },
    )


def test_eventbridge_may_write_to_the_dead_letter_queue(default: Synth) -> None:
    default.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {"PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Action": "sqs:SendMessage", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}})])}},
    )
    default.template.has_resource_properties(
        "AWS::SQS::Queue", {"MessageRetentionPeriod": 1209600, "SqsManagedSseEnabled": True}
    )


def test_the_interruption_queue_is_encrypted_short_lived_and_redrives_to_the_dead_letter_queue(default: Synth) -> None:
    # As Karpenter's KarpenterInterruptionQueue (aws/karpenter-provider-aws, website "cloudformation.yaml":
    # MessageRetentionPeriod 300, SqsManagedSseEnabled true) plus AWS's advice for an event source mapping.
    queue = default.json["Resources"][default.logical_id(default.stack.interruption_queue)]["Properties"]
    assert queue["QueueName"] == "nodescale-demo-cluster-interruption"
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["VisibilityTimeout"] >= 6 * INTERRUPTION.timeout_for(default.stack.config)
    assert INTERRUPTION.timeout_seconds == seed.INTERRUPTION_TIMEOUT_SECONDS  # sim's queue is the stack's
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [default.logical_id(default.stack.dead_letter_queue), "Arn"]},
        "maxReceiveCount": interruption_queue.MAX_RECEIVE_COUNT,
    }


def _queue_policy(synth: Synth, queue: Any) -> list[dict[str, Any]]:
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        if {"Ref": synth.logical_id(queue)} in policy["Properties"]["Queues"]:
            return policy["Properties"]["PolicyDocument"]["Statement"]
    raise AssertionError("no policy on the queue")


def test_only_the_interruption_rules_may_send_to_the_queue_and_only_over_tls(default: Synth) -> None:
    statements = _queue_policy(default, default.stack.interruption_queue)
    (tls,) = [s for s in statements if s["Effect"] == "Deny" and "aws:SecureTransport" in json.dumps(s)]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    sends = [s for s in statements if s["Effect"] == "Allow"]
    assert {s["Principal"]["Service"] for s in sends} == {"events.amazonaws.com"}
    assert all("sqs:SendMessage" in s["Action"] and "sqs:ReceiveMessage" not in s["Action"] for s in sends)
    sources = {json_key(s["Condition"]["ArnEquals"]["aws:SourceArn"]) for s in sends}
    rules = {json_key({"Fn::GetAtt": [logical, "Arn"]})
             for logical, rule in default.resources("AWS::Events::Rule").items() if "EventPattern" in rule["Properties"]}
    assert sources == rules and len(rules) == len(EXPECTED_PATTERNS)


def json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_the_function_reads_the_queue_in_batches_and_reports_failed_records(default: Synth) -> None:
    _, mapping = default.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["FunctionName"] == {"Ref": default.logical_id(default.stack.interruption)}
    assert props["EventSourceArn"] == {"Fn::GetAtt": [default.logical_id(default.stack.interruption_queue), "Arn"]}
    assert props["BatchSize"] == interruption_queue.BATCH_SIZE == 100
    assert props["MaximumBatchingWindowInSeconds"] == interruption_queue.MAX_BATCHING_WINDOW_SECONDS
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # Removed before the cleanup drains the cluster, with the rules: no interruption run starts meanwhile.
    cleanup = default.logical_id(default.stack.cleanup.resource)
    assert cleanup in mapping.get("DependsOn", [])


@pytest.mark.parametrize("name", ["default", "full"])
def test_a_failed_record_is_retried_and_reaches_the_dead_letter_queue_before_it_expires(
    name: str, request: pytest.FixtureRequest
) -> None:
    """#27.3: the queue kept a message 300 s and hid a received one 900 s, so a record the function named as a
    failure expired before its next receive and never reached the dead-letter queue. Now every receive may end at
    the full visibility timeout (a crash) and the message still has a receive left to be moved; Lambda accepts
    the queue (its visibility timeout is not below the function's timeout)."""
    synth: Synth = request.getfixturevalue(name)
    queue = synth.json["Resources"][synth.logical_id(synth.stack.interruption_queue)]["Properties"]
    timeout = synth.json["Resources"][synth.logical_id(synth.stack.interruption)]["Properties"]["Timeout"]
    receives = queue["RedrivePolicy"]["maxReceiveCount"]
    assert queue["VisibilityTimeout"] >= timeout
    assert queue["MessageRetentionPeriod"] > receives * queue["VisibilityTimeout"]
    assert queue["MessageRetentionPeriod"] <= 14 * 24 * 3600
    # The function may shorten a failed record's visibility, on this queue only, and holds nothing it never calls.
    statements = [s for p in synth.resources("AWS::IAM::Policy").values()
                  for s in p["Properties"]["PolicyDocument"]["Statement"]
                  if json.dumps(s["Resource"]) == json.dumps(
                      {"Fn::GetAtt": [synth.logical_id(synth.stack.interruption_queue), "Arn"]})]
    granted = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert granted == {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                       "sqs:ChangeMessageVisibility"}


def test_every_sender_but_the_stacks_rules_is_denied(default: Synth) -> None:
    """#27.8: the queue policy allowed EventBridge but denied no one, so any principal of the account with
    sqs:SendMessage could forge a spot warning. A Deny for every principal unless aws:SourceArn is one of the
    interruption rules: a direct SendMessage carries no aws:SourceArn, and a negated operator holds then."""
    statements = _queue_policy(default, default.stack.interruption_queue)
    (deny,) = [s for s in statements if s["Effect"] == "Deny" and "aws:SourceArn" in json.dumps(s)]
    assert deny["Principal"] == {"AWS": "*"}
    assert deny["Action"] == "sqs:SendMessage"
    assert deny["Resource"] == {"Fn::GetAtt": [default.logical_id(default.stack.interruption_queue), "Arn"]}
    (operator,) = deny["Condition"]
    assert operator == "ArnNotEquals"  # not ...IfExists: an absent key must deny
    sources = {json_key(a) for a in deny["Condition"][operator]["aws:SourceArn"]}
    rules = {json_key({"Fn::GetAtt": [logical, "Arn"]})
             for logical, rule in default.resources("AWS::Events::Rule").items() if "EventPattern" in rule["Properties"]}
    assert sources == rules and len(rules) == len(EXPECTED_PATTERNS)
