"""`demo-report.html` in a real browser: the chart drawn is the story that happened.

The demo runs on sim/, writes its report and the report's data (`.json`: the timeline, the facts read
from the environment, the chart's series). Headless Chromium opens the page; what it drew (each line's
points, turned back into times and values with the scale on the <svg>) must match the series, and the
series must match the facts: one instance's price until the replacement's CreateFleet, twice that while
the replacement and the interrupted instance overlap, zero after the last TerminateInstances, where the
chart ends. A screenshot of the page is kept next to the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim import demo
from sim.report import value_at
from tests.integration.browser import Browser, chromium_path

pytestmark = pytest.mark.integration

READ_PAGE = """(() => {
  const svg = document.getElementById('chart');
  const num = k => parseFloat(svg.dataset[k]);
  const [px, py, pw, ph, end] = ['plotX', 'plotY', 'plotW', 'plotH', 'end'].map(num);
  const top = {left: num('leftMax'), right: num('rightMax')};
  const embedded = JSON.parse(document.getElementById('chart-data').textContent);
  const lines = {};
  for (const pl of svg.querySelectorAll('polyline[data-series]')) {
    const key = pl.dataset.series, style = getComputedStyle(pl);
    const top_ = top[embedded.chart.series[key].axis];
    lines[key] = {dash: style.strokeDasharray, width: style.strokeWidth, drawnWidth: pl.getBBox().width,
                  points: Array.from(pl.points).map(p => [(p.x - px) * end / pw, (py + ph - p.y) * top_ / ph])};
  }
  return {embedded, lines, end, pxPerSecond: pw / end, pxPerUnit: {left: ph / top.left, right: ph / top.right},
          legend: Array.from(svg.querySelectorAll('#legend text')).map(t => t.textContent),
          rows: Array.from(document.querySelectorAll('#timeline tr')).slice(1)
                  .map(r => Array.from(r.cells).map(c => c.textContent))};
})()"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # No skip: without a browser this test fails and says how to get one (`make test` installs it).
    assert chromium_path() is not None, "chromium is not installed: `make browser` (apt-get install -y chromium)"
    tmp = tmp_path_factory.mktemp("demo-browser")
    path = tmp / "demo-report.html"
    assert demo.main(["--report", str(path), "--dir", str(tmp / "sim")]) == 0
    return path


def test_the_chart_in_the_browser_is_the_story_that_happened(report: Path) -> None:
    data = json.loads(report.with_suffix(".json").read_text())
    with Browser() as browser:
        browser.open(report.as_uri())
        page = browser.evaluate(READ_PAGE)
        shot = browser.screenshot(report.with_suffix(".png"))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 20_000

    assert page["embedded"] == data  # the page shows the data the demo wrote
    series = {key: [tuple(p) for p in s["points"]] for key, s in data["chart"]["series"].items()}
    _drawn_as_the_series(page, series, data["chart"]["series"])
    _series_from_the_facts(series, data)
    _price_doubles_while_two_instances_overlap(series, data)
    _lines_tell_apart(page, data)
    _the_pdb_held(series, data, page["rows"])


def _drawn_as_the_series(page: dict[str, Any], series: dict[str, list[tuple[float, float]]],
                         meta: dict[str, Any]) -> None:
    """Each polyline, read back through the chart's scale, is its series drawn as steps (to half a pixel)."""
    assert set(page["lines"]) == set(series)
    for key, points in series.items():
        expected = [points[0]]
        for i in range(1, len(points)):
            expected += [(points[i][0], points[i - 1][1]), points[i]]
        drawn = page["lines"][key]["points"]
        assert len(drawn) == len(expected), key
        dt, dv = 0.5 / page["pxPerSecond"], 0.5 / page["pxPerUnit"][meta[key]["axis"]]
        for (t, v), (et, ev) in zip(drawn, expected, strict=True):
            assert abs(t - et) <= dt and abs(v - ev) <= dv, (key, (t, v), (et, ev))
        assert page["lines"][key]["drawnWidth"] > 0, key


def _series_from_the_facts(series: dict[str, list[tuple[float, float]]], data: dict[str, Any]) -> None:
    """Instances and price at every moment are the launches (CreateFleet) not yet terminated
    (TerminateInstances), as the demo read them from sim's AWS call log; the chart runs past the last one."""
    launches = {x["instance_id"]: x for x in data["facts"]["launches"]}
    ended = {x["instance_id"]: x["at"] for x in data["facts"]["terminations"]}
    assert len(launches) == 2 and set(ended) == set(launches)
    end = data["chart"]["end"]
    assert end > max(ended.values())
    moments = sorted({0.0, end, *(x["at"] for x in launches.values()), *ended.values()})
    for a, b in zip(moments, moments[1:], strict=False):
        t = (a + b) / 2
        alive = [x for i, x in launches.items() if x["at"] <= t < ended[i]]
        assert value_at(series["instances"], t) == len(alive), t
        assert value_at(series["price"], t) == pytest.approx(sum(x["price"] for x in alive)), t
    assert series["price"][-1] == (end, 0.0) and series["instances"][-1] == (end, 0.0)
    # The timeline says each launch and termination at the time of its EC2 call, not when a summary came back.
    entries = data["timeline"]
    for iid, launch in launches.items():
        assert any(e["what"].startswith(f"EC2 CreateFleet: launched {iid}") and e["at"] == launch["at"] for e in entries)
        assert any(e["what"] == f"EC2 TerminateInstances: {iid} terminated" and e["at"] == ended[iid] for e in entries)


def _price_doubles_while_two_instances_overlap(series: dict[str, list[tuple[float, float]]], data: dict[str, Any]) -> None:
    warned = next(e["what"] for e in data["timeline"] if e["what"].startswith("spot interruption warning for "))
    interrupted = warned.split()[4]
    launches = {x["instance_id"]: x for x in data["facts"]["launches"]}
    ended = {x["instance_id"]: x["at"] for x in data["facts"]["terminations"]}
    replacement = next(i for i in launches if i != interrupted)
    start, stop = launches[replacement]["at"], ended[interrupted]
    assert start < stop, "the replacement was launched before the interrupted instance went"
    both = launches[interrupted]["price"] + launches[replacement]["price"]
    assert value_at(series["price"], (start + stop) / 2) == pytest.approx(both)
    assert max(v for _, v in series["price"]) == pytest.approx(both)
    assert value_at(series["price"], stop + 1e-3) == pytest.approx(launches[replacement]["price"])


def _lines_tell_apart(page: dict[str, Any], data: dict[str, Any]) -> None:
    """Every line has its own dash pattern (or width) and a legend entry."""
    styles = {key: (line["dash"], line["width"]) for key, line in page["lines"].items()}
    assert len(set(styles.values())) == len(styles), styles
    assert styles["pending"][0] != styles["running"][0]
    for s in data["chart"]["series"].values():
        assert any(text.startswith(s["label"]) for text in page["legend"]), s["label"]


def _the_pdb_held(series: dict[str, list[tuple[float, float]]], data: dict[str, Any], rows: list[list[str]]) -> None:
    """The drain waited for the budget: DisruptionBlocked events were seen, and no fewer than minAvailable
    pods ran from the warning until the interrupted instance was terminated."""
    assert any(r[1].startswith("DisruptionBlocked on") and "PodDisruptionBudget" in r[2] for r in rows)
    assert data["facts"]["disruptionBlocked"]
    warned = next(e for e in data["timeline"] if e["what"].startswith("spot interruption warning for "))
    interrupted = warned["what"].split()[4]
    stop = next(x["at"] for x in data["facts"]["terminations"] if x["instance_id"] == interrupted)
    floor = series["minAvailable"][0][1]
    during = [v for t, v in series["running"] if warned["at"] <= t <= stop]
    assert during and min(during) >= floor
    assert min(during) == floor  # the budget was used to its limit: one pod down at a time
