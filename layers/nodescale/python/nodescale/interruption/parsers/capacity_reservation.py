"""EC2 Capacity Reservation Instance Interruption Warning: the owner of an interruptible capacity
reservation takes its capacity back, and the instance running in it will be reclaimed (EventBridge schema
aws.ec2@EC2CapacityReservationInstanceInterruptionWarning; karpenter-provider-aws handles it as
``capacity_reservation_interrupted``, like a spot interruption: the node is replaced and drained)."""

from __future__ import annotations

from ...model.instance import instance_id
from ..intents import Ignored, Intent, IntentAction, Kind, Parsed
from .base import Envelope, text

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Capacity Reservation Instance Interruption Warning"


def parse(event: Envelope) -> Parsed:
    iid = instance_id(event.detail.get("instance-id"))
    if iid is None:
        return Ignored("capacity reservation interruption warning without a valid detail.instance-id", event.event_id)
    # The warning names no deadline: drained at once, as fast as the pods allow.
    action = text(event.detail.get("instance-action"))
    return [Intent(iid, IntentAction.INTERRUPT, Kind.CAPACITY_RESERVATION_INTERRUPTION, event.event_id, event.time,
                   action)]
