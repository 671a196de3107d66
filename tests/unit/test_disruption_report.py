"""The disruption report's entries are dataclasses serialized once (``to_json``) into the summary's
unchanged camelCase shape, #29.3: a failed replacement is a typed change, not a dict key overwritten."""

from __future__ import annotations

import json

from nodescale.disruption.decisions import Action, Blocked, Blocker, Decision, Reason
from nodescale.disruption.replacement import Replacement
from nodescale.usecases.disrupt.state import DecisionEntry, RefusalEntry, Report
from tests.builders import replacement


def repl(pool: str, itype: str, price: float) -> Replacement:
    return replacement(pool, price, [(itype, price, "spot")], ["spot"])


def test_a_replace_decision_serializes_in_the_summary_shape():
    d = Decision(["a", "b"], Reason.UNDERUTILIZED, "ignored", Action.REPLACE, saving_per_hour=0.12345678,
                 pods=["ns/p"], score=0.123456,
                 replacements=[repl("default", "m5.large", 0.096), repl("other", "c5.large", 0.085)])
    entry = DecisionEntry.of(d, "underutilized: shown")
    entry.replacement_instances = ["i-1"]
    assert json.dumps(entry.to_json()) == json.dumps({
        "nodes": ["a", "b"], "reason": "Underutilized", "action": "replace", "detail": "underutilized: shown",
        "savingPerHour": 0.123457, "pods": 1, "score": 0.1235,
        "replacement": {"nodePool": "default", "instanceType": "m5.large", "pricePerHour": 0.096},
        "replacements": [{"nodePool": "default", "instanceType": "m5.large", "pricePerHour": 0.096},
                         {"nodePool": "other", "instanceType": "c5.large", "pricePerHour": 0.085}],
        "replacementInstances": ["i-1"],
    })


def test_a_failed_replacement_keeps_the_action_key_in_place_and_adds_the_error():
    d = Decision(["a"], Reason.DRIFTED, "drifted", Action.REPLACE, replacements=[repl("default", "m5.large", 0.1)])
    entry = DecisionEntry.of(d, "drifted")
    entry.replacement_failed("no capacity")
    assert entry.action is Action.NONE
    assert list(entry.to_json()) == ["nodes", "reason", "action", "detail", "savingPerHour", "pods", "replacement",
                                     "error"]
    assert entry.to_json()["error"] == "replacement could not be launched: no capacity"
    assert entry.to_json()["action"] == "none"


def test_the_report_serializes_its_entries_and_sums_the_savings():
    report = Report(dry_run=True)
    report.decisions.append(DecisionEntry.of(Decision(["a"], Reason.EMPTY, "empty", saving_per_hour=0.1), "empty"))
    report.decisions.append(DecisionEntry.of(Decision(["b"], Reason.EMPTY, "empty", saving_per_hour=0.2), "empty"))
    report.refused.append(RefusalEntry.of(Blocked(["c"], Reason.EMPTY, "held", Blocker.PDB), "not removed: held"))
    out = report.to_dict()
    assert out["pricePerHourSaved"] == 0.3
    assert [d["nodes"] for d in out["decisions"]] == [["a"], ["b"]]
    assert out["refused"] == [{"nodes": ["c"], "reason": "Empty", "blockedBy": "pdb", "why": "not removed: held"}]
