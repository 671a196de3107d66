"""Pure rules of the Kubernetes adapter: which pods count, when a drain began, node facts, batching."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodescale.k8s.drain import drain_started_at
from nodescale.k8s.events import ObjectRef, event_name
from nodescale.k8s.listing import group_by_node, is_provisionable
from nodescale.k8s.nodes import instance_id, parse_provider_id, provider_id, readiness
from nodescale.k8s.watch import FirstBatch, NodeJoins, PendingBatcher

UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


def pending(name="p", uid=None, **changes) -> dict:
    pod = {
        "metadata": {"name": name, "namespace": "default", "uid": uid or name},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "conditions": [UNSCHEDULABLE]},
    }
    for path, value in changes.items():
        section, key = path.split("__")
        pod[section][key] = value
    return pod


def test_an_unschedulable_pending_pod_is_provisionable():
    assert is_provisionable(pending())
    assert is_provisionable(pending(spec__schedulerName="default-scheduler"))


@pytest.mark.parametrize(
    ("why", "changes"),
    [
        ("bound", {"spec__nodeName": "n1"}),
        ("nominated", {"status__nominatedNodeName": "n1"}),
        ("terminating", {"metadata__deletionTimestamp": "2026-01-01T00:00:00Z"}),
        ("other scheduler", {"spec__schedulerName": "my-scheduler"}),
        ("daemonset", {"metadata__ownerReferences": [{"kind": "DaemonSet", "name": "ds", "controller": True}]}),
        ("not yet judged", {"status__conditions": []}),
        ("scheduling gated", {"status__conditions": [{**UNSCHEDULABLE, "reason": "SchedulingGated"}]}),
        ("running", {"status__phase": "Running"}),
    ],
)
def test_pods_the_provisioner_must_ignore(why, changes):
    assert not is_provisionable(pending(**changes)), why


def test_group_by_node_leaves_unbound_pods_out():
    pods = [pending("a", spec__nodeName="n1"), pending("b", spec__nodeName="n1"), pending("c"), pending("d", spec__nodeName="n2")]
    grouped = group_by_node(pods)
    assert {k: [p["metadata"]["name"] for p in v] for k, v in grouped.items()} == {"n1": ["a", "b"], "n2": ["d"]}


def test_drain_start_is_read_from_the_taint():
    node = {"spec": {"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule", "timeAdded": "2026-01-02T03:04:05Z"}]}}
    assert drain_started_at(node) == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert drain_started_at({"spec": {}}) is None


@pytest.mark.parametrize(
    ("pid", "expected"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", ("us-east-1a", "i-0123456789abcdef0")),
        ("aws:///cn-north-1b/i-0abc", ("cn-north-1b", "i-0abc")),
        ("aws:///i-0abc", ("", "i-0abc")),
        ("aws:///us-east-1a/fargate-ip-10-0-0-1", None),
        ("kind://docker/kind/kind-worker", None),
        ("", None),
    ],
)
def test_provider_id_parsing(pid, expected):
    assert parse_provider_id(pid) == expected


def test_provider_id_round_trip():
    node = {"metadata": {"name": "a"}, "spec": {"providerID": provider_id("us-east-1a", "i-1")}}
    assert instance_id(node) == "i-1"


def test_readiness_reads_the_ready_condition_and_its_transition_time():
    node = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    r = readiness(node)
    assert (r.ready, r.status, r.reason) == (False, "False", "KubeletNotReady")
    assert r.since == datetime(2026, 1, 1, tzinfo=UTC)
    assert readiness({"status": {}}).status == "Unknown"
    assert readiness({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}).ready


def test_event_names_are_stable_valid_and_distinct_per_reason():
    ref = ObjectRef.pod("default", "x" * 253, "uid-1")
    name = event_name(ref, "Nominated")
    assert name == event_name(ref, "Nominated")
    assert name != event_name(ref, "FailedScheduling")
    assert len(name) <= 253
    with pytest.raises(ValueError, match="no kind"):
        ObjectRef.of({"metadata": {"name": "x"}})


class TestBatching:
    def test_a_batch_closes_after_a_quiet_second(self):
        b = PendingBatcher(quiet=1.0, max_wait=10.0)
        assert b.due_at() is None
        b.observe("ADDED", pending("a"), 0.0)
        b.observe("ADDED", pending("b"), 0.5)
        assert b.due_at() == 1.5
        batch = b.take(1.5)
        assert sorted(p["metadata"]["name"] for p in batch.new) == ["a", "b"]
        assert b.due_at() is None

    def test_a_steady_stream_is_cut_at_ten_seconds(self):
        b = PendingBatcher(quiet=1.0, max_wait=10.0)
        for i in range(40):
            b.observe("ADDED", pending(f"p{i}"), i * 0.5)
        assert b.due_at() == 10.0

    def test_updates_of_known_pods_do_not_keep_a_batch_open(self):
        b = PendingBatcher(quiet=1.0, max_wait=10.0)
        b.observe("ADDED", pending("a"), 0.0)
        b.observe("MODIFIED", pending("a"), 0.9)
        assert b.due_at() == 1.0

    def test_pods_placed_meanwhile_leave_the_batch(self):
        b = PendingBatcher()
        b.observe("ADDED", pending("a"), 0.0)
        b.observe("MODIFIED", pending("a", spec__nodeName="n1"), 0.2)
        assert b.due_at() is None
        b.observe("ADDED", pending("b"), 0.3)
        b.observe("DELETED", pending("b"), 0.4)
        assert b.due_at() is None and not b.pending

    def test_a_first_batch_whose_pods_were_all_placed_is_due_at_once(self):
        """#32 Bursts: the one-pass provisioner waits for a burst, not for pods that may never come."""
        b = FirstBatch()
        b.replace_all([pending("a"), pending("b")], 0.0)
        assert b.due_at() == 1.0
        b.observe("MODIFIED", pending("a", spec__nodeName="n1"), 0.2)
        b.observe("DELETED", pending("b"), 0.3)
        assert b.due_at() == 0.0
        assert b.take(0.3).pending == []

    def test_pending_keeps_pods_from_earlier_batches(self):
        b = PendingBatcher()
        b.observe("ADDED", pending("a"), 0.0)
        b.take(1.0)
        b.observe("ADDED", pending("b"), 2.0)
        batch = b.take(3.0)
        assert [p["metadata"]["name"] for p in batch.new] == ["b"]
        assert sorted(p["metadata"]["name"] for p in batch.pending) == ["a", "b"]

    def test_a_relist_adds_new_pods_and_drops_vanished_ones(self):
        b = PendingBatcher()
        b.observe("ADDED", pending("a"), 0.0)
        b.take(1.0)
        b.replace_all([pending("b"), pending("c", spec__nodeName="n1")], 5.0)
        assert sorted(b.pending) == ["b"]
        assert [p["metadata"]["name"] for p in b.take(6.0).new] == ["b"]


def _joining_node(name: str, *taints: dict) -> dict:
    return {"metadata": {"name": name}, "spec": {"taints": list(taints)}}


class TestNodeJoins:
    """#30.4: which Node events the watch hands to registration, and when (Karpenter's registration reacts to
    the Node appearing, kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/registration.go)."""

    UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}

    def test_an_added_node_is_delivered_after_the_short_gathering(self):
        joins = NodeJoins(gather=0.2)
        assert joins.due_at() is None
        joins.observe("ADDED", _joining_node("a", self.UNREGISTERED), 5.0)
        joins.observe("ADDED", _joining_node("b"), 5.1)
        assert joins.due_at() == pytest.approx(5.2)
        assert joins.take().names == ("a", "b")
        assert joins.due_at() is None

    def test_a_modified_node_joins_only_while_it_carries_the_unregistered_taint(self):
        joins = NodeJoins()
        joins.observe("MODIFIED", _joining_node("registered", {"key": "dedicated", "effect": "NoSchedule"}), 0.0)
        assert joins.due_at() is None  # a registered node's heartbeats never reach registration
        joins.observe("MODIFIED", _joining_node("waiting", self.UNREGISTERED), 1.0)
        assert joins.take().names == ("waiting",)

    def test_a_node_deleted_before_delivery_is_dropped(self):
        joins = NodeJoins()
        joins.observe("ADDED", _joining_node("a", self.UNREGISTERED), 0.0)
        joins.observe("DELETED", _joining_node("a", self.UNREGISTERED), 0.1)
        assert joins.due_at() is None

    def test_a_list_delivers_the_nodes_still_waiting_for_registration(self):
        joins = NodeJoins()
        joins.listed([_joining_node("old"), _joining_node("new", self.UNREGISTERED)], 0.0)
        assert joins.take().names == ("new",)
