"""The provisioner function: a thin Powertools handler around nodescale's provisioner use-case.

Started by the periodic schedule. In watch mode it stays for ``NODESCALE_WATCH_SECONDS`` (never past
the invocation's remaining time minus a margin for the last launch); in poll mode it makes one pass.
An event may say ``{"mode": "poll"}`` or ``{"dryRun": true}`` for a one-off run.
"""

from __future__ import annotations

from typing import Any

from nodescale import lambda_support, telemetry
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provision

logger = telemetry.logger()
metrics = telemetry.metrics()

# Time kept back from the Lambda's limit: the last batch's solve, Fleet call and summary must fit.
MARGIN_SECONDS = 10.0


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
@lambda_support.with_shared_runtime(logger)
def handler(event: dict[str, Any], context: Any, rt: Runtime) -> dict[str, Any]:
    mode = event.get("mode") or rt.settings.provisioner_mode
    dry_run = bool(event.get("dryRun"))
    if mode not in ("watch", "poll"):
        logger.error("event field mode=%r: allowed are 'watch' and 'poll'", mode)
        return {"error": f"event field mode={mode!r}: allowed are 'watch' and 'poll'"}
    # When the invocation must be done: its remaining time less the margin (None when the context cannot say).
    left = lambda_support.seconds_left(context, MARGIN_SECONDS)
    until = None if left is None else lambda_support.deadline_in(left)
    if mode == "poll":
        # The pass waits for a burst of pending pods to settle, within the invocation's time.
        summary = provision.provision_once(rt, dry_run=dry_run, deadline=until)
    else:
        summary = provision.provision_watch(rt, watch_deadline(rt.settings.watch_seconds, context), dry_run=dry_run,
                                            until=until)
    answer = summary.to_json()
    logger.info("provisioner summary", extra={"summary": answer})
    return answer


def watch_deadline(watch_seconds: float, context: Any, now: float | None = None) -> float:
    """A ``time.monotonic()`` deadline: the watch period, cut short by the invocation's remaining time."""
    left = lambda_support.seconds_left(context, MARGIN_SECONDS)
    return lambda_support.deadline_in(watch_seconds if left is None else min(watch_seconds, left), now)
