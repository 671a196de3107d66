"""The interruption use-case for an SQS batch: many EventBridge events, acted on together with one world read.

    process_batch(batch, settings, runtime, account=..., deadline_monotonic=...) -> partial batch response

The interruption rules put their events in a queue and a Lambda event source mapping hands them over in
batches (``interruption/queue.py``), as Karpenter's interruption controller works through its queue. Per
record, in order:

- a body that is not JSON, or an event we do not read, is logged with its messageId and dropped (counted as
  ignored, never reported as a failure: it would fail the same way on every retry);
- a zonal shift is recorded on its own, as for a single event;
- an event id handled already (its idempotency record, whichever path wrote it) is answered from the record;
  a second copy of an event in the same batch is answered with the first's summary.

The intents of all the remaining events are acted on together (``interrupt.handle_events``): one ownership
check, every node cordoned first, ONE read of the world, one plan of replacements, one drain. Each event's
summary is saved in its idempotency record.

The answer is Lambda's partial batch response, ``{"batchItemFailures": [{"itemIdentifier": messageId}]}``,
naming only the records whose handling raised (throttling, an API server that does not answer): Lambda
returns those to the queue and deletes the rest. When the joint act raises, all its records fail and their
in-progress records are deleted, so the retry runs. The per-record summaries ride along under ``"events"``
(Lambda ignores keys it does not know), for the logs, the tests and the bench.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import telemetry
from ..aws.idempotency import EventRecords
from ..interruption import events, queue
from ..runtime import Runtime
from ..settings import Settings
from . import interrupt, zonal_shift
from .world import World

log = logging.getLogger(__name__)

FAILURES = "batchItemFailures"
EVENTS = "events"


@dataclass
class _Record:
    """One record of the batch on its way through: its event once read, then its summary or failure."""

    message_id: str
    event: dict[str, Any]
    parsed: events.ParsedEvent
    summary: dict[str, Any] | None = None
    failed: bool = False


def process_batch(
    batch: Mapping[str, Any],
    settings: Settings,
    runtime: Callable[[], Runtime],
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    lambda_context: Any = None,
    reader: Callable[[Runtime], World] = interrupt.read_world_cached,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """What the interruption function runs for an SQS batch; ``runtime`` is only called when a record is
    worth acting on, so a batch of bad bodies needs no clients."""
    started = time.monotonic()
    deadline = deadline_monotonic if deadline_monotonic is not None else started + interrupt.DEFAULT_DRAIN_SECONDS
    answers: dict[str, dict[str, Any]] = {}
    records: list[_Record] = []
    messages = queue.read_batch(batch)
    for message in messages:
        if message.event is None:
            answers[message.message_id] = _dropped(message)
            continue
        parsed = events.read(message.event, account, settings.region)
        if isinstance(parsed.result, events.Ignored):
            log.warning("queued event ignored", extra={"message_id": message.message_id})
            answers[message.message_id] = interrupt.ignored_summary(message.event, parsed.result, parsed.detail_type)
        else:
            records.append(_Record(message.message_id, dict(message.event), parsed))
    if records:
        rt = runtime().begin_invocation()
        _handle(rt, records, deadline, lambda_context, reader, sleep)
        for record in records:
            answers[record.message_id] = record.summary or {"eventId": record.event.get("id"), "failed": True}
    failures = [r.message_id for r in records if r.failed]
    response = {
        FAILURES: [{"itemIdentifier": message_id} for message_id in failures],
        EVENTS: [{"messageId": m.message_id, **answers[m.message_id]} for m in messages],
    }
    log.info("interruption batch handled", extra={"records": len(messages), "failed": len(failures),
                                                   "seconds": round(time.monotonic() - started, 3)})
    return response


def _dropped(message: queue.Message) -> dict[str, Any]:
    log.warning("queued record dropped", extra={"message_id": message.message_id, "reason": message.dropped})
    telemetry.count(telemetry.IGNORED_EVENTS)
    return {"eventId": None, "detailType": None, "ignored": message.dropped, "instances": []}


def _handle(
    rt: Runtime,
    records: list[_Record],
    deadline: float,
    lambda_context: Any,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
) -> None:
    """Zonal shifts one by one; every other event claimed, then all acted on at once."""
    store = EventRecords(rt.settings.table_name, rt.aws.dynamodb, lambda_context)
    claimed: list[_Record] = []
    copies: list[tuple[_Record, _Record]] = []  # (a later copy, the record of the same event id it repeats)
    by_id: dict[str, _Record] = {}
    for record in records:
        result = record.parsed.result
        if isinstance(result, events.ZoneShift):
            _guarded(record, lambda r=record, s=result: zonal_shift.handle_shift(rt, s, r.parsed.detail_type))
            continue
        event_id = record.event.get("id")
        if isinstance(event_id, str) and event_id in by_id:
            copies.append((record, by_id[event_id]))
            continue
        if isinstance(event_id, str):
            by_id[event_id] = record
        _guarded(record, lambda r=record: store.claim(r.event))
        if not record.failed and record.summary is None:
            claimed.append(record)
    if claimed:
        _act_together(rt, store, claimed, deadline, reader, sleep)
    for copy, original in copies:
        copy.failed = original.failed
        copy.summary = {**original.summary, "duplicate": True} if original.summary else None


def _guarded(record: _Record, run: Callable[[], dict[str, Any] | None]) -> None:
    """``run()``'s summary (None: nothing to answer yet) into the record, or the record failed if it raised."""
    try:
        record.summary = run()
    except Exception:
        log.exception("queued event failed: it is returned to the queue", extra={"message_id": record.message_id})
        record.failed = True


def _act_together(
    rt: Runtime,
    store: EventRecords,
    claimed: list[_Record],
    deadline: float,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
) -> None:
    batch = [(r.parsed, r.parsed.result) for r in claimed]
    try:
        summaries = interrupt.handle_events(rt, batch, deadline=deadline, reader=reader, sleep=sleep)  # type: ignore[arg-type]
    except Exception as exc:
        log.exception("acting on the batch failed: its events are returned to the queue",
                      extra={"message_ids": [r.message_id for r in claimed]})
        for record in claimed:
            record.failed = True
            try:
                store.release(record.event, exc)
            except Exception:
                # The record then expires with the invocation's time (Powertools' in-progress expiry).
                log.exception("releasing an idempotency record failed", extra={"message_id": record.message_id})
        return
    for record, summary in zip(claimed, summaries, strict=True):
        record.summary = summary
        try:
            store.succeed(record.event, summary)
        except Exception:
            # Acted on already: a repeat would do no harm (a tainted node is not marked again), so not a failure.
            log.exception("saving an event's summary failed", extra={"message_id": record.message_id})


__all__ = ["EVENTS", "FAILURES", "process_batch"]
