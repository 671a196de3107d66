"""The disruption function: a thin Powertools handler around nodescale's disruption use-case.

Started every minute by the schedule (reserved concurrency 1, so two runs never overlap). One run
finishes drains under way, cleans up what leaked and makes this minute's disruption decisions; it
stops starting new work a margin before the invocation's time runs out, and the nodes' taints and
annotations tell the next run where to carry on. An event may say ``{"dryRun": true}``.
"""

from __future__ import annotations

import time
from typing import Any

from nodescale import disrupting, runtime, telemetry
from nodescale.settings import SettingsError

logger = telemetry.logger()
metrics = telemetry.metrics()

# Kept back from the Lambda's limit: the drain round and the summary under way must still fit.
MARGIN_SECONDS = 30.0


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def handler(event: Any, context: Any) -> dict[str, Any]:
    event = event if isinstance(event, dict) else {}
    try:
        rt = runtime.shared()
    except SettingsError as exc:
        logger.error("configuration error: %s", exc)
        return {"error": str(exc)}
    return disrupting.disrupt_once(rt, dry_run=bool(event.get("dryRun")), deadline=run_deadline(context))


def run_deadline(context: Any, now: float | None = None) -> float:
    """A ``time.monotonic()`` deadline: the invocation's remaining time less the margin."""
    now = time.monotonic() if now is None else now
    get = getattr(context, "get_remaining_time_in_millis", None)
    try:
        remaining = float(get()) / 1000.0 if get is not None else disrupting.DEFAULT_RUN_SECONDS + MARGIN_SECONDS
    except (TypeError, ValueError):
        remaining = disrupting.DEFAULT_RUN_SECONDS + MARGIN_SECONDS
    return now + max(0.0, remaining - MARGIN_SECONDS)
