"""A scenario's timeline, its summary, and a self-contained HTML report with a chart.

The report has no external assets (inline SVG and CSS), so it opens from disk in any browser and
can be attached to a ticket as one file. The chart's series are embedded in the page as JSON
(`<script type="application/json" id="chart-data">`), next to the timeline they were computed from,
and the same document is written beside the page (`<report>.json`) for tools and tests.
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Point = tuple[float, float]  # (seconds since the story started, value)


@dataclass(slots=True)
class Entry:
    at: float  # seconds since the story started; negative: set-up, before it
    what: str
    why: str = ""


@dataclass
class Timeline:
    """What happened, in seconds since the story started. Until `begin_story`, the clock counts from the
    timeline's creation (set-up: building, synthesizing, starting sim/); then it restarts at the story's first
    event, and the set-up's entries keep their place before it, at negative times."""

    title: str
    started: float = field(default_factory=time.monotonic)
    started_epoch: float = field(default_factory=time.time)  # the same instant on the wall clock
    entries: list[Entry] = field(default_factory=list)
    echo: bool = True
    setup_seconds: float = 0.0  # from the timeline's creation to the story's start: never on the chart's axis

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def since_start(self, epoch: float) -> float:
        """Seconds since the story started of a wall-clock time (`time.time()`), e.g. a logged AWS call's."""
        return epoch - self.started_epoch

    def begin_story(self, what: str = "the story starts") -> Entry:
        """The story's clock starts now (0 s, where the chart's axis starts); what came before is set-up.

        A first run builds for minutes before the story: on a wall clock since sim started, the story
        would be squeezed into the chart's last few percent."""
        offset = self.elapsed()
        self.started += offset
        self.started_epoch += offset
        self.setup_seconds = round(self.setup_seconds + offset, 3)
        for entry in self.entries:
            entry.at = round(entry.at - offset, 3)
        return self.log(what, f"after {self.setup_seconds:.1f}s of set-up; times from here are the story's, "
                              "as on the report's chart", at=0.0)

    def log(self, what: str, why: str = "", at: float | None = None) -> Entry:
        """Record (and print) what happened; `at` when it happened earlier than now (seen after the fact)."""
        entry = Entry(self.elapsed() if at is None else at, what, why)
        self.entries.append(entry)
        if self.echo:
            suffix = f"  ({why})" if why else ""
            print(f"[{entry.at:6.1f}s] {what}{suffix}", flush=True)
        return entry

    def ordered(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: e.at)


@dataclass(frozen=True, slots=True)
class Series:
    """One line of the chart: a step function (each value holds until the next point)."""

    key: str
    label: str
    points: list[Point]
    color: str
    dash: str  # SVG stroke-dasharray, "" for solid
    width: float
    marker: str  # "circle", "square", "triangle", "diamond" or "" (drawn where the value changes)
    axis: str = "left"  # "left": counts; "right": $/hour


@dataclass
class Chart:
    series: list[Series]
    end: float  # seconds: the time axis runs from the story's start (0) to here
    marks: list[tuple[float, str]] = field(default_factory=list)  # labelled moments (vertical rules)

    def data(self) -> dict[str, Any]:
        return {
            "start": 0.0,  # the story's first event; set-up before it is the report's setupSeconds
            "end": self.end,
            "series": {s.key: {"label": s.label, "axis": s.axis, "points": [list(p) for p in s.points]} for s in self.series},
            "marks": [{"at": at, "label": label} for at, label in self.marks],
        }


def steps(changes: list[Point], end: float, start_value: float = 0.0) -> list[Point]:
    """A step series from (time, delta) changes: the running total from 0 s to `end`; simultaneous
    changes are folded into one point."""
    points: list[Point] = [(0.0, start_value)]
    total = start_value
    for at, delta in sorted(changes):
        total = round(total + delta, 6)
        if points and abs(points[-1][0] - at) < 1e-9:
            points[-1] = (at, total)
        else:
            points.append((at, total))
    if points[-1][0] < end:
        points.append((end, total))
    return points


def value_at(points: list[Point], t: float) -> float:
    """The step series' value at time t (the last point at or before t)."""
    value = points[0][1] if points else 0.0
    for at, v in points:
        if at > t:
            break
        value = v
    return value


# ---------------------------------------------------------------------------------------------- the chart
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 50, 80, 28, 34
_LEGEND_ROW = 20


def chart_svg(chart: Chart, width: int = 960, height: int = 360) -> str:
    """Pods and instances on the left axis, $/hour on the right; a legend row under the plot.

    The plot's scale is on the <svg> element (data-plot-*, data-left-max, data-right-max, data-end), so
    a reader (or a test) can turn any drawn point back into its time and value."""
    if not any(s.points for s in chart.series):
        return "<p>Nothing was observed.</p>"
    plot_h = height - _PAD_T - _PAD_B - _LEGEND_ROW * 2
    scale = _Scale(chart, width - _PAD_L - _PAD_R, plot_h)
    parts = [
        f'<svg id="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="pods, instances and price over time" data-plot-x="{_PAD_L}" data-plot-y="{_PAD_T}" '
        f'data-plot-w="{scale.w}" data-plot-h="{scale.h}" data-end="{scale.end}" '
        f'data-left-max="{scale.left_max}" data-right-max="{scale.right_max}">',
        f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{scale.w}" height="{scale.h}" fill="#fafafa" stroke="#ccc"/>',
        *_axes(scale),
        *_marks(chart.marks, scale),
    ]
    for s in chart.series:
        parts.append(_polyline(s, scale))
        parts.extend(_markers(s, scale))
    parts.extend(_legend(chart.series, height))
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class _Scale:
    chart: Chart
    w: int
    h: int
    end: float = 1.0
    left_max: float = 4.0
    right_max: float = 0.01

    def __post_init__(self) -> None:
        self.end = max(self.chart.end, 1.0)
        counts = [v for s in self.chart.series if s.axis == "left" for _, v in s.points]
        prices = [v for s in self.chart.series if s.axis == "right" for _, v in s.points]
        # Whole-number ticks for counts (pods, instances), with a step of headroom above the highest.
        self.left_max = float(2 * max(2, -(-int(max(counts, default=1) + 1) // 2)))
        # The highest price at a bit over half the height: clear of the pods above and the instances below.
        self.right_max = max(0.01, max(prices, default=0.0) * 1.85)

    def x(self, t: float) -> float:
        return _PAD_L + self.w * t / self.end

    def y(self, v: float, axis: str) -> float:
        top = self.right_max if axis == "right" else self.left_max
        return _PAD_T + self.h - self.h * v / top


def _nice_step(span: float, most: int) -> float:
    """The smallest of 1, 2, 5, 10, 15, 20, 30, 60 ... that makes at most `most` steps over `span`."""
    for step in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600):
        if span / step <= most:
            return float(step)
    return span / most


def _axes(scale: _Scale) -> list[str]:
    parts = []
    step = _nice_step(scale.left_max, 8)
    for i in range(int(scale.left_max // step) + 1):
        v, y = i * step, scale.y(i * step, "left")
        parts.append(f'<line x1="{_PAD_L}" y1="{y:.1f}" x2="{_PAD_L + scale.w}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{_PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{v:g}</text>')
    for i in range(5):
        pv = scale.right_max * i / 4
        parts.append(f'<text x="{_PAD_L + scale.w + 6}" y="{scale.y(pv, "right") + 4:.1f}" font-size="11">${pv:.3f}</text>')
    step = _nice_step(scale.end, 12)
    for i in range(int(scale.end // step) + 1):
        x = scale.x(i * step)
        parts.append(f'<line x1="{x:.1f}" y1="{_PAD_T + scale.h}" x2="{x:.1f}" y2="{_PAD_T + scale.h + 4}" stroke="#999"/>')
        parts.append(f'<text x="{x:.1f}" y="{_PAD_T + scale.h + 16}" text-anchor="middle" font-size="11">{i * step:g}s</text>')
    parts.append(f'<text x="{_PAD_L - 40}" y="{_PAD_T - 10}" font-size="11">pods, instances</text>')
    parts.append(f'<text x="{_PAD_L + scale.w - 20}" y="{_PAD_T - 10}" font-size="11">$/hour</text>')
    return parts


def _marks(marks: list[tuple[float, str]], scale: _Scale) -> list[str]:
    parts = []
    for i, (at, label) in enumerate(marks):
        x = scale.x(at)
        parts.append(
            f'<line class="mark" x1="{x:.1f}" y1="{_PAD_T}" x2="{x:.1f}" y2="{_PAD_T + scale.h}" stroke="#999" '
            'stroke-width="1" stroke-dasharray="1,3"/>'
        )
        parts.append(
            f'<text x="{x + 3:.1f}" y="{_PAD_T + 12 + 12 * (i % 3)}" font-size="10" fill="#555">{html.escape(label)}</text>'
        )
    return parts


def _polyline(s: Series, scale: _Scale) -> str:
    pts: list[str] = []
    for i, (t, v) in enumerate(s.points):
        if i:  # a step: hold the previous value until this point's time
            pts.append(f"{scale.x(t):.2f},{scale.y(s.points[i - 1][1], s.axis):.2f}")
        pts.append(f"{scale.x(t):.2f},{scale.y(v, s.axis):.2f}")
    dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
    return (
        f'<polyline data-series="{s.key}" fill="none" stroke="{s.color}" stroke-width="{s.width}"{dash} '
        f'stroke-linejoin="round" points="{" ".join(pts)}"/>'
    )


def _marker(kind: str, x: float, y: float, color: str) -> str:
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="white" stroke="{color}" stroke-width="1.5"/>'
    if kind == "square":
        return f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" fill="{color}"/>'
    shapes = {"triangle": ((0, -4.5), (4, 3), (-4, 3)), "diamond": ((0, -4.5), (4.5, 0), (0, 4.5), (-4.5, 0))}
    pts = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in shapes.get(kind, ()))
    return f'<polygon points="{pts}" fill="{color}"/>' if pts else ""


def _markers(s: Series, scale: _Scale) -> list[str]:
    """A marker where the value changes, so two lines on the same values can still be told apart."""
    out = []
    for i, (t, v) in enumerate(s.points):
        if i and v != s.points[i - 1][1]:
            out.append(_marker(s.marker, scale.x(t), scale.y(v, s.axis), s.color))
    return [f'<g data-markers="{s.key}">{"".join(out)}</g>'] if out else []


def _legend(series: list[Series], height: int) -> list[str]:
    parts = ['<g id="legend">']
    for i, s in enumerate(series):
        lx = _PAD_L + (i % 3) * 290
        ly = height - _LEGEND_ROW * (2 - i // 3) + 4
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        parts.append(
            f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 34}" y2="{ly - 4}" stroke="{s.color}" stroke-width="{s.width}"{dash}/>'
        )
        parts.append(_marker(s.marker, lx + 17, ly - 4, s.color))
        side = " (right axis)" if s.axis == "right" else ""
        parts.append(f'<text x="{lx + 40}" y="{ly}" font-size="12">{html.escape(s.label + side)}</text>')
    parts.append("</g>")
    return parts


# ---------------------------------------------------------------------------------------------- the page
def report_data(timeline: Timeline, summary: dict[str, object], chart: Chart, facts: dict[str, Any]) -> dict[str, Any]:
    """Everything the page shows, as one JSON document: timeline, summary, the facts read from the
    environment (launches, terminations, ...) and the chart's series computed from them."""
    return {
        "title": timeline.title,
        "setupSeconds": timeline.setup_seconds,
        "timeline": [asdict(e) for e in timeline.ordered()],
        "summary": {str(k): str(v) for k, v in summary.items()},
        "facts": facts,
        "chart": chart.data(),
    }


def write_html(
    path: Path, timeline: Timeline, summary: dict[str, object], chart: Chart, facts: dict[str, Any] | None = None
) -> Path:
    """The page at `path` and its data beside it (`path` with the suffix `.json`)."""
    data = report_data(timeline, summary, chart, facts or {})
    entries = timeline.ordered()
    rows = _rows([e for e in entries if e.at >= 0], 0.0)
    # Set-up rows in seconds since the demo started, as printed while it ran.
    setup_rows = _rows([e for e in entries if e.at < 0], timeline.setup_seconds)
    summary_rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items()
    )
    # `</` cannot close the script element early: JSON allows "<\/".
    embedded = json.dumps(data).replace("</", "<\\/")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(timeline.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 14px; }}
th {{ background: #f3f3f3; }}
</style></head><body>
<h1>{html.escape(timeline.title)}</h1>
<h2>Pods, instances and price over time</h2>
<p id="setup-note">{_setup_note(timeline.setup_seconds)}</p>
{chart_svg(chart)}
<h2>Summary</h2><table id="summary">{summary_rows}</table>
<h2>Timeline</h2><table id="timeline"><tr><th>when</th><th>what happened</th><th>why</th></tr>{rows}</table>
<h2>Set-up, before the story</h2><table id="setup"><tr><th>when</th><th>what happened</th><th>why</th></tr>{setup_rows}</table>
<script type="application/json" id="chart-data">{embedded}</script>
</body></html>
"""
    path.write_text(page)
    path.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")
    return path


def _rows(entries: list[Entry], shift: float) -> str:
    return "".join(
        f"<tr><td>{e.at + shift:.1f}s</td><td>{html.escape(e.what)}</td><td>{html.escape(e.why)}</td></tr>"
        for e in entries
    )


def _setup_note(seconds: float) -> str:
    return (f"Seconds since the story started (0 s: its first event). The set-up before it took {seconds:.1f}s "
            "(see Set-up below) and is not on the time axis.")
