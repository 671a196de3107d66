"""What the interruption function did with an event, or with an SQS batch of them, as data.

    EventSummary      one event: acted on (its InstanceReports), a zonal shift recorded, or ignored with why
    Repeat            an event answered from its idempotency record (``aws.idempotency``): the stored document
    FailedRecord      an SQS record whose handling raised (returned to the queue)
    BatchAnswer       an SQS batch: Lambda's partial batch response and each record's answer
    ``to_json()``     each one's JSON document (camelCase keys): the Lambda's answer and `nodescale replay -o json`

Only the interruption handler and the command line serialize an answer (and the idempotency record stores
one); the use-case hands the data back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...aws.idempotency import Repeat
from ...interruption.intents import ShiftKind
from .actions import InstanceReport

# A batch answer's keys: Lambda reads FAILURES (its partial batch response) and ignores EVENTS.
FAILURES = "batchItemFailures"
EVENTS = "events"

@dataclass(frozen=True)
class ZonalShiftRecord:
    """An ARC zonal shift or autoshift, recorded in the shared table."""

    zone_id: str
    zone: str | None  # the zone's name in this account, None when EC2 did not say
    kind: ShiftKind
    shifted_away: bool
    # False: an event of this kind newer than this one is recorded already, and stands.
    recorded: bool
    until: str | None  # when the shift ends at the latest (a timestamp), None when it ended

    def to_json(self) -> dict[str, Any]:
        return {"zoneId": self.zone_id, "zone": self.zone, "kind": str(self.kind), "shiftedAway": self.shifted_away,
                "recorded": self.recorded, "until": self.until}


@dataclass(frozen=True)
class EventSummary:
    """One event handled now: ``ignored`` says why nothing was done; else its instances' reports, or the zonal
    shift it recorded. ``seconds`` and ``handled_at`` are set once it was acted on (a repeat of the event is
    answered with this summary, ``handled_at`` included: see ``aws.idempotency``)."""

    event_id: str | None
    detail_type: str | None
    ignored: str | None = None
    instances: tuple[InstanceReport, ...] = ()
    zonal_shift: ZonalShiftRecord | None = None
    seconds: float | None = None
    handled_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"eventId": self.event_id, "detailType": self.detail_type, "ignored": self.ignored,
                               "instances": [r.to_json() for r in self.instances]}
        if self.zonal_shift is not None:
            out["zonalShift"] = self.zonal_shift.to_json()
        if self.seconds is not None:
            out["seconds"] = self.seconds
        if self.handled_at is not None:
            out["handledAt"] = self.handled_at
        return out


@dataclass(frozen=True)
class FailedRecord:
    """A record whose handling raised: Lambda hands it over again."""

    event_id: Any  # the event's "id" as it came (any JSON value)

    def to_json(self) -> dict[str, Any]:
        return {"eventId": self.event_id, "failed": True}


EventAnswer = EventSummary | Repeat
RecordAnswer = EventSummary | Repeat | FailedRecord


@dataclass(frozen=True)
class BatchAnswer:
    """An SQS batch handled: the records to retry (message ids) and each record's answer, in order."""

    failures: tuple[str, ...] = ()
    records: tuple[tuple[str, RecordAnswer], ...] = field(default_factory=tuple)  # (message id, answer)

    def to_json(self) -> dict[str, Any]:
        # The per-record answers ride along, for the logs, the tests and the bench.
        return {FAILURES: [{"itemIdentifier": m} for m in self.failures],
                EVENTS: [{"messageId": m, **a.to_json()} for m, a in self.records]}
