"""The product's clock read from a sim/ environment's clock state file (``file://`` NODESCALE_CLOCK_URL)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodescale import clock
from sim.clock import Clock

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter


def test_the_product_reads_the_published_simulated_time_and_sees_an_advance_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulated = Clock(speed=2.0, start=datetime(2030, 1, 1, tzinfo=UTC))
    path = tmp_path / "clock.json"
    simulated.publish(path)
    monkeypatch.setenv(clock.CLOCK_URL, path.as_uri())

    assert abs((clock.now() - simulated.now()).total_seconds()) < 0.5
    simulated.advance(3600)
    assert abs((clock.now() - simulated.now()).total_seconds()) < 0.5
    assert clock.now() >= datetime(2030, 1, 1, 1, tzinfo=UTC)


def test_an_unreadable_state_file_is_a_clock_error_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "clock.json"
    path.write_text(json.dumps({"start": time.time(), "speed": 1.0}))  # no elapsed/wall
    monkeypatch.setenv(clock.CLOCK_URL, path.as_uri())
    with pytest.raises(clock.ClockError, match="NODESCALE_CLOCK_URL=file://.*cannot read the clock's state"):
        clock.now()
    monkeypatch.setenv(clock.CLOCK_URL, (tmp_path / "missing.json").as_uri())
    with pytest.raises(clock.ClockError, match="cannot read the clock's state"):
        clock.now()
