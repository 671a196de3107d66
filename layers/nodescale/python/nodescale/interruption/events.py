"""EventBridge events -> intents. Pure: no I/O, never raises on bad input.

Every event the interruption function can receive becomes either a list of per-instance intents
or one ``Ignored`` with a reason a person can read in the logs. Malformed input is data too: it is
ignored with its reason, so a bad event is dropped rather than retried forever.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH = "AWS Health Event"

# What each intent asks of the function.
INTERRUPT = "interrupt"  # the instance is going away: cordon, replace, drain, terminate
REBALANCE_RISK = "rebalance"  # record; act only when the NodePool opts in
NO_ACTION = "none"  # e.g. running/pending: the node is expected to register

GOING_AWAY_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
HARMLESS_STATES = frozenset({"pending", "running"})

# EventBridge caps an event at 256 KB; anything larger did not come from it.
MAX_EVENT_BYTES = 256 * 1024
# EC2 acts two minutes after it sends the spot interruption warning.
SPOT_NOTICE = timedelta(minutes=2)
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


@dataclass(frozen=True, slots=True)
class Intent:
    instance_id: str
    action: str  # INTERRUPT | REBALANCE_RISK | NO_ACTION
    kind: str  # SpotInterruption | InstanceStateChange | ScheduledChange | RebalanceRecommendation
    event_id: str
    event_time: datetime | None
    detail: str = ""  # e.g. the new state, or the Health event type code
    deadline: datetime | None = None  # when the instance goes away, where the event says


@dataclass(frozen=True, slots=True)
class Ignored:
    reason: str
    event_id: str = ""


def parse(event: object, account: str | None = None, region: str | None = None) -> list[Intent] | Ignored:
    """Turn one EventBridge event into intents; ``account``/``region`` are this deployment's own."""
    if not isinstance(event, Mapping):
        return Ignored(f"not an EventBridge event: expected a JSON object, got {type(event).__name__}")
    try:
        size = len(json.dumps(event, default=str))
    except (TypeError, ValueError):
        return Ignored("not an EventBridge event: not serializable as JSON")
    if size > MAX_EVENT_BYTES:
        return Ignored(f"event of {size} bytes is larger than EventBridge's 256 KB limit")
    ev = EventBridgeEvent(dict(event))
    event_id = _str(event.get("id"))
    for field in ("detail-type", "source", "account", "region"):
        if not isinstance(event.get(field), str) or not event.get(field):
            return Ignored(f"missing or non-string field {field!r}", event_id)
    if not isinstance(event.get("detail"), Mapping):
        return Ignored("missing or non-object field 'detail'", event_id)
    if account and ev.account != account:
        return Ignored(f"event for account {ev.account}, this deployment is in {account}", event_id)
    if region and ev.region != region:
        return Ignored(f"event for region {ev.region}, this deployment is in {region}", event_id)
    when = _parse_time(event.get("time"))
    detail_type = ev.detail_type
    detail = ev.detail
    if detail_type == SPOT_WARNING:
        if ev.source != "aws.ec2":
            return Ignored(f"{detail_type} from source {ev.source!r}, expected aws.ec2", event_id)
        iid = _instance_id(detail)
        if iid is None:
            return Ignored("spot interruption warning without a valid detail.instance-id", event_id)
        deadline = None if when is None else when + SPOT_NOTICE
        return [Intent(iid, INTERRUPT, "SpotInterruption", event_id, when, _str(detail.get("instance-action")), deadline)]
    if detail_type == REBALANCE:
        if ev.source != "aws.ec2":
            return Ignored(f"{detail_type} from source {ev.source!r}, expected aws.ec2", event_id)
        iid = _instance_id(detail)
        if iid is None:
            return Ignored("rebalance recommendation without a valid detail.instance-id", event_id)
        return [Intent(iid, REBALANCE_RISK, "RebalanceRecommendation", event_id, when)]
    if detail_type == STATE_CHANGE:
        if ev.source != "aws.ec2":
            return Ignored(f"{detail_type} from source {ev.source!r}, expected aws.ec2", event_id)
        iid = _instance_id(detail)
        state = detail.get("state")
        if iid is None:
            return Ignored("state-change notification without a valid detail.instance-id", event_id)
        if not isinstance(state, str):
            return Ignored("state-change notification without a string detail.state", event_id)
        if state in GOING_AWAY_STATES:
            return [Intent(iid, INTERRUPT, "InstanceStateChange", event_id, when, state)]
        if state in HARMLESS_STATES:
            return [Intent(iid, NO_ACTION, "InstanceStateChange", event_id, when, state)]
        return Ignored(f"unknown instance state {state!r}", event_id)
    if detail_type == HEALTH:
        return _health(ev, detail, event_id, when)
    return Ignored(f"unknown detail-type {detail_type!r}", event_id)


def _health(ev: EventBridgeEvent, detail: Mapping, event_id: str, when: datetime | None) -> list[Intent] | Ignored:
    if ev.source != "aws.health":
        return Ignored(f"AWS Health Event from source {ev.source!r}, expected aws.health", event_id)
    service = detail.get("service")
    category = detail.get("eventTypeCategory")
    if service != "EC2":
        return Ignored(f"AWS Health event for service {service!r}, not EC2: not ours to act on", event_id)
    if category != "scheduledChange":
        return Ignored(f"AWS Health event of category {category!r}, only scheduledChange is acted on", event_id)
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        return Ignored("AWS Health event without a list detail.affectedEntities", event_id)
    ids = []
    for entity in entities:
        value = entity.get("entityValue") if isinstance(entity, Mapping) else None
        if isinstance(value, str) and _INSTANCE_ID.match(value):
            ids.append(value)
    if not ids:
        return Ignored("AWS Health event names no EC2 instance in affectedEntities", event_id)
    start = _parse_time(detail.get("startTime"))
    code = _str(detail.get("eventTypeCode"))
    return [Intent(i, INTERRUPT, "ScheduledChange", event_id, when, code, start) for i in dict.fromkeys(ids)]


def _instance_id(detail: Mapping) -> str | None:
    value = detail.get("instance-id")
    return value if isinstance(value, str) and _INSTANCE_ID.match(value) else None


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _parse_time(value: object) -> datetime | None:
    """EventBridge uses ISO 8601; AWS Health's startTime uses RFC 1123 ("Sat, 21 Nov 2026 15:10:09 GMT")."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

