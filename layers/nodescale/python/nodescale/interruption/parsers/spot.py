"""EC2 Spot Instance Interruption Warning: the instance is reclaimed two minutes after the event."""

from __future__ import annotations

from datetime import timedelta

from ...model.instance import instance_id
from ..intents import Ignored, Intent, IntentAction, Kind, Parsed
from .base import Envelope, text

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Spot Instance Interruption Warning"
# EC2 acts two minutes after it sends the warning.
SPOT_NOTICE = timedelta(minutes=2)


def parse(event: Envelope) -> Parsed:
    iid = instance_id(event.detail.get("instance-id"))
    if iid is None:
        return Ignored("spot interruption warning without a valid detail.instance-id", event.event_id)
    deadline = None if event.time is None else event.time + SPOT_NOTICE
    action = text(event.detail.get("instance-action"))
    return [Intent(iid, IntentAction.INTERRUPT, Kind.SPOT_INTERRUPTION, event.event_id, event.time, action, deadline)]
