"""The provisioner's summary is data (#29.3): typed fields for the use-case and its callers, one JSON document
(camelCase keys, in a fixed order) for the Lambda's answer and `nodescale provision -o json`."""

from __future__ import annotations

from nodescale.aws.launchfailures import LaunchFailure
from nodescale.model.buffers import CapacityBuffer, ResolvedBuffer
from nodescale.usecases.provision.launch import Launch, LaunchOutcome, LimitHit, LimitScope, PodReason
from nodescale.usecases.provision.summary import BufferReport, Mode, Summary, Tally
from tests.builders import pod


def _launch(n: int, price: float) -> Launch:
    return Launch("default", f"i-{n}", "m5.large", "us-east-1a", "spot", price, [f"ns/p{n}"],
                  [f"t{i}" for i in range(12)], "lt-1")


def _summary(*, dry_run: bool) -> Summary:
    launched = [_launch(1, 0.0123456789)]
    return Summary(
        mode=Mode.WATCH, dry_run=dry_run, pods_seen=3, batches=2,
        launches=[] if dry_run else launched, waiting_for_in_flight=1, placed_on_existing=1,
        errors={"InsufficientInstanceCapacity": 2},
        unschedulable=[PodReason("ns/huge", "no instance type has room")],
        limits=[LimitHit(LimitScope.NODEPOOL, "small", "cpu limit reached")],
        config_errors=["ssm:/nodescale/pools/x: bad"], pod_errors=[PodReason("ns/odd", "bad request")],
        registration_timeouts=["i-9"], solve_seconds=0.25,
        buffers=[BufferReport(ResolvedBuffer(CapacityBuffer("ns", "buf"), "PodTemplate t", [pod("b-0")]),
                              [PodReason("default/b-0", "no room")])],
        launch_failing=[LaunchFailure("gpu", "AccessDenied", "iam:PassRole", 0.0)],
        seconds=1.5, price_per_hour_launched=0.012346, planned=launched if dry_run else [],
    )


LAUNCH_JSON = {
    "nodePool": "default", "instanceId": "i-1", "instanceType": "m5.large", "zone": "us-east-1a",
    "capacityType": "spot", "price": 0.012346, "pods": ["ns/p1"],
    "instanceTypes": ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"], "launchTemplate": "lt-1",
}
REST_JSON = [
    ("waitingForInFlight", 1),
    ("placedOnExisting", 1),
    ("errors", {"InsufficientInstanceCapacity": 2}),
    ("unschedulable", [{"pod": "ns/huge", "reason": "no instance type has room"}]),
    ("limits", [{"scope": "nodepool", "nodePool": "small", "reason": "cpu limit reached"}]),
    ("configErrors", ["ssm:/nodescale/pools/x: bad"]),
    ("podErrors", [{"pod": "ns/odd", "reason": "bad request"}]),
    ("registrationTimeouts", ["i-9"]),
    ("solveSeconds", 0.25),
    ("buffers", [{"buffer": "ns/buf", "replicas": 1, "template": "PodTemplate t", "requests": {"cpu": "100m", "pods": "1"},
                  "unplaced": [{"pod": "default/b-0", "reason": "no room"}]}]),
    ("launchFailing", [{"nodePool": "gpu", "code": "AccessDenied", "message": "iam:PassRole",
                        "since": "1970-01-01T00:00:00Z"}]),
    ("seconds", 1.5),
    ("pricePerHourLaunched", 0.012346),
]


def test_the_summary_json_keeps_its_keys_their_order_and_values() -> None:
    """#29.3: the JSON contract of the provisioner's answer, key order included (a drift fails here)."""
    head = [("mode", "watch"), ("dryRun", False), ("podsSeen", 3), ("batches", 2), ("launches", [LAUNCH_JSON])]
    assert list(_summary(dry_run=False).to_json().items()) == head + REST_JSON


def test_a_dry_run_names_its_launches_planned_after_the_rest() -> None:
    """#29.3: a dry run's document puts ``planned`` and an empty ``launches`` last, as it always has."""
    head = [("mode", "watch"), ("dryRun", True), ("podsSeen", 3), ("batches", 2)]
    expected = head + REST_JSON + [("planned", [LAUNCH_JSON]), ("launches", [])]
    assert list(_summary(dry_run=True).to_json().items()) == expected


def test_the_tally_gives_typed_records_and_a_dry_run_plans_rather_than_launches() -> None:
    """#29.3: what the passes found stays typed in the Summary; a dry run's launches are ``planned``."""
    outcome = LaunchOutcome(launches=[_launch(1, 0.1), _launch(2, 0.2)], unschedulable=[("ns/q", "no room")],
                            limits=[LimitHit(LimitScope.CLUSTER, "default", "pricePerHour")], errors={"X": 1})
    for dry_run in (False, True):
        tally = Tally(Mode.POLL, dry_run)
        tally.add_outcome([pod("p1")], outcome)
        tally.add_outcome([pod("p1"), pod("p2")], LaunchOutcome(limits=list(outcome.limits), errors={"X": 2}))
        summary = tally.finish()
        assert summary.pods_seen == 2 and summary.batches == 2 and summary.errors == {"X": 3}
        assert summary.unschedulable == [] and summary.limits == outcome.limits
        assert (summary.planned if dry_run else summary.launches) == outcome.launches
        assert (summary.launches if dry_run else summary.planned) == []
        assert summary.price_per_hour_launched == 0.3
