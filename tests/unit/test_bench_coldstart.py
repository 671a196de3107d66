"""The cold-start bench's summary: a function's starts beside the floor's, as ratios (#32, cold start)."""

from __future__ import annotations

import pytest

from bench.coldstart import REPEATS, repeats_from, report_line, summarize


def test_summary_compares_median_to_median_and_worst_to_worst() -> None:
    """#32 cold start: the ratio is median over the floor's median and worst over the floor's worst."""
    summary = summarize([0.6, 0.5, 0.9], floor=[0.4, 0.5, 0.45, 0.6])
    assert (summary.median, summary.worst) == (0.6, 0.9)
    assert (summary.floor_median, summary.floor_worst) == (0.475, 0.6)
    assert summary.median_ratio == pytest.approx(0.6 / 0.475)
    assert summary.worst_ratio == pytest.approx(1.5)


def test_summary_needs_starts_of_both_and_a_positive_floor() -> None:
    """#32 cold start: no ratio from nothing, and a floor of zero seconds is a broken measurement."""
    with pytest.raises(ValueError, match="at least one start"):
        summarize([], floor=[0.4])
    with pytest.raises(ValueError, match="at least one start"):
        summarize([0.4], floor=[])
    with pytest.raises(ValueError, match="positive"):
        summarize([0.4], floor=[0.0, 0.3])


def test_repeats_come_from_the_first_argument() -> None:
    """#32 cold start: `python -m bench.coldstart 3` runs 3 starts of each; a bad count is refused clearly."""
    assert repeats_from(["coldstart"]) == REPEATS
    assert repeats_from(["coldstart", "3"]) == 3
    with pytest.raises(SystemExit, match="positive whole number, got 'x'"):
        repeats_from(["coldstart", "x"])
    with pytest.raises(SystemExit, match="got '0'"):
        repeats_from(["coldstart", "0"])


def test_the_report_line_prints_the_cpu_time_ratio_and_the_load_beside_the_wall_time_ratio() -> None:
    """#32 cold start: on a loaded shared machine (load 8 on 2 cores) the wall-time ratio of one run swung by
    0.3 and more; the processes' CPU-time ratio, printed with the load average, is the steadier figure."""
    runs = [{"import": 0.4, "clients": 0.2, "total": 0.6, "cpu": 0.5, "process": 0.7, "modules": 600.0}]
    wall = summarize([0.6], floor=[0.4])
    cpu = summarize([0.5], floor=[0.4])
    line = report_line("cleanup", runs, wall, 1, [("nodescale", 0.2)], cpu=cpu, load=7.3)
    assert "ratio to the floor median 1.50, worst 1.50 (goal <= 1.25): MISSED" in line
    assert "CPU-time ratio median 1.25, worst 1.25; load average 7.3;" in line
