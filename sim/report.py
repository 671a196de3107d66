"""A scenario's timeline, its summary, and a self-contained HTML report with a chart.

The report has no external assets (inline SVG and CSS), so it opens from disk in any browser and
can be attached to a ticket as one file.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(slots=True)
class Entry:
    at: float  # seconds since the scenario started
    what: str
    why: str = ""


@dataclass(slots=True)
class Sample:
    at: float
    pending: int
    running: int
    nodes: int
    price: float


@dataclass
class Timeline:
    title: str
    started: float = field(default_factory=time.monotonic)
    entries: list[Entry] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    echo: bool = True

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, what: str, why: str = "") -> Entry:
        entry = Entry(self.elapsed(), what, why)
        self.entries.append(entry)
        if self.echo:
            suffix = f"  ({why})" if why else ""
            print(f"[{entry.at:6.1f}s] {what}{suffix}", flush=True)
        return entry

    def sample(self, pending: int, running: int, nodes: int, price: float) -> None:
        self.samples.append(Sample(self.elapsed(), pending, running, nodes, price))


def chart_svg(samples: list[Sample], width: int = 880, height: int = 300) -> str:
    """Pending pods, running pods and nodes on the left axis; price per hour on the right."""
    if not samples:
        return "<p>No samples were taken.</p>"
    pad_l, pad_r, pad_t, pad_b = 50, 70, 20, 40
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    t_max = max(s.at for s in samples) or 1.0
    # Whole-number ticks: counts of pods and nodes.
    y_max = 4 * max(1, -(-max(max(s.pending, s.running, s.nodes) for s in samples) // 4))
    p_max = max(0.01, *(s.price for s in samples))

    def x(t: float) -> float:
        return pad_l + w * t / t_max

    def y(v: float, top: float) -> float:
        return pad_t + h - h * v / top

    def line(values: list[tuple[float, float]], top: float, color: str, dash: str = "") -> str:
        # Step lines: a count holds its value until the next sample.
        pts = []
        for i, (t, v) in enumerate(values):
            if i:
                pts.append(f"{x(t):.1f},{y(values[i - 1][1], top):.1f}")
            pts.append(f"{x(t):.1f},{y(v, top):.1f}")
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return f'<polyline fill="none" stroke="{color}" stroke-width="2"{extra} points="{" ".join(pts)}"/>'

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="#fafafa" stroke="#ccc"/>')
    for i in range(5):
        v = y_max * i / 4
        parts.append(f'<text x="{pad_l - 6}" y="{y(v, y_max) + 4:.1f}" text-anchor="end" font-size="11">{v:.0f}</text>')
        pv = p_max * i / 4
        parts.append(
            f'<text x="{pad_l + w + 6}" y="{y(pv, p_max) + 4:.1f}" font-size="11">${pv:.3f}</text>'
        )
        tv = t_max * i / 4
        parts.append(f'<text x="{x(tv):.1f}" y="{pad_t + h + 16}" text-anchor="middle" font-size="11">{tv:.0f}s</text>')
    parts.append(line([(s.at, s.pending) for s in samples], y_max, "#d62728"))
    parts.append(line([(s.at, s.running) for s in samples], y_max, "#2ca02c"))
    parts.append(line([(s.at, s.nodes) for s in samples], y_max, "#1f77b4"))
    parts.append(line([(s.at, s.price) for s in samples], p_max, "#9467bd", "5,3"))
    legend = (("pending pods", "#d62728"), ("running pods", "#2ca02c"), ("nodes", "#1f77b4"), ("$/hour (right)", "#9467bd"))
    for i, (label, color) in enumerate(legend):
        lx = pad_l + 10 + i * 150
        parts.append(f'<rect x="{lx}" y="{height - 14}" width="12" height="4" fill="{color}"/>')
        parts.append(f'<text x="{lx + 16}" y="{height - 9}" font-size="11">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


def write_html(path: Path, timeline: Timeline, summary: dict[str, object]) -> Path:
    rows = "".join(
        f"<tr><td>{e.at:.1f}s</td><td>{html.escape(e.what)}</td><td>{html.escape(e.why)}</td></tr>"
        for e in timeline.entries
    )
    summary_rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items()
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(timeline.title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 14px; }}
th {{ background: #f3f3f3; }}
</style></head><body>
<h1>{html.escape(timeline.title)}</h1>
<h2>Pending pods, nodes and price over time</h2>
{chart_svg(timeline.samples)}
<h2>Summary</h2><table>{summary_rows}</table>
<h2>Timeline</h2><table><tr><th>when</th><th>what happened</th><th>why</th></tr>{rows}</table>
</body></html>
"""
    path.write_text(page)
    return path
