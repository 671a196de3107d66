"""The interruption use-case for an SQS batch: many EventBridge events, acted on together with one world read.

    process_batch(batch, settings, runtime, account=..., deadline_monotonic=...) -> BatchAnswer

The interruption rules put their events in a queue and a Lambda event source mapping hands them over in
batches (``interruption/queue.py``), as Karpenter's interruption controller works through its queue. Per
record, in order:

- a body that is not JSON, or an event we do not read, is logged with its messageId and dropped (counted as
  ignored, never reported as a failure: it would fail the same way on every retry);
- a zonal shift is recorded on its own, as for a single event;
- an event id handled already (its idempotency record, whichever path wrote it) is answered from the record;
  a second copy of an event in the same batch is answered with the first's summary.

The intents of all the remaining events are acted on together (``interrupt.handle_events``): one ownership
check, every node cordoned first, one drain and beside it ONE read of the world and one plan of replacements. Each event's
summary is saved in its idempotency record.

The answer is Lambda's partial batch response, ``{"batchItemFailures": [{"itemIdentifier": messageId}]}``,
naming only the records whose handling raised (throttling, an API server that does not answer): Lambda
returns those to the queue and deletes the rest. When the joint act raises, all its records fail and their
in-progress records are deleted, so the retry runs. A failed record is made visible again in
``queue.RETRY_VISIBILITY_SECONDS`` (``aws/queue_retry.py``), so its retries fit in a spot notice and one that
keeps failing reaches the dead-letter queue after the redrive policy's receives; one whose event another
invocation is handling waits out the queue's visibility timeout instead. A record whose reading raises
anything at all (a hostile body) is dropped with its reason: it never fails the batch. The per-record summaries ride along under ``"events"``
(Lambda ignores keys it does not know), for the logs, the tests and the bench.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from ... import telemetry
from ...aws import queue_retry
from ...aws.idempotency import EventRecords, Repeat
from ...interruption import events, queue
from ...runtime import Runtime
from ...settings import Settings
from ..world import World
from . import handle as interrupt
from . import zonal_shift
from .actions import side_by_side
from .ahead import Ahead, cordon_ahead
from .summary import BatchAnswer, EventAnswer, EventSummary, FailedRecord, RecordAnswer

log = logging.getLogger(__name__)

CLAIM_WORKERS = 8  # idempotency records written at once (DynamoDB conditional puts)


@dataclass
class _Record:
    """One record of the batch on its way through: its event once read, then its summary or failure."""

    message: queue.Message
    event: dict[str, Any]
    parsed: events.ParsedEvent
    summary: EventAnswer | None = None
    failed: bool = False
    # Made visible again soon when it failed; not when another invocation holds its event (that one's own
    # message is retried if it fails), so waiting out the holder does not burn this copy's receives.
    retry_soon: bool = True
    error: Exception | None = None

    @property
    def message_id(self) -> str:
        return self.message.message_id


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
) -> BatchAnswer:
    """What the interruption function runs for an SQS batch; ``runtime`` is only called when a record is
    worth acting on, so a batch of bad bodies needs no clients."""
    started = time.monotonic()
    deadline = deadline_monotonic if deadline_monotonic is not None else started + interrupt.DEFAULT_DRAIN_SECONDS
    answers: dict[str, RecordAnswer] = {}
    records: list[_Record] = []
    messages = queue.read_batch(batch)
    for message in messages:
        record = _read(message, account, settings.region)
        if isinstance(record, _Record):
            records.append(record)
        else:
            answers[message.message_id] = record
    if records:
        rt = runtime().begin_invocation()
        _handle(rt, records, deadline, lambda_context, reader, sleep)
        for record in records:
            answers[record.message_id] = record.summary or FailedRecord(record.event.get("id"))
        _retry_soon(rt, [r for r in records if r.failed and r.retry_soon])
    failures = [r.message_id for r in records if r.failed]
    response = BatchAnswer(tuple(failures), tuple((m.message_id, answers[m.message_id]) for m in messages))
    log.info("interruption batch handled", extra={"records": len(messages), "failed": len(failures),
                                                   "seconds": round(time.monotonic() - started, 3)})
    return response


def _read(message: queue.Message, account: str | None, region: str | None) -> _Record | EventSummary:
    """The record to act on, or the summary of a record dropped or ignored. Never raises: whatever a hostile
    body makes the parser do is this record's reason alone, never its batch's."""
    if message.event is None:
        return _dropped(message, message.dropped)
    try:
        parsed = events.read(message.event, account, region)
    except Exception as exc:
        log.exception("reading a queued event failed", extra={"message_id": message.message_id})
        return _dropped(message, f"the event could not be read ({type(exc).__name__})")
    if isinstance(parsed.result, events.Ignored):
        log.warning("queued event ignored", extra={"message_id": message.message_id})
        return interrupt.ignored_summary(message.event, parsed.result, parsed.detail_type)
    return _Record(message, dict(message.event), parsed)


def _dropped(message: queue.Message, reason: str) -> EventSummary:
    log.warning("queued record dropped", extra={"message_id": message.message_id, "reason": reason})
    telemetry.count(telemetry.IGNORED_EVENTS)
    return EventSummary(None, None, ignored=reason)


def _retry_soon(rt: Runtime, failed: list[_Record]) -> None:
    """The failed records back in the queue in seconds rather than after its visibility timeout (see
    ``aws/queue_retry.py``)."""
    if not failed:
        return
    if rt.aws.sqs is None:
        log.warning("no SQS client: failed records return after the queue's visibility timeout")
        return
    receipts = [(r.message_id, r.message.queue_arn, r.message.receipt_handle) for r in failed]
    done = queue_retry.retry_soon(rt.aws.sqs, receipts, queue.RETRY_VISIBILITY_SECONDS)
    log.info("failed records return to the queue soon", extra={"message_ids": done,
                                                                "seconds": queue.RETRY_VISIBILITY_SECONDS})


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
    copies: list[tuple[_Record, _Record]] = []  # (a later copy, the record of the same event id it repeats)
    by_id: dict[str, _Record] = {}
    firsts: list[_Record] = []
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
        firsts.append(record)
    # Each event's record claimed side by side: a hundred writes one after the other held up every
    # node's cordon (#33.3). The ownership check (EC2) and the going-away nodes' cordons run meanwhile
    # (ahead.py): neither waits for the other, and an instance whose event turns out handled already is
    # simply not acted on further.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodescale-ahead") as pool:
        early = pool.submit(contextvars.copy_context().run, cordon_ahead, rt, _intents(firsts))
        side_by_side(lambda r: _guarded(r, lambda: store.claim(r.event)), firsts, CLAIM_WORKERS, "nodescale-claim")
        checked = early.result()
    claimed: list[_Record] = []
    for record in firsts:
        record.retry_soon = not isinstance(record.error, IdempotencyAlreadyInProgressError)
        if not record.failed and record.summary is None:
            claimed.append(record)
    if claimed:
        _act_together(rt, store, claimed, deadline, reader, sleep, checked)
    for copy, original in copies:
        copy.failed = original.failed
        copy.summary = _repeat_of(original.summary) if original.summary else None


def _intents(records: list[_Record]) -> list[events.Intent]:
    """The intents the records' events would act on, in order (a zonal shift has none)."""
    return [intent for r in records if isinstance(r.parsed.result, list)
            for intent in r.parsed.result if intent.action != events.NO_ACTION]


def _repeat_of(summary: EventAnswer) -> Repeat:
    """A second copy of an event in the batch: answered with the first's summary, as a repeat."""
    return summary if isinstance(summary, Repeat) else Repeat(summary.to_json())


def _guarded(record: _Record, run: Callable[[], EventAnswer | None]) -> None:
    """``run()``'s summary (None: nothing to answer yet) into the record, or the record failed if it raised."""
    try:
        record.summary = run()
    except Exception as exc:
        log.exception("queued event failed: it is returned to the queue", extra={"message_id": record.message_id})
        record.failed = True
        record.error = exc


def _act_together(
    rt: Runtime,
    store: EventRecords,
    claimed: list[_Record],
    deadline: float,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
    ahead: Ahead | None = None,
) -> None:
    batch = [(r.parsed, r.parsed.result) for r in claimed]
    try:
        summaries = interrupt.handle_events(rt, batch, deadline=deadline, reader=reader, sleep=sleep,  # type: ignore[arg-type]
                                            ahead=ahead)
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
