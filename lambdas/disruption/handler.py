"""The disruption function: a thin Powertools handler around nodescale's disruption use-case.

Started every minute by the schedule (reserved concurrency 1, so two runs never overlap). One run
finishes drains under way, cleans up what leaked and makes this minute's disruption decisions; it
stops starting new work a margin before the invocation's time runs out, and the nodes' taints and
annotations tell the next run where to carry on. An event may say ``{"dryRun": true}``.
"""

from __future__ import annotations

from typing import Any

from nodescale import lambda_support, telemetry
from nodescale.runtime import Runtime
from nodescale.usecases import disrupt

logger = telemetry.logger()
metrics = telemetry.metrics()

# Kept back from the Lambda's limit: the drain round and the summary under way must still fit.
MARGIN_SECONDS = 30.0


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@lambda_support.with_shared_runtime(logger)
def handler(event: dict[str, Any], context: Any, rt: Runtime) -> dict[str, Any]:
    return disrupt.disrupt_once(rt, dry_run=bool(event.get("dryRun")), deadline=run_deadline(context))


def run_deadline(context: Any, now: float | None = None) -> float:
    """A ``time.monotonic()`` deadline: the invocation's remaining time less the margin."""
    left = lambda_support.seconds_left(context, MARGIN_SECONDS)
    return lambda_support.deadline_in(disrupt.DEFAULT_RUN_SECONDS if left is None else left, now)
