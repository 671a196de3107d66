"""EventBridge as sim runs it in the moto child: AWS services put events on the default bus, and a rule's
delivery to an SQS queue is held to the queue's resource policy.

moto delivers a rule's events to an SQS target in-process, with no policy check. AWS sends as the service
principal events.amazonaws.com with `aws:SourceArn` set to the rule and `aws:SourceAccount` to its account
("Using resource-based policies for Amazon EventBridge: Amazon SQS permissions"); the queue's policy decides, and
a delivery it refuses never arrives (EventBridge retries it, then gives up or uses the target's dead-letter
queue). Here sim's IAM evaluator decides each delivery; a refused one is logged and counted, never sent.
A PutEvents entry with a source AWS reserves (`aws.*`) fails as AWS fails it: only AWS services emit those.

Two control routes (sim's, not AWS's; sim's proxy passes /sim/v1/ to moto without IAM):
- POST /sim/v1/aws-events {"events": [event, ...]}: what an AWS service (EC2, Health) does. Each event is the
  envelope EventBridge delivers (source, detail-type, detail, id, time...); every enabled rule of the default bus
  whose pattern matches it delivers it, as it is, to its SQS targets.
- POST /sim/v1/rule-deliveries {"rule": name, "bodies": [text, ...]}: that rule's delivery of these bodies, as
  they are, to its SQS targets: for a test that needs a body no AWS service emits (a poison record).
Both answer {"delivered": n, "refused": [reason, ...]}.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from sim.aws import iam_policy
from sim.aws.constants import REGION

log = logging.getLogger("sim.aws.eventbridge")

EVENTS_PRINCIPAL = "events.amazonaws.com"
REFUSED_SOURCE = ("NotAuthorizedForSourceException", "Not authorized for the source.")
_LOCK = threading.Lock()
refused: list[str] = []  # every delivery a queue's policy refused, newest last


def delivery_decision(rule_arn: str, rule_account: str, queue_arn: str, policy: Any) -> iam_policy.Decision:
    """The queue's policy on the rule's delivery: EventBridge's request, as AWS forms it."""
    document = json.loads(policy) if isinstance(policy, str) else policy
    statements = iam_policy.statements_of(document)
    context = iam_policy.context_of({"aws:SourceArn": rule_arn, "aws:SourceAccount": rule_account,
                                     "aws:SecureTransport": "true", "aws:PrincipalServiceName": EVENTS_PRINCIPAL})
    return iam_policy.evaluate_with_resource_policy([], statements, "sqs:SendMessage", queue_arn, context,
                                                   EVENTS_PRINCIPAL, queue_arn.split(":")[4])


def _deliver(rule: Any, queue_name: str, send: Callable[[], None]) -> bool:
    from moto.sqs import sqs_backends

    queue = sqs_backends[rule.account_id][rule.region_name].get_queue(queue_name)
    decision = delivery_decision(rule.arn, rule.account_id, queue.queue_arn, queue.policy)
    if not decision.allowed:
        reason = f"{rule.arn} -> {queue.queue_arn}: {decision.verdict} ({decision.policy} {decision.statement})"
        log.warning("EventBridge delivery refused by the queue's policy: %s", reason)
        with _LOCK:
            refused.append(reason)
        return False
    send()
    return True


def install() -> None:
    """Hold moto's rule deliveries to SQS to the queue's policy; refuse PutEvents entries with AWS's sources."""
    from moto.events.models import EventsBackend, Rule

    original_send = Rule._send_to_sqs_queue

    def send_to_sqs_queue(self: Any, resource_id: str, event: dict[str, Any], group_id: str | None = None) -> None:
        _deliver(self, resource_id, lambda: original_send(self, resource_id, event, group_id))

    Rule._send_to_sqs_queue = send_to_sqs_queue  # type: ignore[method-assign]
    original_put = EventsBackend.put_events

    def put_events(self: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answers: list[dict[str, Any] | None] = [None] * len(events)
        allowed = []
        for index, entry in enumerate(events):
            if str(entry.get("Source") or "").startswith("aws."):
                answers[index] = {"ErrorCode": REFUSED_SOURCE[0], "ErrorMessage": REFUSED_SOURCE[1]}
            else:
                allowed.append(index)
        done = iter(original_put(self, [events[i] for i in allowed]) if allowed else [])
        return [a if a is not None else next(done) for a in answers]

    EventsBackend.put_events = put_events  # type: ignore[method-assign]


def _rules() -> list[Any]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.events.models import events_backends

    bus = events_backends[DEFAULT_ACCOUNT_ID][REGION].describe_event_bus("default")
    return [r for r in bus.rules.values() if r.state == "ENABLED"]


def _queue_targets(rule: Any) -> list[str]:
    return [t["Arn"].split(":")[5] for t in rule.targets if t["Arn"].split(":")[2] == "sqs"]


def _send(rule: Any, queue_name: str, body: str) -> bool:
    from moto.sqs import sqs_backends

    backend = sqs_backends[rule.account_id][rule.region_name]
    return _deliver(rule, queue_name, lambda: backend.send_message(queue_name=queue_name, message_body=body))


def emit(payload: dict[str, Any]) -> dict[str, Any]:
    """POST /sim/v1/aws-events: events from an AWS service onto the default bus."""
    events = payload["events"]
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ValueError("'events' must be a list of event objects")
    before, delivered = len(refused), 0
    for event in events:
        for rule in _rules():
            if rule.event_pattern.matches_event(event):
                delivered += sum(_send(rule, queue, json.dumps(event)) for queue in _queue_targets(rule))
    return {"delivered": delivered, "refused": refused[before:]}


def deliver_as_rule(payload: dict[str, Any]) -> dict[str, Any]:
    """POST /sim/v1/rule-deliveries: one rule's delivery of bodies as they are."""
    name, bodies = payload["rule"], payload["bodies"]
    if not isinstance(bodies, list) or not all(isinstance(b, str) for b in bodies):
        raise ValueError("'bodies' must be a list of strings")
    (rule,) = [r for r in _rules() if r.name == name] or [None]
    if rule is None:
        raise KeyError(f"no enabled rule {name!r} on the default bus")
    before, delivered = len(refused), 0
    for body in bodies:
        delivered += sum(_send(rule, queue, body) for queue in _queue_targets(rule))
    return {"delivered": delivered, "refused": refused[before:]}
