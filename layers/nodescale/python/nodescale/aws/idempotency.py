"""Each EventBridge event is acted on once: a Powertools idempotency record keyed on the event id.

The records live in the shared table beside the unavailable offerings. The table's partition key is
``pk`` and its TTL attribute ``expiresAt`` (epoch seconds), while Powertools' DynamoDB layer
defaults to ``id``/``expiration``: both are named here so its items land on the table's key and
expire through the table's TTL. Items look like ``pk = "interruption#<md5 of the event id>"`` with
``status``, ``data`` (the summary returned the first time) and ``expiresAt``.

A repeat of an event within the expiry returns the first summary without touching anything, marked
``"duplicate": true`` (the first run's own fields, its ``handledAt`` included, are kept). A run that raises
deletes its record, so Lambda's retry of a failed event runs again.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from ..names import TABLE_KEY, TABLE_TTL

KEY_PREFIX = "interruption"
# EventBridge retries for up to 15 minutes and Lambda's async retries add a few; an hour covers both.
EXPIRES_AFTER_SECONDS = 3600


def persistence_layer(table: str, dynamodb: Any) -> DynamoDBPersistenceLayer:
    return DynamoDBPersistenceLayer(
        table_name=table,
        key_attr=TABLE_KEY,
        expiry_attr=TABLE_TTL,
        boto3_client=dynamodb,
    )


def once_per_event(
    run: Callable[[dict], dict[str, Any]],
    event: dict,
    *,
    table: str | None,
    dynamodb: Any,
    lambda_context: Any = None,
) -> dict[str, Any]:
    """``run(event)``, unless this event id was handled already: then the first run's summary, with
    ``"duplicate": True`` added.

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
        ran.append(True)
        return run(event)

    ran: list[bool] = []
    with warnings.catch_warnings():
        # Outside Lambda (the CLI, tests) there is no remaining time to record: nothing to warn about.
        warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
        summary = handle(event=event)
    # Powertools answered from the record: nothing ran now.
    return summary if ran else {**summary, "duplicate": True}
