"""Simulated time shared by everything in `sim/`.

Simulated time runs `speed` times faster than real time and can be pushed forward with
`advance()`, so scenarios that wait on timers (Ready delays, grace periods, TTLs) need not
wait for minutes of wall time.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


class Clock:
    """A UTC clock: `now() = start + elapsed_real * speed + advanced`."""

    def __init__(self, speed: float = 1.0, start: datetime | None = None) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be > 0, got {speed}")
        self._speed = float(speed)
        self._start = (start or datetime.now(UTC)).astimezone(UTC)
        self._real_start = time.monotonic()
        self._advanced = 0.0
        self._changed = threading.Condition()
        self._published: Path | None = None

    @property
    def speed(self) -> float:
        return self._speed

    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        return (time.monotonic() - self._real_start) * self._speed + self._advanced

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.elapsed())

    def timestamp(self) -> str:
        """`now()` in the RFC 3339 form Kubernetes writes (second precision, `Z`)."""
        return format_time(self.now())

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot move the clock backwards ({seconds} s)")
        with self._changed:
            self._advanced += seconds
            self._write_published()
            self._changed.notify_all()

    def publish(self, path: Path) -> None:
        """Keep ``path`` telling other processes how to read this clock (``read_published``): the product
        reads it at every decision, and a file read costs microseconds where an HTTP round trip to a busy
        environment cost milliseconds (a third of a disruption pass at 10,000 nodes). Rewritten on advance."""
        with self._changed:
            self._published = path
            self._write_published()

    def _write_published(self) -> None:
        if self._published is None:
            return
        state = {"start": self._start.timestamp(), "elapsed": self.elapsed(), "wall": time.time(),
                 "speed": self._speed}
        temporary = self._published.with_name(self._published.name + ".tmp")
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self._published)  # readers see the old state or the new, never half of one

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds` of simulated time; returns early when `advance()` covers it."""
        self.wait_until(self.elapsed() + seconds)

    def wait_until(self, elapsed_target: float, stop: threading.Event | None = None) -> bool:
        """Block until `elapsed()` reaches `elapsed_target`; False when `stop` was set first."""
        with self._changed:
            while True:
                if stop is not None and stop.is_set():
                    return False
                remaining = elapsed_target - self.elapsed()
                if remaining <= 0:
                    return True
                # Wake at least every 0.2 s real time so a `stop` request is noticed promptly.
                self._changed.wait(min(remaining / self._speed, 0.2))

    def real_seconds(self, sim_seconds: float) -> float:
        """How long `sim_seconds` of simulated time take in real time at the current speed."""
        return max(0.0, sim_seconds / self._speed)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp as written by Kubernetes (`Z` or an offset, optional fraction)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
