"""`make demo` tells the whole story on sim/: scale out, spot interruption, scale in; and writes its report."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim import demo

pytestmark = pytest.mark.integration


def test_the_demo_story_happens_and_the_report_shows_the_chart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    report = tmp_path / "report.html"

    code = demo.main(["--report", str(report), "--dir", str(tmp_path / "sim")])

    out = capsys.readouterr().out
    assert code == 0, out
    for step in ("inflate scaled to 5", "all 5 pods Running", "spot interruption warning", "pods moved",
                 "terminated, node", "removed  (empty for longer than ttlSecondsAfterEmpty)"):
        assert step in out, step
    page = report.read_text()
    assert "<svg" in page and page.count("<polyline") == 4  # pending, running, nodes, price
    assert "the story happened" in page
