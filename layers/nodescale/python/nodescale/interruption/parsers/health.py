"""AWS Health Event: only an EC2 scheduledChange is acted on, for each instance it names, before its startTime."""

from __future__ import annotations

from collections.abc import Mapping

from ...model.instance import instance_id
from ..intents import Ignored, Intent, IntentAction, Kind, Parsed
from .base import Envelope, parse_time, shown, text

SOURCE = "aws.health"
DETAIL_TYPE = "AWS Health Event"


def parse(event: Envelope) -> Parsed:
    detail, event_id = event.detail, event.event_id
    service = detail.get("service")
    category = detail.get("eventTypeCategory")
    if service != "EC2":
        return Ignored(f"AWS Health event for service {shown(service)}, not EC2: not ours to act on", event_id)
    if category != "scheduledChange":
        return Ignored(f"AWS Health event of category {shown(category)}, only scheduledChange is acted on", event_id)
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        return Ignored("AWS Health event without a list detail.affectedEntities", event_id)
    ids = [iid for iid in map(_entity_instance, entities) if iid is not None]
    if not ids:
        return Ignored("AWS Health event names no EC2 instance in affectedEntities", event_id)
    start = parse_time(detail.get("startTime"))
    code = text(detail.get("eventTypeCode"))
    return [
        Intent(i, IntentAction.INTERRUPT, Kind.SCHEDULED_CHANGE, event_id, event.time, code, start)
        for i in dict.fromkeys(ids)
    ]


def _entity_instance(entity: object) -> str | None:
    return instance_id(entity.get("entityValue")) if isinstance(entity, Mapping) else None
