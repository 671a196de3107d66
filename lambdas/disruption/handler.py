"""The disruption function: a thin Powertools handler around nodescale's disruption use-case.

Started every minute by the schedule. One run finishes drains under way, cleans up what leaked and
makes this minute's disruption decisions; it stops starting new work a margin before the invocation's
time runs out, and the nodes' taints and annotations tell the next run where to carry on. A cluster
larger than ``NODESCALE_DISRUPTION_SLICE_NODES`` is split: the scheduled run invokes this function
asynchronously once per slice of NodePools, with ``{"slice": {"pools": [...], "index": i, "of": n}}``
(usecases/disrupt/slices.py); each invocation holds its pools' leases, so no pool is in two runs at
once. An event may say ``{"dryRun": true}``.
"""

from __future__ import annotations

import functools
from typing import Any

from nodescale import lambda_support, telemetry
from nodescale.aws import fan_out
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupt
from nodescale.usecases.disrupt.slices import Slice, SliceError
from nodescale.usecases.disrupt.state import DEFAULT_RUN_SECONDS

logger = telemetry.logger()
metrics = telemetry.metrics()

# Kept back from the Lambda's limit: the drain round and the summary under way must still fit.
MARGIN_SECONDS = 30.0


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@lambda_support.with_shared_runtime(logger)
def handler(event: dict[str, Any], context: Any, rt: Runtime) -> dict[str, Any]:
    part = None
    if event.get("slice") is not None:
        try:
            part = Slice.from_event(event["slice"])
        except SliceError as exc:
            logger.error(str(exc))
            return {"error": str(exc)}
    # A slice never fans out again; a dry run plans the whole cluster in one place.
    arn = getattr(context, "invoked_function_arn", None)
    send = functools.partial(fan_out.invoke_async, arn) if arn and part is None and not event.get("dryRun") else None
    return disrupt.disrupt_once(rt, dry_run=bool(event.get("dryRun")), deadline=run_deadline(context),
                                part=part, fan_out=send)


def run_deadline(context: Any, now: float | None = None) -> float:
    """A ``time.monotonic()`` deadline: the invocation's remaining time less the margin."""
    left = lambda_support.seconds_left(context, MARGIN_SECONDS)
    return lambda_support.deadline_in(DEFAULT_RUN_SECONDS if left is None else left, now)
