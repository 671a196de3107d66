"""sim/report.py: step series from changes, and a page that embeds the data its chart draws."""

from __future__ import annotations

import json
import re
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
