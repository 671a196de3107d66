"""What one EventBridge event asks of the interruption function: an ``Intent`` per instance, a
``ZoneShift`` for an Availability Zone, or ``Ignored``.

The enums' values are the strings the summaries, logs and metric dimensions have always carried, so
a value read from a summary compares equal to its member.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class IntentAction(StrEnum):
    """What an event asks for one instance."""

    INTERRUPT = "interrupt"  # the instance is going away: cordon, replace, drain, terminate
    REBALANCE_RISK = "rebalance"  # record; act only when the NodePool opts in
    NO_ACTION = "none"  # e.g. running/pending: the node is expected to register


class Kind(StrEnum):
    """The kind of event an intent came from (a metric dimension, and the node annotation's value)."""

    SPOT_INTERRUPTION = "SpotInterruption"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    INSTANCE_STATE_CHANGE = "InstanceStateChange"
    SCHEDULED_CHANGE = "ScheduledChange"
    CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruption"


@dataclass(frozen=True, slots=True)
class Intent:
    instance_id: str
    action: IntentAction
    kind: Kind
    event_id: str
    event_time: datetime | None
    detail: str = ""  # e.g. the new state, or the Health event type code
    deadline: datetime | None = None  # when the instance goes away, where the event says


@dataclass(frozen=True, slots=True)
class Ignored:
    """An event not acted on, with the reason a person reads in the logs and the summary."""

    reason: str
    event_id: str = ""


class ShiftKind(StrEnum):
    """Who shifted traffic away from a zone; each kind starts and ends on its own (an autoshift's end
    does not end an operator's manual shift of the same zone)."""

    AUTOSHIFT = "autoshift"  # AWS saw the zone impaired
    FIS_AUTOSHIFT = "fis-autoshift"  # an AWS FIS experiment started an autoshift
    MANUAL = "manual"  # StartZonalShift, by an operator


@dataclass(frozen=True, slots=True)
class ZoneShift:
    """An ARC zonal shift started (``active``) or ended for the Availability Zone ``zone_id`` (``use1-az1``)."""

    zone_id: str
    kind: ShiftKind
    active: bool
    event_id: str
    event_time: datetime | None
    resources: tuple[str, ...] = ()  # the shifted resources' identifiers; empty for an observer notification


Parsed = list[Intent] | ZoneShift | Ignored
