"""What starts the functions: EC2, Health and ARC zonal shift events for interruption (through an SQS queue the
function reads in batches), a one-minute schedule for the others."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.functions import SCHEDULED_MAX_EVENT_AGE, SCHEDULED_RETRY_ATTEMPTS
from infra.names import physical_name
from nodescale.interruption import queue as interruption_queue
from nodescale.interruption.parsers import zonal_shift
from nodescale.names import interruption_queue_name

# EventBridge gives up on delivering an interruption event after this many tries or this age, and
# then puts it in the dead-letter queue.
EVENT_RETRY_ATTEMPTS = 4
EVENT_MAX_AGE = Duration.minutes(15)
SCHEDULE_RATE = Duration.minutes(1)


@dataclass(frozen=True)
class EventRuleSpec:
    suffix: str  # of the rule's name
    description: str
    source: str
    detail_type: str | tuple[str, ...]
    detail: dict[str, Any] | None = None

    @property
    def detail_types(self) -> list[str]:
        return [self.detail_type] if isinstance(self.detail_type, str) else list(self.detail_type)


INTERRUPTION_RULES = (
    EventRuleSpec("spot-interruption", "EC2 Spot Instance Interruption Warning", "aws.ec2",
                  "EC2 Spot Instance Interruption Warning"),
    EventRuleSpec("rebalance", "EC2 Instance Rebalance Recommendation", "aws.ec2",
                  "EC2 Instance Rebalance Recommendation"),
    EventRuleSpec("state-change", "EC2 instances stopping or terminating", "aws.ec2",
                  "EC2 Instance State-change Notification",
                  {"state": ["stopping", "stopped", "shutting-down", "terminated"]}),
    EventRuleSpec("scheduled-change", "AWS Health scheduled changes for EC2", "aws.health", "AWS Health Event",
                  {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]}),
    # The detail-types the parser reads (the layer's list, so the rule and the parser cannot drift);
    # practice runs are not among them (see nodescale/interruption/parsers/zonal_shift.py).
    EventRuleSpec("zonal-shift", "ARC zonal shifts and autoshifts (launches keep out of the zone)",
                  zonal_shift.SOURCE, tuple(zonal_shift.DETAIL_TYPES)),
    EventRuleSpec("reservation-interruption", "EC2 interruptible capacity reservation reclaimed", "aws.ec2",
                  "EC2 Capacity Reservation Instance Interruption Warning"),
)


def interruption_queue_for(
    scope: Construct, cluster: str, function_timeout_seconds: int, dead_letter_queue: sqs.IQueue
) -> sqs.Queue:
    """The queue every interruption rule targets, as Karpenter's KarpenterInterruptionQueue: SQS-managed
    encryption, TLS only, a message kept 5 minutes (a spot notice is two). Its visibility timeout is six times
    the function's timeout (AWS's advice for an event source mapping), and a message that keeps failing moves
    to the dead-letter queue after a few receives."""
    return sqs.Queue(
        scope,
        "InterruptionQueue",
        queue_name=interruption_queue_name(cluster),
        retention_period=Duration.seconds(interruption_queue.MESSAGE_RETENTION_SECONDS),
        visibility_timeout=Duration.seconds(interruption_queue.VISIBILITY_TIMEOUT_FACTOR * function_timeout_seconds),
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        dead_letter_queue=sqs.DeadLetterQueue(
            max_receive_count=interruption_queue.MAX_RECEIVE_COUNT, queue=dead_letter_queue
        ),
    )


def interruption_mapping(
    scope: Construct, function: lambda_.IFunction, queue: sqs.IQueue
) -> lambda_.EventSourceMapping:
    """The function reads the queue in batches (one world read each) and names the records to retry
    (ReportBatchItemFailures), so one bad record does not return a whole batch to the queue."""
    queue.grant_consume_messages(function)
    return lambda_.EventSourceMapping(
        scope,
        "InterruptionQueueMapping",
        target=function,
        event_source_arn=queue.queue_arn,
        batch_size=interruption_queue.BATCH_SIZE,
        max_batching_window=Duration.seconds(interruption_queue.MAX_BATCHING_WINDOW_SECONDS),
        report_batch_item_failures=True,
    )


def interruption_rules(
    scope: Construct, cluster: str, queue: sqs.IQueue, dead_letter_queue: sqs.IQueue
) -> list[events.Rule]:
    """One rule per event kind, each targeting the interruption queue; EventBridge's own retries and
    dead-letter queue cover a delivery to the queue that fails. Only these rules may send to it."""
    rules = []
    for spec in INTERRUPTION_RULES:
        pattern = events.EventPattern(source=[spec.source], detail_type=spec.detail_types, detail=spec.detail)
        rule = events.Rule(
            scope,
            f"{_camel(spec.suffix)}Rule",
            rule_name=physical_name(cluster, spec.suffix),
            description=f"nodescale ({cluster}): {spec.description}",
            event_pattern=pattern,
        )
        rule.add_target(
            targets.SqsQueue(
                queue,
                dead_letter_queue=dead_letter_queue,
                retry_attempts=EVENT_RETRY_ATTEMPTS,
                max_event_age=EVENT_MAX_AGE,
            )
        )
        rules.append(rule)
    return rules


def schedule_rule(scope: Construct, cluster: str, name: str, function: lambda_.IFunction) -> events.Rule:
    """Every minute; a tick that cannot be delivered or run at once is dropped, never queued up."""
    rule = events.Rule(
        scope,
        f"{_camel(name)}Schedule",
        rule_name=physical_name(cluster, f"{name}-tick"),
        description=f"nodescale ({cluster}): runs the {name} every minute",
        schedule=events.Schedule.rate(SCHEDULE_RATE),
    )
    rule.add_target(
        targets.LambdaFunction(function, retry_attempts=SCHEDULED_RETRY_ATTEMPTS, max_event_age=SCHEDULED_MAX_EVENT_AGE)
    )
    return rule


def _camel(text: str) -> str:
    return "".join(part.title() for part in text.split("-"))
