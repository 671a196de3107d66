"""The interruption function's front door: an SQS batch of events, or one EventBridge event.

    process(event, settings, runtime, account=..., deadline_monotonic=...) -> EventSummary | Repeat | BatchAnswer

The Lambda handler and ``nodescale replay`` call it; a batch (the interruption queue's event source
mapping) goes to ``batch.process_batch``, anything else to ``handle.process_event``. It lives apart from
both so that the batch, which builds on the single-event handling, is not imported back by it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...interruption import queue
from ...runtime import Runtime
from ...settings import Settings
from .batch import process_batch
from .handle import process_event
from .summary import BatchAnswer, EventAnswer


def process(
    event: object,
    settings: Settings,
    runtime: Callable[[], Runtime],
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    lambda_context: Any = None,
) -> EventAnswer | BatchAnswer:
    """What the interruption function runs for one invocation's event. ``runtime`` is only called for an
    event worth acting on, so bad input needs no clients at all."""
    if queue.is_batch(event):
        return process_batch(event, settings, runtime, account=account,  # type: ignore[arg-type]
                             deadline_monotonic=deadline_monotonic, lambda_context=lambda_context)
    return process_event(event, settings, runtime, account=account, deadline_monotonic=deadline_monotonic,
                         lambda_context=lambda_context)
