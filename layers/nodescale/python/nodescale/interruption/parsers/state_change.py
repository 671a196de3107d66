"""EC2 Instance State-change Notification: going away (stopping ... terminated) or harmless (pending, running)."""

from __future__ import annotations

from ...model.instance import instance_id
from ..intents import Ignored, Intent, IntentAction, Kind, Parsed
from .base import Envelope, shown

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Instance State-change Notification"

GOING_AWAY_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
HARMLESS_STATES = frozenset({"pending", "running"})


def parse(event: Envelope) -> Parsed:
    iid = instance_id(event.detail.get("instance-id"))
    state = event.detail.get("state")
    if iid is None:
        return Ignored("state-change notification without a valid detail.instance-id", event.event_id)
    if not isinstance(state, str):
        return Ignored("state-change notification without a string detail.state", event.event_id)
    if state in GOING_AWAY_STATES:
        action = IntentAction.INTERRUPT
    elif state in HARMLESS_STATES:
        action = IntentAction.NO_ACTION
    else:
        return Ignored(f"unknown instance state {shown(state)}", event.event_id)
    return [Intent(iid, action, Kind.INSTANCE_STATE_CHANGE, event.event_id, event.time, state)]
