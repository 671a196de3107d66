"""`nodescale replay` reads recorded events, reports what the handler did, and names bad input precisely."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from nodescale import cli
from nodescale.commands import replay

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_NAME", "demo-cluster")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("NODESCALE_TABLE", raising=False)


def run(argv: list[str]) -> tuple[int, str, str]:
    # No AWS here, so no lease table: --no-lease (the lease itself is tested on sim/, test_cli_lease.py).
    args = cli.build_parser().parse_args(["replay", "--no-lease", *argv])
    out, err = io.StringIO(), io.StringIO()
    return replay.run(args, out, err), out.getvalue(), err.getvalue()


def test_events_that_are_not_ours_are_reported_with_their_reason(settings_env: None) -> None:
    code, out, err = run([str(EVENTS / "health-issue-not-ec2.json"), str(EVENTS / "scheduled-tick.json"),
                          "--account", "123456789012"])
    assert code == 0 and err.count("\n") == 1 and "--no-lease" in err
    lines = out.splitlines()
    assert "health-issue-not-ec2.json" in lines[0] and "ignored" in lines[0] and "RDS" in lines[0]
    assert "scheduled-tick.json" in lines[1] and "Scheduled Event" in lines[1]


def test_a_file_may_hold_a_list_of_events_and_json_output_has_one_summary_each(
    settings_env: None, tmp_path: Path
) -> None:
    sample = json.loads((EVENTS / "spot-interruption-warning.json").read_text())
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([{**sample, "account": "999999999999"}, {**sample, "region": "eu-west-1"}]))
    code, out, _ = run([str(batch), "--account", "123456789012", "-o", "json"])
    assert code == 0
    first, second = json.loads(out)
    assert first["source"].endswith("batch.json[0]") and "account 999999999999" in first["ignored"]
    assert second["source"].endswith("batch.json[1]") and "region eu-west-1" in second["ignored"]


def test_unreadable_input_names_the_file_and_changes_nothing(settings_env: None, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out, err = run([str(bad)])
    assert code == 2 and out == ""
    assert str(bad) in err and "not JSON" in err and "line 1" in err
    code, _, err = run([str(tmp_path / "missing.json")])
    assert code == 2 and "missing.json: cannot read the file" in err


def test_missing_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    code, _, err = run([str(EVENTS / "scheduled-tick.json")])
    assert code == 2 and "CLUSTER_NAME" in err


def test_text_is_one_line_per_event_and_names_a_duplicate_with_when_it_was_handled() -> None:
    first = {"source": "a.json", "detailType": "EC2 Spot Instance Interruption Warning", "eventId": "e-1",
             "ignored": None, "handledAt": "2026-11-01T12:00:00Z", "currency": "CNY",
             "instances": [{"instanceId": "i-1", "node": "n1", "action": "draining", "reason": "spot interruption",
                            "replacement": {"launched": [{"instanceType": "m5.large", "instanceId": "i-2",
                                                          "price": 0.5}]}}]}
    repeat = {**first, "source": "b.json", "duplicate": True}
    lines = replay.to_text([first, repeat]).splitlines()
    assert lines == [
        "a.json: EC2 Spot Instance Interruption Warning (e-1): 1 instance(s)",
        "  i-1 node=n1 draining (spot interruption) replacement=m5.large/i-2 (¥0.5000/h)",
        "b.json: EC2 Spot Instance Interruption Warning (e-1): duplicate of event e-1 handled at "
        "2026-11-01T12:00:00Z: nothing done again",
    ]
