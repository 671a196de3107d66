"""Each EventBridge event is acted on once: a Powertools idempotency record keyed on the event id.

The records live in the shared table beside the unavailable offerings. The table's partition key is
``pk`` and its TTL attribute ``expiresAt`` (epoch seconds), while Powertools' DynamoDB layer
defaults to ``id``/``expiration``: both are named here so its items land on the table's key and
expire through the table's TTL. Items look like ``pk = "interruption#<md5 of the event id>"`` with
``status``, ``data`` (the summary returned the first time) and ``expiresAt``.

A repeat of an event within the expiry returns the first summary without touching anything, marked
``"duplicate": true`` (the first run's own fields, its ``handledAt`` included, are kept). A run that raises
deletes its record, so Lambda's retry of a failed event runs again.

``EventRecords`` is the same for a batch of events acted on together (the SQS path): claim each, act on
all, then save each summary or release each claim.

A summary is stored as its JSON document (``to_json()``); a repeat answers ``Repeat(document)``, the stored
document as it is: it may have been written by an older deployed version, so it is never parsed strictly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyInconsistentStateError,
    IdempotencyItemAlreadyExistsError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS

from ..names import TABLE_KEY, TABLE_TTL

KEY_PREFIX = "interruption"
# EventBridge retries for up to 15 minutes and Lambda's async retries add a few; an hour covers both.
EXPIRES_AFTER_SECONDS = 3600


class Summary(Protocol):
    def to_json(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=Summary)


@dataclass(frozen=True)
class Repeat:
    """An event handled already, answered from its record: the first run's summary as it was stored."""

    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        # The first run's own fields, its handledAt included, are kept; "duplicate" says nothing ran now.
        return {**self.document, "duplicate": True}


def persistence_layer(table: str, dynamodb: Any) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(
        table_name=table,
        key_attr=TABLE_KEY,
        expiry_attr=TABLE_TTL,
        boto3_client=dynamodb,
    )


def once_per_event(
    run: Callable[[dict], S],
    event: dict,
    *,
    table: str | None,
    dynamodb: Any,
    lambda_context: Any = None,
) -> S | Repeat:
    """``run(event)``, unless this event id was handled already: then the first run's summary as stored,
    as a :class:`Repeat`.

    Without a table (a bare CLI run), or for an event without an id, every call runs.
    """
    event_id = event.get("id")
    if not table or not isinstance(event_id, str) or not event_id:
        return run(event)
    config = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=EXPIRES_AFTER_SECONDS)
    if lambda_context is not None:
        # Lets Powertools expire an in-progress record when the invocation times out.
        config.register_lambda_context(lambda_context)

    @idempotent_function(
        data_keyword_argument="event",
        persistence_store=persistence_layer(table, dynamodb),
        config=config,
        key_prefix=KEY_PREFIX,
    )
    def handle(event: dict) -> dict[str, Any]:
        summary = run(event)
        ran.append(summary)
        return summary.to_json()

    ran: list[S] = []
    with warnings.catch_warnings():
        # Outside Lambda (the CLI, tests) there is no remaining time to record: nothing to warn about.
        warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
        stored = handle(event=event)
    # Nothing ran now: Powertools answered from the record.
    return ran[0] if ran else Repeat(stored if isinstance(stored, dict) else {})


class EventRecords:
    """The batch form of :func:`once_per_event`, for events handled together (an SQS batch): the same records
    (key prefix, key, expiry), so a repeat through either path is recognised.

    ``claim(event)`` before acting: ``None`` when this invocation now holds the event (an in-progress record
    written), or the first run's summary as a :class:`Repeat` when it was handled already. An event
    another invocation is handling right now raises (Powertools' ``IdempotencyAlreadyInProgressError``): the
    caller reports it for a retry. Then ``succeed(event, summary)`` or ``release(event, error)``.
    Without a table, or for an event without an id, every claim is granted and nothing is written.
    """

    def __init__(self, table: str | None, dynamodb: Any, lambda_context: Any = None) -> None:
        self._lambda_context = lambda_context
        self._store: DynamoDBPersistenceLayer | None = None
        if table:
            self._store = persistence_layer(table, dynamodb)
            config = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=EXPIRES_AFTER_SECONDS)
            self._store.configure(config, key_prefix=KEY_PREFIX)

    def _keyed(self, event: dict) -> bool:
        event_id = event.get("id")
        return self._store is not None and isinstance(event_id, str) and bool(event_id)

    def claim(self, event: dict) -> Repeat | None:
        if not self._keyed(event):
            return None
        assert self._store is not None
        try:
            with warnings.catch_warnings():
                # Outside Lambda there is no remaining time to record (as in once_per_event).
                warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
                self._store.save_inprogress(data=event, remaining_time_in_millis=self._remaining_millis())
            return None
        except IdempotencyItemAlreadyExistsError as exc:
            record = exc.old_data_record or self._store.get_record(data=event)
        if record is None or record.status == STATUS_CONSTANTS["EXPIRED"]:
            raise IdempotencyInconsistentStateError(f"event {event.get('id')}: its record changed while read")
        if record.status == STATUS_CONSTANTS["INPROGRESS"]:
            raise IdempotencyAlreadyInProgressError(f"event {event.get('id')} is being handled by another invocation")
        stored = record.response_json_as_dict()
        return Repeat(stored if isinstance(stored, dict) else {})

    def succeed(self, event: dict, summary: Summary) -> None:
        if self._keyed(event):
            assert self._store is not None
            self._store.save_success(data=event, result=summary.to_json())

    def release(self, event: dict, error: Exception) -> None:
        """Forget the in-progress record, so the retry of this event runs."""
        if self._keyed(event):
            assert self._store is not None
            self._store.delete_record(data=event, exception=error)

    def _remaining_millis(self) -> int | None:
        context = self._lambda_context
        if context is None or not hasattr(context, "get_remaining_time_in_millis"):
            # Outside Lambda: the record expires with EXPIRES_AFTER_SECONDS only (as once_per_event's does).
            return None
        return int(context.get_remaining_time_in_millis())
