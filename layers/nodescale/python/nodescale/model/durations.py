"""Go-style durations ("30s", "1m0s", "720h", "1h30m"), as Karpenter's API and annotations write them."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_seconds(text: str) -> float | None:
    """Seconds, or None when ``text`` is not a duration."""
    if not text or _PART.sub("", text) != "":
        return None
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
