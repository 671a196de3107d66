"""EC2 Instance Rebalance Recommendation: the spot instance is at elevated risk; acting on it is a NodePool's choice."""

from __future__ import annotations

from ...model.instance import instance_id
from ..intents import Ignored, Intent, IntentAction, Kind, Parsed
from .base import Envelope

SOURCE = "aws.ec2"
DETAIL_TYPE = "EC2 Instance Rebalance Recommendation"


def parse(event: Envelope) -> Parsed:
    iid = instance_id(event.detail.get("instance-id"))
    if iid is None:
        return Ignored("rebalance recommendation without a valid detail.instance-id", event.event_id)
    return [Intent(iid, IntentAction.REBALANCE_RISK, Kind.REBALANCE_RECOMMENDATION, event.event_id, event.time)]
