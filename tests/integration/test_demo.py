"""`make demo` tells the whole story on sim/: scale out, spot interruption held by a PodDisruptionBudget,
scale in; and writes its report (the browser's view of it: test_demo_report_browser.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim import demo
from sim.aws.iam_policies import CACHE_VARIABLE

pytestmark = pytest.mark.integration


def test_the_demo_story_happens_and_the_report_shows_the_chart(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Also #28.5: with the synthesized stack not cached yet (a first run's empty cache), the demo says each
    set-up step before the story starts, and the report's time axis starts at the story's first event."""
    report = tmp_path / "report.html"
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "sim-iam-cache"))

    code = demo.main(["--report", str(report), "--dir", str(tmp_path / "sim")])

    out = capsys.readouterr().out
    assert code == 0, out
    for step in ("PodDisruptionBudget inflate-pdb created", "inflate scaled to 5", "EC2 CreateFleet: launched",
                 "all 5 pods Running", "spot interruption warning", "DisruptionBlocked on",
                 "pods moved", "terminated, node", "PDB inflate-pdb refused the eviction",
                 "removed  (empty for longer than ttlSecondsAfterEmpty)", "EC2 TerminateInstances"):
        assert step in out, step
    assert "... waiting for" in out  # no silent wait
    _set_up_is_said_before_the_story(out, json.loads(report.with_suffix(".json").read_text()))
    page = report.read_text()
    # pending, running, instances, price, the PDB's minAvailable
    assert "<svg" in page and page.count("<polyline") == 5
    assert "the story happened" in page and report.with_suffix(".json").exists()


def _set_up_is_said_before_the_story(out: str, data: dict) -> None:
    lines = out.splitlines()

    def first(text: str) -> int:
        return next(i for i, line in enumerate(lines) if text in line)

    order = [first(t) for t in ("] synthesizing the CDK stack...", "] the CDK stack is synthesized  (in ",
                                "] starting sim/", "] sim/ is up", "] the story starts", "NodePool 'default' written")]
    assert order == sorted(order), lines[:order[-1] + 1]
    # The chart's axis is the story's: it starts at the first event, however long the set-up took (here a synth).
    at = {e["what"]: e["at"] for e in data["timeline"]}
    assert data["setupSeconds"] > 1.0 and data["chart"]["start"] == 0.0
    assert 0.0 <= at["NodePool 'default' written to SSM"] < 1.0
    assert -data["setupSeconds"] <= at["synthesizing the CDK stack..."] < at["sim/ is up"] < 0.0
    assert all(s["points"][0][0] == 0.0 for s in data["chart"]["series"].values())
    assert data["chart"]["end"] < float(data["summary"]["story time"].rstrip("s")) + 2.0
