"""`make demo` tells the whole story on sim/: scale out, spot interruption held by a PodDisruptionBudget,
scale in; and writes its report (the browser's view of it: test_demo_report_browser.py)."""

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
    for step in ("PodDisruptionBudget inflate-pdb created", "inflate scaled to 5", "EC2 CreateFleet: launched",
                 "all 5 pods Running", "spot interruption warning", "DisruptionBlocked on",
                 "pods moved", "terminated, node", "PDB inflate-pdb refused the eviction",
                 "removed  (empty for longer than ttlSecondsAfterEmpty)", "EC2 TerminateInstances"):
        assert step in out, step
    assert "... waiting for" in out  # no silent wait
    page = report.read_text()
    # pending, running, instances, price, the PDB's minAvailable
    assert "<svg" in page and page.count("<polyline") == 5
    assert "the story happened" in page and report.with_suffix(".json").exists()
