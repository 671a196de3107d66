"""The interruption function: a thin Powertools handler around nodescale's interruption use-case.

Fed by the interruption queue's event source mapping: the EventBridge rules for spot interruption warnings,
rebalance recommendations, instance state changes, AWS Health scheduled changes and ARC zonal shifts put their
events in one SQS queue, and Lambda hands them over in batches (``{"Records": [...]}``), acted on together with
one read of the world. For a batch it returns Lambda's partial batch response (``batchItemFailures``: the
records to retry) with each record's summary under ``events``. A single EventBridge event (a direct invocation,
``nodescale replay``) still works and returns its summary: per instance (node, action or reason ignored,
replacement launched, pods evicted/blocked), or for a zonal shift the zone recorded (``zonalShift``).

A malformed or foreign event returns normally with its reason (it is never retried). Anything worth
retrying (throttling, an API that does not answer, a broken configuration) names the record as a batch item
failure, so the queue hands it over again and after a few receives moves it to the dead-letter queue (a single
event raises instead, for Lambda's own retries). Each event id is handled once (Powertools
idempotency in the shared table); the drain stops a margin before the invocation's time runs out
and the node's taint tells the next run to carry on.
"""

from __future__ import annotations

from typing import Any

from nodescale import lambda_support, runtime, telemetry
from nodescale.settings import Settings
from nodescale.usecases.interrupt import entry

logger = telemetry.logger()
metrics = telemetry.metrics()

# Time kept back from the Lambda's limit for the last drain round, the summary and the idempotency write.
MARGIN_SECONDS = 10.0


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def handler(event: Any, context: Any) -> dict[str, Any]:
    return entry.process(
        event,
        Settings.from_env(),
        runtime.shared,
        account=account_of(context),
        deadline_monotonic=drain_deadline(context),
        lambda_context=context if hasattr(context, "get_remaining_time_in_millis") else None,
    ).to_json()


def account_of(context: Any) -> str | None:
    """The function's own account, from ``arn:aws:lambda:<region>:<account>:function:<name>``."""
    arn = getattr(context, "invoked_function_arn", None)
    if not isinstance(arn, str):
        return None
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 and parts[4].isdigit() else None


def drain_deadline(context: Any, now: float | None = None) -> float | None:
    """A ``time.monotonic()`` deadline for draining: the invocation's remaining time minus a margin."""
    left = lambda_support.seconds_left(context, MARGIN_SECONDS)
    return None if left is None else lambda_support.deadline_in(left, now)
