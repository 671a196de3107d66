"""The interruption function's per-instance report carries its replacement as data (#29.3), and its JSON
(the event summary's ``instances``) keeps its keys, their order and values."""

from __future__ import annotations

import dataclasses

import pytest

from nodescale.interruption.actions import Outcome
from nodescale.usecases.interrupt.actions import InstanceReport, ReplacementReport
from nodescale.usecases.provision.launch import Launch, PodReason


def _drained(replacement: ReplacementReport) -> InstanceReport:
    return InstanceReport("i-1", "spot-interruption", node="n1", action=Outcome.DRAINED, replacement=replacement,
                          evicted=("ns/a", "ns/b"), blocked_by_pdb=("ns/z", "ns/c"), instance_terminated=True,
                          node_deleted=True)


def test_a_drained_instance_reports_its_replacement_in_the_summary_shape() -> None:
    """#29.3: the replacement is a ReplacementReport, serialized only with the report, shape unchanged."""
    launch = Launch("default", "i-2", "m5.large", "us-east-1b", "spot", 0.0412345678, ["ns/a"], ["m5.large"], "lt")
    replacement = ReplacementReport([launch], ["in-flight/i-3"], 1, [PodReason("ns/b", "no room")], {"ICE": 1})
    assert list(_drained(replacement).to_json().items()) == [
        ("instanceId", "i-1"), ("kind", "spot-interruption"), ("node", "n1"), ("action", "drained"),
        ("alreadyDisrupted", False),
        ("replacement", {
            "launched": [{"nodePool": "default", "instanceId": "i-2", "instanceType": "m5.large",
                          "zone": "us-east-1b", "capacityType": "spot", "price": 0.041235, "pods": ["ns/a"],
                          "instanceTypes": ["m5.large"], "launchTemplate": "lt"}],
            "waitingOnInFlight": ["in-flight/i-3"], "placedOnExisting": 1,
            "unschedulable": [{"pod": "ns/b", "reason": "no room"}], "errors": {"ICE": 1}}),
        ("podsEvicted", 2), ("podsBlockedByPdb", ["ns/c", "ns/z"]), ("instanceTerminated", True),
        ("nodeDeleted", True),
    ]
    assert list(replacement.to_json()) == ["launched", "waitingOnInFlight", "placedOnExisting", "unschedulable",
                                           "errors"]


def test_a_replacement_not_planned_says_why_and_nothing_else() -> None:
    """#29.3: no plan (no pods, a failed launch, an unreadable world): ``launched`` empty and the reason."""
    report = _drained(ReplacementReport.none("no pods to move"))
    assert report.to_json()["replacement"] == {"launched": [], "reason": "no pods to move"}


def test_the_report_is_built_once_and_changed_only_by_replace() -> None:
    """#29.3: InstanceReport is frozen (each step makes the next with dataclasses.replace), so a report held
    for an event's summary cannot be changed after the fact by the code that acts on another."""
    report = _drained(ReplacementReport.none("no pods to move"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.reason = "changed"  # type: ignore[misc]
    later = dataclasses.replace(report, reason="node deleted")
    assert later.to_json()["reason"] == "node deleted" and "reason" not in report.to_json()
