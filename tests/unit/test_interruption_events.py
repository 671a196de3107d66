"""Interruption events become the intents the events README names; bad input is ignored, never raised."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nodescale.interruption import events as ev

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
IID = "i-0a1b2c3d4e5f60718"


def load(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def test_spot_warning_interrupts_with_two_minute_deadline():
    intents = ev.parse(load("spot-interruption-warning.json"), "123456789012", "us-east-1")
    assert [(i.instance_id, i.action, i.kind) for i in intents] == [(IID, ev.INTERRUPT, "SpotInterruption")]
    assert (intents[0].deadline - intents[0].event_time).total_seconds() == 120


def test_rebalance_is_recorded_not_acted_on():
    (intent,) = ev.parse(load("rebalance-recommendation.json"))
    assert intent.action == ev.REBALANCE_RISK


def test_state_changes():
    for name, action, state in (
        ("state-change-stopping.json", ev.INTERRUPT, "stopping"),
        ("state-change-terminated.json", ev.INTERRUPT, "terminated"),
        ("state-change-running.json", ev.NO_ACTION, "running"),
    ):
        (intent,) = ev.parse(load(name))
        assert (intent.action, intent.detail) == (action, state), name


def test_health_scheduled_change_targets_affected_instances_before_start():
    (intent,) = ev.parse(load("health-scheduled-change.json"))
    assert intent.action == ev.INTERRUPT and intent.kind == "ScheduledChange"
    assert intent.deadline.isoformat() == "2026-11-21T15:10:09+00:00"
    assert intent.detail == "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"


def test_health_event_for_another_service_is_ignored_with_reason():
    result = ev.parse(load("health-issue-not-ec2.json"))
    assert isinstance(result, ev.Ignored) and "RDS" in result.reason


def test_scheduled_tick_is_not_an_interruption():
    result = ev.parse(load("scheduled-tick.json"))
    assert isinstance(result, ev.Ignored) and "Scheduled Event" in result.reason


def test_other_account_and_region_are_ignored():
    event = load("spot-interruption-warning.json")
    assert "account" in ev.parse(event, account="999999999999").reason
    assert "region" in ev.parse(event, region="eu-west-1").reason


def test_malformed_events_are_ignored_with_a_reason():
    base = load("spot-interruption-warning.json")
    cases = {
        "no detail": {k: v for k, v in base.items() if k != "detail"},
        "bad id": {**base, "detail": {"instance-id": "not-an-id"}},
        "id as number": {**base, "detail": {"instance-id": 12}},
        "huge": {**base, "padding": "x" * (300 * 1024)},
        "unknown type": {**base, "detail-type": "Something Else"},
        "wrong source": {**base, "source": "my.app"},
    }
    for name, event in cases.items():
        assert isinstance(ev.parse(event), ev.Ignored), name
    assert isinstance(ev.parse([1, 2]), ev.Ignored)
    assert isinstance(ev.parse(None), ev.Ignored)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=1500, deadline=None)
@given(
    detail_type=st.sampled_from([ev.SPOT_WARNING, ev.REBALANCE, ev.STATE_CHANGE, ev.HEALTH, "x"]) | st.text(max_size=10),
    source=st.sampled_from(["aws.ec2", "aws.health"]) | json_values,
    detail=json_values,
    extra=st.dictionaries(st.text(max_size=10), json_values, max_size=3),
)
def test_random_events_never_raise(detail_type, source, detail, extra):
    event = {**extra, "detail-type": detail_type, "source": source, "detail": detail,
             "account": "123456789012", "region": "us-east-1", "id": "x"}
    result = ev.parse(event)
    assert isinstance(result, ev.Ignored) or all(isinstance(i, ev.Intent) for i in result)


def test_an_interruptible_capacity_reservation_warning_interrupts_its_instance():
    # karpenter-provider-aws interruption suite_test.go, Entry "with capacity reservation interruption messages".
    (intent,) = ev.parse(load("capacity-reservation-interruption-warning.json"), "123456789012", "us-east-1")
    assert (intent.instance_id, intent.action, intent.kind) == (IID, ev.INTERRUPT, "CapacityReservationInterruption")
    assert intent.deadline is None
