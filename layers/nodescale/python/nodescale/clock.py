"""The time nodescale decides by.

In AWS this is the system clock. A local `sim/` environment runs on simulated time (it can be
advanced so a 30-second TTL needs no 30-second sleep); it exports ``NODESCALE_CLOCK_URL`` and
every decision that compares timestamps reads its clock from there, so the product and the
environment never disagree about what time it is. An ``http://`` URL answers ``{"now": ...}``; a
``file://`` one holds the clock's state (``start``, ``elapsed`` at ``wall``, ``speed``), from which
now is worked out without a round trip.
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime

# Parsing and formatting are pure; they live in the model so the core can use them without this module.
from .model.timestamps import format_timestamp, parse_timestamp

__all__ = ["CLOCK_URL", "ClockError", "epoch", "format_timestamp", "now", "parse_timestamp"]

CLOCK_URL = "NODESCALE_CLOCK_URL"


class ClockError(RuntimeError):
    """The configured clock could not be read."""


def now() -> datetime:
    url = os.environ.get(CLOCK_URL)
    if not url:
        return datetime.now(UTC)
    if url.startswith("file://"):
        return _from_state_file(url)
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - a loopback URL set by sim/
            body = json.loads(resp.read())
    except (OSError, ValueError) as exc:
        raise ClockError(f"{CLOCK_URL}={url}: cannot read the clock ({exc})") from None
    value = body.get("now") if isinstance(body, dict) else None
    if not isinstance(value, str):
        raise ClockError(f"{CLOCK_URL}={url}: expected JSON {{\"now\": \"<ISO 8601>\"}}, got {body!r}")
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _from_state_file(url: str) -> datetime:
    path = urllib.parse.unquote(urllib.parse.urlparse(url).path)
    try:
        with open(path, encoding="utf-8") as handle:
            state = json.load(handle)
        seconds = float(state["start"]) + float(state["elapsed"]) + (time.time() - float(state["wall"])) * float(
            state["speed"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClockError(f"{CLOCK_URL}={url}: cannot read the clock's state ({exc})") from None
    return datetime.fromtimestamp(seconds, UTC)


def epoch() -> float:
    """``now()`` as seconds since the epoch (for TTLs stored as numbers)."""
    return now().timestamp()
