"""sim/report.py: step series from changes, and a page that embeds the data its chart draws."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from sim.report import Chart, Series, Timeline, steps, value_at, write_html


def test_steps_add_up_changes_and_run_to_the_end() -> None:
    # Two instances at $0.12/h overlapping from 5 s to 9 s; the chart ends at 12 s.
    points = steps([(2.0, 0.12), (5.0, 0.12), (9.0, -0.12), (11.0, -0.12)], end=12.0)
    assert points == [(0.0, 0.0), (2.0, 0.12), (5.0, 0.24), (9.0, 0.12), (11.0, 0.0), (12.0, 0.0)]
    assert value_at(points, 4.9) == 0.12 and value_at(points, 5.0) == 0.24 and value_at(points, 11.5) == 0.0
    # Changes at the same moment are one point.
    assert steps([(3.0, 1), (3.0, -1)], end=4.0) == [(0.0, 0.0), (3.0, 0.0), (4.0, 0.0)]


def test_the_page_embeds_what_its_chart_draws(tmp_path: Path) -> None:
    timeline = Timeline("t", echo=False)
    timeline.log("late", at=2.0)
    timeline.log("early </script>", at=1.0)
    chart = Chart(
        [Series("a", "pods", [(0.0, 0.0), (1.0, 3.0), (4.0, 3.0)], "#000", "", 2, "circle"),
         Series("p", "price", [(0.0, 0.0), (2.0, 0.5), (4.0, 0.5)], "#111", "4,2", 2, "diamond", axis="right")],
        end=4.0, marks=[(1.0, "scaled")],
    )
    page = write_html(tmp_path / "r.html", timeline, {"result": "ok"}, chart, {"launches": []}).read_text()
    embedded = json.loads(re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page, re.S)[1])
    assert embedded == json.loads((tmp_path / "r.json").read_text())
    assert [e["what"] for e in embedded["timeline"]] == ["early </script>", "late"]  # in time order, escaped
    assert embedded["chart"]["series"]["p"]["axis"] == "right"
    assert page.count("<polyline") == 2 and 'data-series="p"' in page and 'stroke-dasharray="4,2"' in page


def test_the_story_clock_starts_at_its_first_event_after_minutes_of_set_up(tmp_path: Path) -> None:
    """#28.5: a first run builds for minutes before the story; the chart's time axis is the story's own
    (0 s at its first event), and the set-up is a note and its own table, not the axis's first 90%."""
    set_up = 300.0  # a fresh clone: layers built, stack synthesized, sim started
    timeline = Timeline("t", started=time.monotonic() - set_up, started_epoch=time.time() - set_up, echo=False)
    timeline.log("building the Lambda layers...", "first run only", at=0.0)  # said as the demo started
    timeline.begin_story()
    first = timeline.log("NodePool 'default' written to SSM")
    launched = timeline.since_start(time.time() + 2.0)  # an AWS call logged 2 s into the story

    assert abs(timeline.setup_seconds - set_up) < 1.0
    assert 0.0 <= first.at < 1.0 and 2.0 <= launched < 3.0
    chart = Chart([Series("a", "pods", [(0.0, 0.0), (launched, 5.0), (launched + 1, 5.0)], "#000", "", 2, "circle")],
                  end=launched + 1, marks=[(first.at, "configured")])
    page = write_html(tmp_path / "r.html", timeline, {"result": "ok"}, chart).read_text()
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["chart"]["start"] == 0.0 and data["chart"]["end"] < 4.0
    assert data["chart"]["series"]["a"]["points"][0][0] == 0.0
    assert abs(data["setupSeconds"] - set_up) < 1.0
    whens = {e["what"]: e["at"] for e in data["timeline"]}
    assert whens["the story starts"] == 0.0 and -set_up - 1.0 < whens["building the Lambda layers..."] < -set_up + 1.0
    # The axis's ticks are the story's seconds; the set-up rows are in their own table, at demo time.
    svg = re.search(r'<svg id="chart".*?</svg>', page, re.S)[0]
    assert 'data-end="3.' in svg and ">300s<" not in svg
    story_rows = re.search(r'<table id="timeline">(.*?)</table>', page, re.S)[1]
    setup_rows = re.search(r'<table id="setup">(.*?)</table>', page, re.S)[1]
    assert "building the Lambda layers" not in story_rows and "NodePool" in story_rows
    assert "<td>0.0s</td><td>building the Lambda layers...</td>" in setup_rows
    assert f"set-up before it took {timeline.setup_seconds:.1f}s" in page
