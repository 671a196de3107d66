"""What starts the functions: EC2, Health and ARC zonal shift events for interruption (through an SQS queue the
function reads in batches), a one-minute schedule for the others."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
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
# The interruption function's role on its queue: Lambda's event source mapping polls with the first three,
# the function calls the last for the records it reports failed.
CONSUME_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility")


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
    encryption, TLS only. Its visibility timeout is six times the function's timeout (AWS's advice for an event
    source mapping; Lambda refuses a queue whose timeout is below the function's), and a message that keeps
    failing moves to the dead-letter queue after MAX_RECEIVE_COUNT receives. The function makes a record it
    reports failed visible again in seconds (``nodescale/aws/queue_retry.py``), so the retries fit in a spot
    notice; the queue keeps a message long enough for every receive to end at the full visibility timeout (an
    invocation that crashed) and still reach the dead-letter queue (``queue.retention_seconds``), where
    Karpenter's 300 s let a retried record expire unseen."""
    return sqs.Queue(
        scope,
        "InterruptionQueue",
        queue_name=interruption_queue_name(cluster),
        retention_period=Duration.seconds(interruption_queue.retention_seconds(function_timeout_seconds)),
        visibility_timeout=Duration.seconds(interruption_queue.visibility_timeout_seconds(function_timeout_seconds)),
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
    (ReportBatchItemFailures), so one bad record does not return a whole batch to the queue. Its role holds what
    the mapping polls with (receive, delete, the queue's attributes) and what the function shortens a failed
    record's visibility with; not GetQueueUrl (grant_consume_messages' extra), which nothing calls."""
    queue.grant(function, *CONSUME_ACTIONS)
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
    queue.add_to_resource_policy(only_rules_send(queue, rules))
    return rules


def only_rules_send(queue: sqs.IQueue, rules: list[events.Rule]) -> iam.PolicyStatement:
    """Deny sending to the queue to everyone but these rules: a message on it is a spot warning acted on, and an
    identity policy granting sqs:SendMessage (an admin's, a CI role's ``sqs:*``) must not be able to forge one.
    EventBridge delivers with ``aws:SourceArn`` set to its rule; a direct SendMessage has no such key, and a
    negated condition operator holds when its key is absent, so it is denied. An explicit Deny in the queue's
    policy wins over any Allow, whoever calls. (It also refuses a redrive from the dead-letter queue back into
    this queue: replay a dead letter with ``nodescale replay`` instead.)"""
    return iam.PolicyStatement(
        sid="OnlyTheStacksRulesSend",
        effect=iam.Effect.DENY,
        principals=[iam.AnyPrincipal()],
        actions=["sqs:SendMessage"],
        resources=[queue.queue_arn],
        conditions={"ArnNotEquals": {"aws:SourceArn": [rule.rule_arn for rule in rules]}},
    )


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
