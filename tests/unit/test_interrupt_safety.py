"""Bad, random and foreign events never raise and never touch a node, an instance or the shared table.

The runtime's clients record every call (see tests/fakes.py): the real parsing, ownership check and
handler code run, and any write they attempted would show up.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.interruption import events as ev
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt import handle as interrupting
from nodescale.usecases.interrupt.summary import EventSummary
from tests import fakes

EVENTS = Path(__file__).parent.parent / "fixtures" / "events"
SAMPLES = {p.name: json.loads(p.read_text()) for p in sorted(EVENTS.glob("*.json"))}
IID = "i-0a1b2c3d4e5f60718"
ACCOUNT = "123456789012"
KARPENTER_ONLY = {"karpenter.sh/nodepool": "default", "karpenter.sh/managed-by": "demo-cluster"}
OURS = {"nodescale.io/cluster": fakes.CLUSTER, "karpenter.sh/nodepool": "default"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


def _process(rt: Any, event: Any) -> EventSummary:
    called = []

    def runtime() -> Any:
        called.append(True)
        return rt

    summary = entry.process(event, rt.settings, runtime, account=ACCOUNT, deadline_monotonic=0.0)
    assert isinstance(summary, EventSummary)  # handled now: no table, so no repeat
    json.dumps(summary.to_json())  # a summary is always plain JSON
    return summary


def _assert_untouched(rt: Any) -> None:
    assert rt.api.writes == []
    assert rt.aws.ec2.writes == []
    assert rt.aws.dynamodb.calls == []


@pytest.fixture(scope="module")
def foreign_rt() -> Any:
    """The sample's instance exists but carries only Karpenter's tags; a Node names it."""
    return fakes.runtime([fakes.instance(IID, KARPENTER_ONLY)], [fakes.node("foreign", IID)])


@pytest.fixture(scope="module")
def managed_rt() -> Any:
    """The sample's instance is ours and has a Node: only a well-formed event may act on it."""
    return fakes.runtime([fakes.instance(IID, OURS, dns="ours")], [fakes.node("ours", IID)])


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=json_values)
def test_random_json_is_ignored_without_any_call(foreign_rt: Any, event: Any) -> None:
    summary = _process(foreign_rt, event)
    assert summary.instances == () and summary.ignored
    _assert_untouched(foreign_rt)


def _mutations() -> st.SearchStrategy[dict]:
    """A recorded sample with one thing broken, or (often) left well-formed but aimed at any instance id."""
    sample = st.sampled_from(sorted(SAMPLES))
    top_fields = st.sampled_from(["id", "detail-type", "source", "account", "region", "time", "detail"])
    detail_fields = st.sampled_from(["instance-id", "state", "service", "eventTypeCategory", "affectedEntities",
                                     "startTime", "instance-action"])

    @st.composite
    def build(draw: st.DrawFn) -> dict:
        event = copy.deepcopy(SAMPLES[draw(sample)])
        how = draw(st.sampled_from(["drop", "retype", "detail-drop", "detail-retype", "instance", "huge", "none"]))
        if how == "drop":
            event.pop(draw(top_fields), None)
        elif how == "retype":
            event[draw(top_fields)] = draw(json_values)
        elif how == "detail-drop" and isinstance(event.get("detail"), dict):
            event["detail"].pop(draw(detail_fields), None)
        elif how == "detail-retype" and isinstance(event.get("detail"), dict):
            event["detail"][draw(detail_fields)] = draw(json_values)
        elif how == "instance":
            iid = draw(st.one_of(st.just(IID), st.text(max_size=20),
                                 st.from_regex(r"i-[0-9a-f]{17}", fullmatch=True)))
            if isinstance(event.get("detail"), dict):
                event["detail"]["instance-id"] = iid
                event["detail"]["affectedEntities"] = [{"entityValue": iid}]
        elif how == "huge":
            event["detail"] = {**event.get("detail", {}), "padding": "x" * (ev.MAX_EVENT_BYTES + 1)}
        return event

    return build()


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=_mutations())
def test_mutated_samples_never_touch_an_instance_this_cluster_does_not_own(foreign_rt: Any, event: dict) -> None:
    summary = _process(foreign_rt, event)
    for report in summary.instances:
        assert report.action in (interrupting.IGNORED, interrupting.NOTHING), report
    _assert_untouched(foreign_rt)


@st.composite
def _malformed(draw: st.DrawFn) -> dict:
    """A going-away sample broken in a way no EventBridge delivery could be."""
    name = draw(st.sampled_from(["spot-interruption-warning.json", "state-change-terminated.json",
                                 "state-change-stopping.json", "health-scheduled-change.json"]))
    event = copy.deepcopy(SAMPLES[name])
    required = ["detail-type", "source", "account", "region", "detail"]
    how = draw(st.sampled_from(["drop", "retype", "detail-type", "source", "account", "region", "huge", "detail"]))
    if how == "drop":
        event.pop(draw(st.sampled_from(required)))
    elif how == "retype":
        event[draw(st.sampled_from(required))] = draw(st.integers() | st.lists(st.text(max_size=3)) | st.none())
    elif how == "detail-type":
        event["detail-type"] = draw(st.text(min_size=1).filter(lambda t: t not in (ev.SPOT_WARNING, ev.STATE_CHANGE,
                                                                                   ev.HEALTH, ev.REBALANCE)))
    elif how == "source":
        event["source"] = draw(st.text(min_size=1).filter(lambda t: t not in ("aws.ec2", "aws.health")))
    elif how == "account":
        event["account"] = draw(st.from_regex(r"[0-9]{12}", fullmatch=True).filter(lambda a: a != ACCOUNT))
    elif how == "region":
        event["region"] = draw(st.sampled_from(["eu-west-1", "us-west-2", "ap-south-1", ""]))
    elif how == "huge":
        event["resources"] = ["x" * 1024] * 300
    else:
        key = "affectedEntities" if name.startswith("health") else "instance-id"
        event["detail"][key] = draw(st.none() | st.integers() | st.text(max_size=8).filter(lambda t: not
                                                                                          t.startswith("i-")))
    return event


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=_malformed())
def test_malformed_events_never_touch_a_managed_node(managed_rt: Any, event: dict) -> None:
    summary = _process(managed_rt, event)
    assert summary.ignored and summary.instances == ()
    _assert_untouched(managed_rt)
    assert managed_rt.aws.ec2.calls == [] and managed_rt.api.requests == []


def test_each_foreign_sample_names_its_reason(foreign_rt: Any) -> None:
    for name in ("spot-interruption-warning.json", "state-change-terminated.json", "health-scheduled-change.json",
                 "rebalance-recommendation.json"):
        (report,) = _process(foreign_rt, SAMPLES[name]).instances
        assert report.action == interrupting.IGNORED
        assert "nodescale.io/cluster=demo-cluster" in report.reason, report
    _assert_untouched(foreign_rt)


def test_an_unknown_instance_is_ignored_as_not_found() -> None:
    rt = fakes.runtime([], [])
    (report,) = _process(rt, SAMPLES["spot-interruption-warning.json"]).instances
    assert report.action == interrupting.IGNORED and "not found" in report.reason
    _assert_untouched(rt)


def test_running_and_pending_need_no_client_at_all() -> None:
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="ours")], [fakes.node("ours", IID)])
    (report,) = _process(rt, SAMPLES["state-change-running.json"]).instances
    assert report.action == interrupting.NOTHING and "running" in report.reason
    assert rt.api.requests == [] and rt.aws.ec2.calls == []


def test_a_well_formed_warning_for_a_managed_node_does_reach_it() -> None:
    """The control for the tests above: the recording clients do see the writes an action makes."""
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="ours")], [fakes.node("ours", IID)])
    (report,) = _process(rt, SAMPLES["spot-interruption-warning.json"]).instances
    # The fake API cannot apply the patch (it answers 404), which reads as the Node vanishing meanwhile.
    assert ("PATCH", "/api/v1/nodes/ours") in rt.api.writes
    assert report.node == "ours" and "deleted meanwhile" in report.reason


def test_throttling_raises_so_lambda_retries_and_nothing_was_written() -> None:
    rt = fakes.runtime([fakes.instance(IID, OURS, dns="ours")], [fakes.node("ours", IID)])

    def throttled(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, "DescribeInstances")

    rt.aws.ec2.get_paginator = lambda name: type("P", (), {"paginate": staticmethod(throttled)})()
    with pytest.raises(ClientError):
        _process(rt, SAMPLES["spot-interruption-warning.json"])
    _assert_untouched(rt)
