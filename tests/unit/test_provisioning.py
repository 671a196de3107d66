"""launch_capacity against a fake launcher: in-flight capacity, limits, capacity errors, events."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nodescale import clock
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.fleet import LaunchedInstance, LaunchResult, OfferingError
from nodescale.commands.provision import to_text
from nodescale.config.documents import parse_documents
from nodescale.config.loader import load
from nodescale.k8s import nodeclaims
from nodescale.model.currency import USD, render
from nodescale.model.instance import ManagedInstance
from nodescale.model.pod import Pod
from nodescale.scheduling.plan import Plan, Unschedulable, UnschedulableKind
from nodescale.settings import Settings, SettingsError
from nodescale.usecases.provision import capacity
from nodescale.usecases.provision import launch as provision_launch
from nodescale.usecases.provision.cluster_budget import ClusterBudget, parse_limits
from nodescale.usecases.provision.launch import LimitHit, LimitScope
from nodescale.usecases.world import World

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  limits: {cpu: "%s"}
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: NodeRole
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
"""
NOW = datetime(2025, 1, 1, tzinfo=UTC)


class FakeLauncher:
    """Launches the cheapest type it is given, except offerings listed as failing."""

    def __init__(self, failing: tuple[str, ...] = ()) -> None:
        self.calls: list[dict[str, Any]] = []
        self.failing = failing

    def launch(self, pool, node_class, types, key, count=1, requirements=None, fence=None) -> LaunchResult:
        if fence is not None:  # as fleet.launch: the launch lease is checked before the request
            fence()
        self.calls.append({"pool": pool.name, "types": [t.name for t in types], "key": key, "count": count})
        result = LaunchResult(requested=count)
        for t in types:
            if t.name in self.failing:
                result.offering_errors.extend(
                    OfferingError(t.name, o.zone, o.capacity_type, "InsufficientInstanceCapacity")
                    for o in t.offerings if o.capacity_type == "spot"
                )
                continue
            result.instances.extend(
                LaunchedInstance(f"i-{len(self.calls)}-{n}", t.name, "us-east-1a", "subnet-a", "spot", 0.04, "lt", "launch")
                for n in range(count)
            )
            break
        return result


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []
        self.dropped: dict[str, int] = {}  # as EventRecorder: events over its limit, by reason
        self.related: dict[tuple[str, str], object] = {}  # (pod, reason) -> the event's related object

    def pod(self, namespace, name, reason, message, type_="Normal", uid="", related=None) -> str:
        self.events.append((f"{namespace}/{name}", reason, type_, message))
        self.related[(f"{namespace}/{name}", reason)] = related
        return "created"


def _pod(name: str, cpu: str) -> Pod:
    return Pod.from_dict({
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
    })


def _world(limit: str = "1000", instances: list[ManagedInstance] | None = None) -> World:
    config = load(parse_documents(POOL % limit, "test"))
    assert config.ok, config.errors
    types = [t for t in bundled_catalog("us-east-1") if t.name in ("m5.large", "m5.xlarge")]
    return World(now=NOW, cluster="demo", nodepools=dict(config.nodepools), nodeclasses=dict(config.nodeclasses),
                 instances=instances or [], catalog=types, types={"default": types})


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> FakeRecorder:
    fake = FakeRecorder()
    monkeypatch.setattr(capacity, "event_recorder", lambda rt, world: fake)
    return fake


def _rt(launcher: FakeLauncher, **limits: str) -> Any:
    settings = Settings(cluster_name="demo", region="us-east-1", cluster_limits=limits)
    # No table: the launch lease is this process's own lock.
    aws = SimpleNamespace(dynamodb=None, ec2=None)
    # No cluster behind it: launches without NodeClaims, as in a cluster without their CRD (#30.1).
    return SimpleNamespace(settings=settings, launcher=launcher, api=None, cluster="demo", aws=aws,
                           nodeclaims=nodeclaims.State(missing=True))


@pytest.fixture(autouse=True)
def _instances_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # The worlds here are built by hand; re-reading EC2 under the launch lease keeps what they hold.
    monkeypatch.setattr(capacity, "refresh_instances", lambda world, ec2: world)


def test_pods_launch_one_node_each_claim_and_get_a_nomination_event(recorder: FakeRecorder) -> None:
    launcher = FakeLauncher()
    pods = [_pod("a", "1"), _pod("b", "1")]

    outcome = capacity.launch_capacity(_rt(launcher), _world(), pods)

    assert {(x.nodepool, x.capacity_type) for x in outcome.launches} == {("default", "spot")}
    assert sorted(p for x in outcome.launches for p in x.pods) == ["default/a", "default/b"]
    assert len(launcher.calls) == len(outcome.launches)
    nominated = [e for e in recorder.events if e[1] == "Nominated"]
    assert sorted(e[0] for e in nominated) == ["default/a", "default/b"]
    launch = outcome.launches[0]
    for word in ("NodePool default", launch.instance_id, launch.instance_type, "us-east-1a", "spot"):
        assert word in nominated[0][3]


def test_pods_that_fit_in_flight_capacity_launch_nothing(recorder: FakeRecorder) -> None:
    inflight = ManagedInstance("i-old", "m5.xlarge", "us-east-1a", "spot", "default", "pending", NOW)
    launcher = FakeLauncher()

    outcome = capacity.launch_capacity(_rt(launcher), _world(instances=[inflight]), [_pod("a", "1")])

    assert outcome.launches == [] and launcher.calls == []
    assert outcome.waiting == {"in-flight/i-old": ["default/a"]}
    assert recorder.events == []


def test_the_launch_key_depends_on_the_pool_and_pods_not_their_order() -> None:
    a, b = _pod("a", "1"), _pod("b", "1")
    now = 1_800_000_000.0

    def key_of(pool: str, pods: list) -> str:
        return provision_launch.launch_key(SimpleNamespace(nodepool=pool, pods=pods), now=now)

    key = key_of("default", [a, b])
    assert key == key_of("default", [b, a])
    assert key != key_of("other", [a, b])
    assert key != key_of("default", [a])


def test_the_same_pods_launched_again_later_get_a_new_client_token() -> None:
    """EC2 answers a repeated ClientToken with the first request's instances (sim's CreateFleet does too, since
    #27.7): a replacement for pods still on the node it replaces, or a second node for pods whose first
    instance never joined, must not repeat the first launch's token. A retry within minutes still does."""
    a, b = _pod("a", "1"), _pod("b", "1")
    claim = SimpleNamespace(nodepool="default", pods=[a, b])
    first = 1_800_000_000.0
    assert provision_launch.launch_key(claim, now=first) == provision_launch.launch_key(claim, now=first + 60)
    later = first + provision_launch.TOKEN_WINDOW_SECONDS
    assert provision_launch.launch_key(claim, now=first) != provision_launch.launch_key(claim, now=later)


def test_a_node_being_replaced_still_counts_against_its_nodepool_limit(recorder: FakeRecorder) -> None:
    # The interrupted node's instance runs until EC2 takes it: its replacement must fit beside it.
    going = ManagedInstance("i-going", "m5.large", "us-east-1a", "spot", "default", "running", NOW)
    launcher = FakeLauncher()
    pods = [_pod("moved", "1")]

    held = capacity.launch_capacity(
        _rt(launcher), _world(limit="3", instances=[going]), pods, exclude_nodes=["i-going"]
    )
    assert launcher.calls == [] and [x.nodepool for x in held.limits] == ["default"]

    room = capacity.launch_capacity(
        _rt(launcher), _world(limit="4", instances=[going]), pods, exclude_nodes=["i-going"]
    )
    assert len(launcher.calls) == 1 and [x.pods for x in room.launches] == [["default/moved"]]


def test_a_replacement_never_repeats_the_launch_of_the_node_it_replaces(
    recorder: FakeRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spot warning minutes after a launch: the replacement is for the same pods, in the same token window,
    so only the node it replaces tells its client token apart; with the first launch's token EC2 would
    answer with the instance that is going away (#27.7)."""
    monkeypatch.setattr(clock, "epoch", lambda: 1_800_000_000.0)
    going = ManagedInstance("i-going", "m5.large", "us-east-1a", "spot", "default", "running", NOW)
    launcher = FakeLauncher()
    pods = [_pod("moved", "1")]
    capacity.launch_capacity(_rt(launcher), _world(limit="8"), pods)
    capacity.launch_capacity(_rt(launcher), _world(limit="8", instances=[going]), pods, exclude_nodes=["i-going"])
    first, replacement = (call["key"] for call in launcher.calls)
    assert first != replacement


def test_nodepool_limit_counts_in_flight_capacity_and_is_reported(recorder: FakeRecorder) -> None:
    inflight = ManagedInstance("i-old", "m5.large", "us-east-1a", "spot", "default", "pending", NOW)
    launcher = FakeLauncher()
    pods = [_pod("big", "1500m"), _pod("big2", "1500m")]

    outcome = capacity.launch_capacity(_rt(launcher), _world(limit="3", instances=[inflight]), pods)

    assert launcher.calls == []
    assert [(x.scope, x.nodepool) for x in outcome.limits] == [("nodepool", "default")]
    assert outcome.waiting == {"in-flight/i-old": ["default/big"]}
    assert [p for p, _ in outcome.unschedulable] == ["default/big2"]
    warned = [e for e in recorder.events if e[1] == "FailedScheduling"]
    assert warned and all(e[2] == "Warning" and "limits" in e[3] for e in warned)


def test_cluster_wide_limit_blocks_the_launch(recorder: FakeRecorder) -> None:
    launcher = FakeLauncher()
    outcome = capacity.launch_capacity(_rt(launcher, nodes="0"), _world(), [_pod("a", "1")])
    assert launcher.calls == [] and outcome.launches == []
    assert outcome.limits[0].scope == "cluster" and "nodes=0" in outcome.limits[0].reason
    assert "cluster-wide limit" in outcome.unschedulable[0][1]


def test_capacity_errors_are_counted_and_the_next_type_launches(recorder: FakeRecorder) -> None:
    launcher = FakeLauncher(failing=("m5.large",))
    outcome = capacity.launch_capacity(_rt(launcher), _world(), [_pod("a", "1")])
    assert [x.instance_type for x in outcome.launches] == ["m5.xlarge"]
    assert outcome.errors["InsufficientInstanceCapacity"] >= 1
    assert outcome.unschedulable == []
    assert [c["types"] for c in launcher.calls][-1] == ["m5.xlarge"]


def test_excluded_offerings_are_not_offered_to_the_launch(recorder: FakeRecorder) -> None:
    launcher = FakeLauncher()
    unavailable = [("m5.large", z, "spot") for z in ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d",
                                                      "us-east-1e", "us-east-1f")]
    outcome = capacity.launch_capacity(_rt(launcher), _world(), [_pod("a", "1")], extra_unavailable=unavailable)
    assert launcher.calls[0]["types"] == ["m5.xlarge"]
    assert outcome.launches[0].instance_type == "m5.xlarge"


def test_dry_run_launches_nothing_and_records_nothing(recorder: FakeRecorder) -> None:
    launcher = FakeLauncher()
    outcome = capacity.launch_capacity(_rt(launcher), _world(), [_pod("a", "1")], dry_run=True)
    assert launcher.calls == [] and recorder.events == []
    assert outcome.launches[0].instance_id == "" and outcome.launches[0].nodepool == "default"


def test_cluster_limits_parse_and_name_the_limit_that_blocks() -> None:
    assert parse_limits({"cpu": "2", "memory": "1Gi", "nodes": "3", "pricePerHour": "1.5"}) == {
        "cpu": 2000.0, "memory": float(2**30), "nodes": 3.0, "pricePerHour": 1.5}
    with pytest.raises(SettingsError, match="cpu='lots'"):
        parse_limits({"cpu": "lots"})
    budget = ClusterBudget(parse_limits({"cpu": "4"}))
    budget.add({"cpu": 2000}, 0.1)
    assert budget.blocked({"cpu": 2000}, 0.1) is None
    assert "cpu=4 reached: 2 in use, the node needs 4 more" in render(budget.blocked({"cpu": 4000}, 0.1), USD)


def test_summary_text_names_launches_limits_and_errors() -> None:
    summary = {
        "dryRun": False, "podsSeen": 2, "batches": 1, "seconds": 0.5,
        "launches": [{"nodePool": "default", "instanceId": "i-1", "instanceType": "m5.large", "zone": "us-east-1a",
                      "capacityType": "spot", "price": 0.04, "pods": ["default/a", "default/b"]}],
        "limits": [{"scope": "nodepool", "nodePool": "gpu", "reason": "would exceed"}],
        "unschedulable": [{"pod": "default/c", "reason": "no type fits"}],
        "errors": {"InsufficientInstanceCapacity": 2},
        "configErrors": ["ssm:/x: spec.limits: bad"],
    }
    text = to_text(summary)
    assert "default i-1: m5.large in us-east-1a (spot, $0.0400/h) for 2 pods" in text
    assert "Limit (nodepool, gpu): would exceed" in text
    assert "default/c: no type fits" in text
    assert "Error InsufficientInstanceCapacity: 2" in text
    assert "Configuration error: ssm:/x: spec.limits: bad" in text


def _handler_module() -> Any:
    path = Path(__file__).resolve().parents[2] / "lambdas" / "provisioner" / "handler.py"
    spec = importlib.util.spec_from_file_location("provisioner_handler", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_watch_deadline_leaves_a_margin_before_the_lambda_timeout() -> None:
    handler = _handler_module()
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 30_000)
    assert handler.watch_deadline(50.0, context, now=100.0) == pytest.approx(100.0 + 30.0 - handler.MARGIN_SECONDS)
    long_context = SimpleNamespace(get_remaining_time_in_millis=lambda: 900_000)
    assert handler.watch_deadline(50.0, long_context, now=100.0) == pytest.approx(150.0)
    assert handler.watch_deadline(50.0, SimpleNamespace(get_remaining_time_in_millis=lambda: 1000), now=0) == 0.0


def test_identical_nodes_go_out_in_one_fleet_request(recorder: FakeRecorder) -> None:
    # Hostname anti-affinity: four pods, four identical nodes; one request for four, not four requests.
    pods = [
        Pod.from_dict({
            "metadata": {"name": f"spread-{i}", "namespace": "default", "uid": f"uid-spread-{i}", "labels": {"app": "s"}},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "s"}}}
                ]}},
            },
        })
        for i in range(4)
    ]
    launcher = FakeLauncher()

    outcome = capacity.launch_capacity(_rt(launcher), _world(), pods)

    assert [c["count"] for c in launcher.calls] == [4]
    assert len({x.instance_id for x in outcome.launches}) == 4
    assert sorted(len(x.pods) for x in outcome.launches) == [1, 1, 1, 1]
    nominated = {e[0]: e[3] for e in recorder.events if e[1] == "Nominated"}
    assert len({msg for msg in nominated.values()}) == 4  # each pod names its own instance


def test_pools_at_their_limits_come_from_the_typed_reason_not_its_wording() -> None:
    pod = _pod("a", "1")
    plan = Plan([], [], [
        # Named as limited, in words that do not say so: reported.
        Unschedulable(pod, "held back", UnschedulableKind.LIMITS, ("gpu", "batch")),
        # Says "limits" in words but names no pool: not reported.
        Unschedulable(pod, "incompatible with nodepool x: it would exceed the nodepool's limits",
                      UnschedulableKind.TOO_LARGE),
    ], 2)
    outcome = provision_launch.LaunchOutcome()
    capacity._note_pool_limits(plan, outcome)
    assert outcome.limits == [
        LimitHit(LimitScope.NODEPOOL, "batch", "held back"),
        LimitHit(LimitScope.NODEPOOL, "gpu", "held back"),
    ]
