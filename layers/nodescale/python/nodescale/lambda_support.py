"""What the Lambda handlers share: time left in the invocation, and the answer to a broken configuration."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from . import runtime
from .runtime import Runtime
from .settings import SettingsError

Handler = Callable[[Any, Any], dict[str, Any]]
RuntimeHandler = Callable[[dict[str, Any], Any, Runtime], dict[str, Any]]


def seconds_left(context: Any, margin: float) -> float | None:
    """The invocation's remaining time less `margin` (may be negative); None when the context cannot say."""
    get = getattr(context, "get_remaining_time_in_millis", None)
    if get is None:
        return None
    try:
        return float(get()) / 1000.0 - margin
    except (TypeError, ValueError):
        return None


def deadline_in(seconds: float, now: float | None = None) -> float:
    """A ``time.monotonic()`` deadline `seconds` from `now` (never in the past)."""
    now = time.monotonic() if now is None else now
    return now + max(0.0, seconds)


def configuration_error(logger: Any, exc: SettingsError) -> dict[str, str]:
    """The answer to an invocation whose settings are broken: logged and returned, not raised, because a
    retry would meet the same settings."""
    logger.error("configuration error: %s", exc)
    return {"error": str(exc)}


def with_shared_runtime(logger: Any) -> Callable[[RuntimeHandler], Handler]:
    """Decorate ``fn(event, context, rt)`` into a Lambda handler: the event as a dict ({} for anything
    else), the process's shared Runtime, and a broken configuration answered by `configuration_error`."""

    def decorate(fn: RuntimeHandler) -> Handler:
        @functools.wraps(fn)
        def handler(event: Any, context: Any) -> dict[str, Any]:
            try:
                rt = runtime.shared()
            except SettingsError as exc:
                return configuration_error(logger, exc)
            return fn(event if isinstance(event, dict) else {}, context, rt)

        return handler

    return decorate
