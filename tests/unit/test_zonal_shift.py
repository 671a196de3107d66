"""ARC zonal shifts: parsed from their EventBridge events, recorded in the shared table (newest event per
zone and kind wins), and the shifted zone's offerings taken out of what may launch.

Event shapes: ARC Developer Guide, "Using zonal autoshift with Amazon EventBridge" (tests/fixtures/events/zonal-*).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from nodescale.aws import zonalshifts
from nodescale.interruption import events as ev
from nodescale.interruption.actions import zone_shift_ignored
from nodescale.interruption.intents import ShiftKind, ZoneShift
from nodescale.model import zonalshift
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt.summary import EventSummary, ZonalShiftRecord
from tests import fakes

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
TABLE = "nodescale-demo-cluster-state"
NOW = 1_800_000_000.0
DAY = 24 * 3600.0
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/demo-cluster"
ZONES = {"AvailabilityZones": [{"ZoneName": "us-east-1a", "ZoneId": "use1-az6"},
                               {"ZoneName": "us-east-1c", "ZoneId": "use1-az2"}]}


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture(scope="module")
def dynamodb():
    with fakes.state_table(TABLE) as client:
        yield client


@pytest.fixture(autouse=True)
def _empty(request: pytest.FixtureRequest):
    zonalshifts.clear_local()
    yield
    # Only a test that asked for the table starts moto: the others stay in `make test-fast`.
    if "dynamodb" in request.fixturenames:
        dynamodb = request.getfixturevalue("dynamodb")
        for item in dynamodb.scan(TableName=TABLE)["Items"]:
            dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"]})
    zonalshifts.clear_local()


# ------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize("away", [None, "", "us-east-1c", 7, "use1-az2; drop table"])
def test_an_event_without_a_zone_id_in_away_from_is_ignored_naming_the_field(away: object) -> None:
    event = load("zonal-autoshift-in-progress.json")
    event["detail"]["metadata"]["awayFrom"] = away
    result = ev.parse(event, "123456789012", "us-east-1")
    assert isinstance(result, ev.Ignored)
    assert "detail.metadata.awayFrom" in result.reason and "use1-az1" in result.reason


def test_practice_runs_and_unknown_detail_types_are_ignored() -> None:
    event = load("zonal-autoshift-in-progress.json")
    for detail_type in ("Practice Run Started", "Zonal Shift Started"):
        result = ev.parse({**event, "detail-type": detail_type})
        assert isinstance(result, ev.Ignored) and result.reason == f"unknown detail-type {detail_type!r}"


def test_a_zonal_shift_detail_type_from_another_source_is_ignored() -> None:
    result = ev.parse({**load("zonal-autoshift-in-progress.json"), "source": "my.app"})
    assert isinstance(result, ev.Ignored)
    assert result.reason == "Autoshift In Progress from source 'my.app', expected aws.arc-zonal-shift"


def test_updated_keeps_the_zone_shifted_and_fis_experiments_are_their_own_kind() -> None:
    event = load("zonal-manual-shift-started.json")
    updated = ev.parse({**event, "detail-type": "Manual Shift Updated"})
    assert isinstance(updated, ZoneShift) and updated.active and updated.kind == ShiftKind.MANUAL
    fis = ev.parse({**event, "detail-type": "FIS Experiment Autoshift Canceled"})
    assert isinstance(fis, ZoneShift) and not fis.active and fis.kind == ShiftKind.FIS_AUTOSHIFT


# ------------------------------------------------------------------------------------------ whose shift


def _shift(kind: ShiftKind, *resources: str) -> ZoneShift:
    return ZoneShift("use1-az2", kind, True, "e", None, resources)


def test_an_autoshift_applies_whatever_resources_it_names() -> None:
    elb = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/web/1"
    assert zone_shift_ignored(_shift(ShiftKind.AUTOSHIFT, elb), "demo-cluster") is None
    assert zone_shift_ignored(_shift(ShiftKind.FIS_AUTOSHIFT), "demo-cluster") is None


def test_a_manual_shift_applies_to_this_cluster_or_to_nothing_named_only() -> None:
    elb = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/web/1"
    assert zone_shift_ignored(_shift(ShiftKind.MANUAL, CLUSTER_ARN), "demo-cluster") is None
    assert zone_shift_ignored(_shift(ShiftKind.MANUAL), "demo-cluster") is None
    reason = zone_shift_ignored(_shift(ShiftKind.MANUAL, elb), "demo-cluster")
    assert reason is not None and elb in reason and "demo-cluster" in reason
    other = zone_shift_ignored(_shift(ShiftKind.MANUAL, CLUSTER_ARN + "-2"), "demo-cluster")
    assert other is not None, "a cluster whose name only starts like ours is another cluster"


# ------------------------------------------------------------------------------------------ the record


@pytest.mark.adapter  # moto's DynamoDB
@pytest.mark.parametrize("table", [TABLE, None], ids=["table", "in-process"])
def test_a_shift_holds_until_its_end_event(dynamodb, table: str | None) -> None:
    assert zonalshifts.record(dynamodb, table, "use1-az2", "autoshift", True, NOW, NOW)
    (shift,) = zonalshifts.active(dynamodb, table, ["use1-az2", "use1-az6"], NOW + 60).values()
    assert shift.zone_id == "use1-az2" and shift.kinds == ("autoshift",)
    assert shift.until == NOW + zonalshifts.MAX_SHIFT_SECONDS
    assert zonalshifts.record(dynamodb, table, "use1-az2", "autoshift", False, NOW + 120, NOW + 120)
    assert zonalshifts.active(dynamodb, table, ["use1-az2"], NOW + 121) == {}


@pytest.mark.adapter  # moto's DynamoDB
@pytest.mark.parametrize("table", [TABLE, None], ids=["table", "in-process"])
def test_an_end_delivered_before_its_start_still_wins(dynamodb, table: str | None) -> None:
    """EventBridge delivers at least once and in no set order: the older event changes nothing."""
    assert zonalshifts.record(dynamodb, table, "use1-az2", "manual", False, NOW + 300, NOW + 301)
    assert not zonalshifts.record(dynamodb, table, "use1-az2", "manual", True, NOW, NOW + 302)
    assert zonalshifts.active(dynamodb, table, ["use1-az2"], NOW + 303) == {}
    # A repeat of the newest event lands again, harmlessly.
    assert zonalshifts.record(dynamodb, table, "use1-az2", "manual", False, NOW + 300, NOW + 304)


@pytest.mark.adapter  # moto's DynamoDB
def test_each_kind_ends_on_its_own_and_a_shift_without_end_lapses_after_three_days(dynamodb) -> None:
    zonalshifts.record(dynamodb, TABLE, "use1-az2", "autoshift", True, NOW, NOW)
    zonalshifts.record(dynamodb, TABLE, "use1-az2", "manual", True, NOW + 10, NOW + 10)
    zonalshifts.record(dynamodb, TABLE, "use1-az2", "autoshift", False, NOW + 20, NOW + 20)
    (shift,) = zonalshifts.active(dynamodb, TABLE, ["use1-az2"], NOW + 30).values()
    assert shift.kinds == ("manual",), "the operator's manual shift outlives the autoshift's completion"
    assert zonalshifts.active(dynamodb, TABLE, ["use1-az2"], NOW + 10 + 3 * DAY - 1)
    assert zonalshifts.active(dynamodb, TABLE, ["use1-az2"], NOW + 10 + 3 * DAY) == {}
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "zonalshift#use1-az2"}})["Item"]
    assert float(item["expiresAt"]["N"]) >= NOW + 20 + 3 * DAY, "the table's TTL outlasts every bound"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed are"):
        zonalshifts.record(None, None, "use1-az2", "practice", True, NOW)


# ------------------------------------------------------------------------------------------ launches


def test_the_shifted_zones_offerings_are_unavailable_and_the_others_untouched() -> None:
    m5 = InstanceType("m5.large", {}, {"cpu": 2000}, {}, (
        Offering("us-east-1a", "spot", 0.04, zone_id="use1-az6"),
        Offering("us-east-1c", "spot", 0.03, zone_id="use1-az2"),
        Offering("us-east-1c", "on-demand", 0.09, zone_id="use1-az2"),
    ))
    (avoided,) = zonalshift.avoid([m5], ["use1-az2"])
    assert [o.available for o in avoided.offerings] == [True, False, False]
    assert avoided.cheapest().zone == "us-east-1a"
    assert all(o.available for o in m5.offerings), "the catalog's own object is untouched"
    assert zonalshift.avoid([m5], []) == [m5]
    assert zonalshift.zone_names([m5], ["use1-az2", "use1-az9"]) == {"use1-az2": "us-east-1c"}


# ------------------------------------------------------------------------------------------ the function


def _process(rt: Any, event: Any) -> EventSummary:
    summary = entry.process(event, rt.settings, lambda: rt, account="123456789012")
    assert isinstance(summary, EventSummary)  # a zonal shift is recorded every time: never a repeat
    json.dumps(summary.to_json())
    return summary


def test_the_interruption_function_records_a_shift_naming_the_zone_as_launches_do() -> None:
    rt = fakes.runtime([], [])
    rt.aws.ec2.describe_availability_zones = lambda **_: ZONES
    summary = _process(rt, load("zonal-autoshift-in-progress.json"))
    assert summary.ignored is None and summary.instances == ()
    assert summary.zonal_shift == ZonalShiftRecord("use1-az2", "us-east-1c", ShiftKind.AUTOSHIFT, shifted_away=True,
                                                   recorded=True, until="2026-11-23T10:15:30Z")
    assert rt.api.requests == [], "a zonal shift needs no Kubernetes call"
    done = _process(rt, load("zonal-autoshift-completed.json")).zonal_shift
    assert done is not None and (done.shifted_away, done.recorded, done.until) == (False, True, None)


def test_a_zonal_shift_summary_is_the_document_it_always_was() -> None:
    """#29.3: the JSON of a recorded shift and of an ignored one, literal keys in their order (`-o json` and the
    function's answer are a contract)."""
    rt = fakes.runtime([], [])
    rt.aws.ec2.describe_availability_zones = lambda **_: ZONES
    recorded = _process(rt, load("zonal-autoshift-in-progress.json")).to_json()
    assert list(recorded) == ["eventId", "detailType", "ignored", "instances", "zonalShift", "handledAt"]
    assert recorded["zonalShift"] == {"zoneId": "use1-az2", "zone": "us-east-1c", "kind": "autoshift",
                                      "shiftedAway": True, "recorded": True, "until": "2026-11-23T10:15:30Z"}
    assert list(recorded["zonalShift"]) == ["zoneId", "zone", "kind", "shiftedAway", "recorded", "until"]
    assert json.dumps(recorded["zonalShift"]["kind"]) == '"autoshift"'
    foreign = load("zonal-autoshift-in-progress.json")
    foreign["detail"]["metadata"]["awayFrom"] = "use1-az4"
    ignored = _process(rt, foreign).to_json()
    assert list(ignored) == ["eventId", "detailType", "ignored", "instances"] and ignored["instances"] == []


def test_a_zone_id_this_region_does_not_have_and_another_resources_manual_shift_are_ignored() -> None:
    rt = fakes.runtime([], [])
    rt.aws.ec2.describe_availability_zones = lambda **_: ZONES
    foreign = load("zonal-autoshift-in-progress.json")
    foreign["detail"]["metadata"]["awayFrom"] = "use1-az4"
    assert "use1-az4 is not an Availability Zone of us-east-1" in (_process(rt, foreign).ignored or "")
    manual = load("zonal-manual-shift-started.json")
    manual["resources"] = ["arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/web/1"]
    assert "not of this EKS cluster" in (_process(rt, manual).ignored or "")
    assert zonalshifts.active(None, None, ["use1-az2", "use1-az4"], NOW) == {}


def test_a_broken_zonal_event_is_logged_and_dropped_without_any_call(caplog) -> None:
    rt = fakes.runtime([], [])
    event = copy.deepcopy(load("zonal-manual-shift-started.json"))
    del event["detail"]["metadata"]
    with caplog.at_level("WARNING"):
        summary = _process(rt, event)
    assert "detail.metadata.awayFrom" in (summary.ignored or "")
    assert "event ignored" in caplog.text
    assert rt.aws.ec2.calls == [] and rt.aws.dynamodb.calls == [] and rt.api.requests == []


def test_replay_prints_what_a_zonal_shift_event_did() -> None:
    from nodescale.commands import replay

    rt = fakes.runtime([], [])
    rt.aws.ec2.describe_availability_zones = lambda **_: ZONES
    started = {**_process(rt, load("zonal-autoshift-in-progress.json")).to_json(), "source": "a.json"}
    ended = {**_process(rt, load("zonal-autoshift-completed.json")).to_json(), "source": "b.json"}
    assert replay.to_text([started, ended]) == (
        "a.json: Autoshift In Progress (05d4d2d5-9c76-bfea-72d2-d4614802adb4): zone us-east-1c (use1-az2): no "
        "launches there (autoshift) until it ends, at the latest 2026-11-23T10:15:30Z\n"
        "b.json: Autoshift Completed (1f0c2d3e-9c76-bfea-72d2-d4614802adb5): zone us-east-1c (use1-az2): autoshift "
        "ended; the zone takes launches again unless another shift holds it\n")
