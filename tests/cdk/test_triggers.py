"""The EventBridge rules: exact patterns, the interruption function as target, DLQ, retries, event age."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

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
    assert target["Arn"] == {"Fn::GetAtt": [default.logical_id(default.stack.interruption), "Arn"]}
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
