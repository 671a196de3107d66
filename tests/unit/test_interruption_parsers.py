"""The parser registry: each recorded event reaches the parser of its (source, detail-type) and gives the
intents the single parser gave before the split; an unregistered pair is ignored with the same words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodescale.interruption import events as ev
from nodescale.interruption.parsers import (
    capacity_reservation,
    health,
    rebalance,
    spot,
    state_change,
    zonal_shift,
)
from nodescale.interruption.parsers.registry import PARSERS

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
IID = "i-0a1b2c3d4e5f60718"
T = "2026-11-20T10:15:30+00:00"
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/demo-cluster"

# What each fixture parsed to before the parsers were split (instance, action, kind, detail, time, deadline),
# or the reason it was ignored.
EXPECTED: dict[str, object] = {
    "spot-interruption-warning.json": [(IID, "interrupt", "SpotInterruption", "terminate", T, "2026-11-20T10:17:30+00:00")],
    "rebalance-recommendation.json": [(IID, "rebalance", "RebalanceRecommendation", "", T, None)],
    "state-change-running.json": [(IID, "none", "InstanceStateChange", "running", T, None)],
    "state-change-stopping.json": [(IID, "interrupt", "InstanceStateChange", "stopping", T, None)],
    "state-change-terminated.json": [(IID, "interrupt", "InstanceStateChange", "terminated", T, None)],
    "health-scheduled-change.json": [
        (IID, "interrupt", "ScheduledChange", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", T, "2026-11-21T15:10:09+00:00")
    ],
    "capacity-reservation-interruption-warning.json": [
        (IID, "interrupt", "CapacityReservationInterruption", "terminate", T, None)
    ],
    "health-issue-not-ec2.json": "AWS Health event for service 'RDS', not EC2: not ours to act on",
    "scheduled-tick.json": "unknown detail-type 'Scheduled Event'",
    # A zone, not instances: (zone id, kind, shifted away, resources)
    "zonal-autoshift-in-progress.json": ("use1-az2", "autoshift", True, ()),
    "zonal-autoshift-completed.json": ("use1-az2", "autoshift", False, ()),
    "zonal-manual-shift-started.json": ("use1-az2", "manual", True, (CLUSTER_ARN,)),
    "zonal-manual-shift-canceled.json": ("use1-az2", "manual", False, (CLUSTER_ARN,)),
}


def load(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def _shape(result: object) -> object:
    if isinstance(result, ev.Ignored):
        return result.reason
    if isinstance(result, ev.ZoneShift):
        assert result.event_time is not None and result.event_time.isoformat() == T
        return (result.zone_id, result.kind, result.active, result.resources)
    return [
        (i.instance_id, i.action, i.kind, i.detail, i.event_time and i.event_time.isoformat(),
         i.deadline and i.deadline.isoformat())
        for i in result  # type: ignore[union-attr]
    ]


def test_every_fixture_is_covered() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in EVENTS.glob("*.json"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_parses_to_the_intents_it_always_did(name: str) -> None:
    event = load(name)
    assert _shape(ev.parse(event, "123456789012", "us-east-1")) == EXPECTED[name]
    parsed = ev.read(event)
    assert parsed.detail_type == event["detail-type"]
    assert _shape(parsed.result) == EXPECTED[name]


def test_the_registry_is_keyed_by_source_and_detail_type() -> None:
    expected = {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"): spot.parse,
        ("aws.ec2", "EC2 Instance Rebalance Recommendation"): rebalance.parse,
        ("aws.ec2", "EC2 Instance State-change Notification"): state_change.parse,
        ("aws.health", "AWS Health Event"): health.parse,
        **{("aws.arc-zonal-shift", t): zonal_shift.parse for t in (
            "Autoshift In Progress", "Autoshift Completed", "FIS Experiment Autoshift In Progress",
            "FIS Experiment Autoshift Completed", "FIS Experiment Autoshift Canceled",
            "Manual Shift Started", "Manual Shift Updated", "Manual Shift Canceled")},
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"): capacity_reservation.parse,
    }
    assert expected == PARSERS


@pytest.mark.parametrize(
    ("name", "source", "reason"),
    [
        ("spot-interruption-warning.json", "my.app",
         "EC2 Spot Instance Interruption Warning from source 'my.app', expected aws.ec2"),
        ("health-scheduled-change.json", "aws.ec2", "AWS Health Event from source 'aws.ec2', expected aws.health"),
    ],
)
def test_a_known_detail_type_from_another_source_is_ignored_naming_the_expected_one(
    name: str, source: str, reason: str
) -> None:
    result = ev.parse({**load(name), "source": source})
    assert isinstance(result, ev.Ignored) and result.reason == reason


def test_an_unknown_state_and_a_health_event_naming_no_instance_are_ignored_with_their_reason() -> None:
    stopping = load("state-change-stopping.json")
    odd = ev.parse({**stopping, "detail": {**stopping["detail"], "state": "hibernating"}})
    assert isinstance(odd, ev.Ignored) and odd.reason == "unknown instance state 'hibernating'"
    change = load("health-scheduled-change.json")
    nobody = ev.parse({**change, "detail": {**change["detail"], "affectedEntities": [{"entityValue": "vol-1"}]}})
    assert isinstance(nobody, ev.Ignored)
    assert nobody.reason == "AWS Health event names no EC2 instance in affectedEntities"


def test_the_summary_keeps_the_detail_type_of_an_ignored_event() -> None:
    assert ev.read({"detail-type": "Scheduled Event"}).detail_type == "Scheduled Event"
    assert ev.read({"detail-type": 3}).detail_type is None
    assert ev.read([1]).detail_type is None
