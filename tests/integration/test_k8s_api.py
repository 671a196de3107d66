"""Listing, nodes and events against the local API server, through the official client over HTTP."""

from __future__ import annotations

import time
import uuid

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.k8s import events, listing, nodes
from nodescale.k8s.raw import request_json
from tests.integration import helpers
from tests.integration.helpers import create_pod, new_namespace

pytestmark = pytest.mark.integration


sim = helpers.kube_api_fixture("sim")


def pod(ns: str, name: str, node: str = "", labels: dict | None = None, unschedulable: bool = False, **spec) -> dict:
    status: dict = {"phase": "Pending"}
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    if node:
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "x"}], **({"nodeName": node} if node else {}), **spec},
        "status": status,
    }


def create_node(api, name: str, **spec) -> dict:
    return request_json(api, "POST", "/api/v1/nodes", body={"metadata": {"name": name}, "spec": spec})


def test_listing_pages_through_everything_with_selectors(sim):
    store, _, api, admin = sim
    ns = new_namespace(admin)
    for i in range(23):
        create_pod(admin, pod(ns, f"p{i:02d}", labels={"app": "web" if i % 2 else "db"}))
    result = listing.list_pods(api, ns, limit=5)
    names = [p["metadata"]["name"] for p in result.items]
    assert names == sorted(f"p{i:02d}" for i in range(23))
    assert int(result.resource_version) > 0
    web = listing.list_pods(api, ns, label_selector="app=web", limit=4).items
    assert len(web) == 11 and all(p["metadata"]["labels"]["app"] == "web" for p in web)
    assert [p["metadata"]["name"] for p in listing.list_pods(api, ns, field_selector="metadata.name=p03").items] == ["p03"]


def test_provisionable_pods_and_pods_on_a_node(sim):
    _, _, api, admin = sim
    ns = new_namespace(admin)
    node = f"n-{ns}"
    create_node(admin, node)
    create_pod(admin, pod(ns, "waiting", unschedulable=True))
    create_pod(admin, pod(ns, "fresh"))
    create_pod(admin, pod(ns, "custom", unschedulable=True, schedulerName="other"))
    create_pod(admin, pod(ns, "bound", node=node))
    found = [p["metadata"]["name"] for p in listing.provisionable_pods(api, ns).items]
    assert found == ["waiting"]
    assert [p["metadata"]["name"] for p in listing.pods_on_node(api, node)] == ["bound"]
    with pytest.raises(ValueError, match="node name is empty"):
        listing.pods_on_node(api, "")


def test_pdbs_and_daemonsets_are_listed_as_dicts(sim):
    _, _, api, admin = sim
    ns = new_namespace(admin)
    request_json(admin, "POST", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                 body={"metadata": {"name": "pdb"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
    request_json(admin, "POST", f"/apis/apps/v1/namespaces/{ns}/daemonsets", body={
        "metadata": {"name": "ds"},
        "spec": {"selector": {"matchLabels": {"a": "ds"}},
                 "template": {"metadata": {"labels": {"a": "ds"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    })
    assert [p["metadata"]["name"] for p in listing.list_pdbs(api, ns).items] == ["pdb"]
    assert [d["metadata"]["name"] for d in listing.list_daemonsets(api, ns).items] == ["ds"]


def test_cordon_taint_untaint_keep_other_taints(sim):
    _, _, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    create_node(admin, name, taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    change = nodes.mark_disrupted(api, name)
    assert change.changed
    node = nodes.get_node(api, name)
    assert nodes.is_cordoned(node)
    assert nodes.has_taint(node, "karpenter.sh/disrupted", "NoSchedule")
    assert nodes.has_taint(node, "team")
    assert not nodes.mark_disrupted(api, name).changed  # idempotent: a second function finds it done
    nodes.remove_taint(api, name, uncordon=True)
    node = nodes.get_node(api, name)
    assert not nodes.is_cordoned(node)
    assert [t["key"] for t in nodes.taints_of(node)] == ["team"]


def test_a_concurrent_write_is_not_lost_on_conflict(sim):
    store, _, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    create_node(admin, name)
    calls = []

    def add_taint_racing_with_kubelet(node):
        calls.append(node["metadata"]["resourceVersion"])
        if len(calls) == 1:
            # Another writer gets in between our read and our write.
            store.patch("v1/nodes", name, {"spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}})
        taints = [*nodes.taints_of(node), {"key": "mine", "effect": "NoSchedule"}]
        return {"spec": {"taints": taints}}

    nodes.modify_node(api, name, add_taint_racing_with_kubelet)
    assert len(calls) == 2
    assert sorted(t["key"] for t in nodes.taints_of(nodes.get_node(api, name))) == ["mine", "other"]


def test_mark_disrupted_writes_once_from_the_node_read_and_redoes_a_stale_read(sim):
    """#33.3: a warned node is tainted, cordoned and annotated in ONE write, starting from the node as the
    caller read it (no second read). A read gone stale is never trusted: a node another writer changed since
    is refused (409) and redone on a fresh read, neither taint lost; one the stale read shows done already is
    read again, and written when someone undid it. On the old code ``mark_disrupted`` took neither the node
    read nor the annotations."""
    store, server, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    read = create_node(admin, name)
    server.stats.reset()

    def annotations(known):
        return {} if known.get("why") else {"why": "spot"}

    change = nodes.mark_disrupted(api, name, annotations=annotations, current=read)
    assert change.changed and nodes.is_cordoned(change.node)
    assert change.node["metadata"]["annotations"] == {"why": "spot"}
    assert server.stats.report()["resources"]["nodes"] == {"patch": {"requests": 1}}

    other = f"n-{uuid.uuid4().hex[:6]}"
    stale = create_node(admin, other)
    store.patch("v1/nodes", other, {"spec": {"taints": [{"key": "other", "effect": "NoExecute"}]}})
    assert nodes.mark_disrupted(api, other, annotations=annotations, current=stale).changed
    node = nodes.get_node(api, other)
    assert sorted(t["key"] for t in nodes.taints_of(node)) == ["karpenter.sh/disrupted", "other"]
    assert nodes.is_cordoned(node) and node["metadata"]["annotations"] == {"why": "spot"}

    done = nodes.get_node(api, other)
    nodes.remove_taint(api, other, uncordon=True)
    assert nodes.mark_disrupted(api, other, annotations=annotations, current=done).changed
    node = nodes.get_node(api, other)
    assert nodes.is_cordoned(node) and nodes.has_taint(node, "karpenter.sh/disrupted", "NoSchedule")


def test_reads_are_retried_on_server_errors(sim):
    _, server, api, admin = sim
    server.faults.add({"status": "500", "verbs": ["list"], "resources": ["nodes"], "count": 2})
    try:
        listing.list_nodes(api)
    finally:
        report = server.faults.report()
        server.faults.clear()
    assert report["injected"] == 2


def test_writes_are_not_replayed_on_server_errors(sim):
    _, server, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    create_node(admin, name)
    server.faults.add({"status": "500", "verbs": ["delete"], "resources": ["nodes"]})
    try:
        with pytest.raises(ApiException) as info:
            nodes.delete_node(api, name)
        report = server.faults.report()
    finally:
        server.faults.clear()
    assert info.value.status == 500
    assert report["injected"] == 1
    assert nodes.get_node(api, name)["metadata"]["name"] == name


def test_labels_annotations_and_delete(sim):
    _, _, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    create_node(admin, name, providerID="aws:///us-east-1a/i-0feedbeef")
    nodes.patch_metadata(api, name, labels={"a": "1", "b": "2"}, annotations={"x": "y"})
    node = nodes.patch_metadata(api, name, labels={"b": None})
    assert node["metadata"]["labels"] == {"a": "1"}
    assert node["metadata"]["annotations"]["x"] == "y"
    assert nodes.instance_id(node) == "i-0feedbeef"
    assert nodes.delete_node(api, name) is True
    assert nodes.delete_node(api, name) is False
    with pytest.raises(nodes.NodeGoneError):
        nodes.cordon(api, name)


def test_events_are_created_then_folded(sim):
    store, _, api, admin = sim
    ns = new_namespace(admin)
    target = create_pod(admin, pod(ns, "p", unschedulable=True))
    now = [time.time()]
    recorder = events.EventRecorder(api, dedupe_seconds=60, clock=lambda: now[0])
    ref = events.ObjectRef.of(target, kind="Pod")
    assert recorder.record(ref, "FailedScheduling", "no NodePool fits", events.WARNING) == events.CREATED
    now[0] += 10
    assert recorder.record(ref, "FailedScheduling", "no NodePool fits", events.WARNING) == events.SKIPPED
    now[0] += 60
    assert recorder.record(ref, "FailedScheduling", "still no NodePool", events.WARNING) == events.COUNTED
    recorded = [e for e in store.snapshot("v1/events", ns) if e["involvedObject"]["name"] == "p"]
    assert len(recorded) == 1
    event = recorded[0]
    assert (event["count"], event["message"], event["type"]) == (2, "still no NodePool", "Warning")
    assert event["reportingComponent"] == "nodescale"
    assert event["involvedObject"]["uid"] == target["metadata"]["uid"]


def test_a_refolded_event_carries_the_related_object_of_its_new_message(sim):
    """#29.3: an event's ``related`` object (what a reader takes it to be about) is written with the event
    and replaced with its message when a later fold rewrites it, so the two never disagree."""
    store, _, api, admin = sim
    ns = new_namespace(admin)
    target = create_pod(admin, pod(ns, "p", unschedulable=True))
    now = [time.time()]
    recorder = events.EventRecorder(api, dedupe_seconds=60, clock=lambda: now[0])
    ref = events.ObjectRef.of(target, kind="Pod")
    first = events.ObjectRef("Instance", "i-0123456789abcdef0", api_version="nodescale.io/v1")
    assert recorder.record(ref, "Nominated", "instance one", related=first) == events.CREATED
    now[0] += 120
    second = events.ObjectRef("Instance", "i-0123456789abcdef1", api_version="nodescale.io/v1")
    assert recorder.record(ref, "Nominated", "instance two", related=second) == events.COUNTED
    [event] = [e for e in store.snapshot("v1/events", ns) if e["involvedObject"]["name"] == "p"]
    assert (event["message"], event["related"]) == ("instance two", second.to_dict())
    now[0] += 120
    assert recorder.record(ref, "Nominated", "no instance") == events.COUNTED
    [event] = [e for e in store.snapshot("v1/events", ns) if e["involvedObject"]["name"] == "p"]
    assert event["message"] == "no instance" and "related" not in event


def test_recorder_limit_drops_events_past_it_per_reason(sim):
    """A recorder writes at most `limit_per_reason` events per reason and drops the rest, as client-go's
    recorder drops what overflows its queue: the other reason keeps its own allowance."""
    store, _, api, admin = sim
    ns = new_namespace(admin)
    targets = [create_pod(admin, pod(ns, f"p{i}", unschedulable=True)) for i in range(4)]
    recorder = events.EventRecorder(api, limit_per_reason=2)
    outcomes = [recorder.record(events.ObjectRef.of(t, kind="Pod"), "Nominated", "launched", events.NORMAL)
                for t in targets]
    assert outcomes == [events.CREATED, events.CREATED, events.DROPPED, events.DROPPED]
    assert recorder.record(events.ObjectRef.of(targets[3], kind="Pod"), "FailedScheduling", "no pool",
                           events.WARNING) == events.CREATED
    written = sorted((e["involvedObject"]["name"], e["reason"]) for e in store.snapshot("v1/events", ns))
    assert written == [("p0", "Nominated"), ("p1", "Nominated"), ("p3", "FailedScheduling")]
    assert recorder.dropped == {"Nominated": 2}
    with pytest.raises(ValueError, match="limit_per_reason"):
        events.EventRecorder(api, limit_per_reason=-1)


def test_count_mode_and_node_events(sim):
    store, _, api, admin = sim
    name = f"n-{uuid.uuid4().hex[:6]}"
    create_node(admin, name)
    recorder = events.EventRecorder(api, on_repeat="count")
    assert recorder.node(name, "SpotInterrupted", "spot notice") == events.CREATED
    assert recorder.node(name, "SpotInterrupted", "spot notice") == events.COUNTED
    assert recorder.node(name, "Rebalance", "rebalance recommended") == events.CREATED
    mine = [e for e in store.snapshot("v1/events", "default") if e["involvedObject"]["name"] == name]
    assert sorted((e["reason"], e["count"]) for e in mine) == [("Rebalance", 1), ("SpotInterrupted", 2)]
    with pytest.raises(ValueError, match="event type"):
        recorder.node(name, "X", "y", "Error")
