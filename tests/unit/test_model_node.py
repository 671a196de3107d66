"""The typed Node view of a world snapshot: what the use-cases read of a Node, parsed once."""

from __future__ import annotations

from datetime import UTC, datetime

from nodescale.model.instance import ManagedInstance
from nodescale.model.labels import TERMINATION_FINALIZER
from nodescale.model.node import ClusterNode
from nodescale.scheduling.existing import existing_nodes
from nodescale.usecases import finalize
from nodescale.usecases.world import World
from tests.builders import cluster_nodes

RAW = {
    "metadata": {
        "name": "ip-10-0-1-4.ec2.internal",
        "uid": "u-1",
        "creationTimestamp": "2026-11-24T10:00:00Z",
        "labels": {"karpenter.sh/provisioner-name": "default", "kubernetes.io/os": "linux"},
        "annotations": {"a": "b"},
    },
    "spec": {
        "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
        "unschedulable": True,
        "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-24T10:01:00Z"}]},
}


def test_a_node_is_read_once_into_typed_fields() -> None:
    node = ClusterNode.from_dict(RAW)
    assert (node.name, node.uid, node.instance_id, node.zone) == (
        "ip-10-0-1-4.ec2.internal", "u-1", "i-0123456789abcdef0", "us-east-1a")
    assert node.nodepool == "default"  # a v1alpha5 node names its Provisioner
    assert node.ready and node.readiness.since == datetime(2026, 11, 24, 10, 1, tzinfo=UTC)
    assert node.unschedulable and node.has_taint("karpenter.sh/disrupted", "NoSchedule")
    assert not node.has_taint("karpenter.sh/disrupted", "NoExecute")
    assert node.created == datetime(2026, 11, 24, 10, tzinfo=UTC)


def test_a_node_without_an_ec2_provider_or_ready_condition() -> None:
    node = ClusterNode.from_dict({"metadata": {"name": "fargate-ip-1"}, "spec": {"providerID": "fargate://x"}})
    assert node.instance_id is None and node.zone is None and node.nodepool == ""
    assert not node.ready and node.readiness.status == "Unknown"


def test_the_world_looks_nodes_up_by_name_and_by_instance() -> None:
    inst = ManagedInstance("i-0123456789abcdef0", "m5.large", "us-east-1a", "spot", "default", "running", None,
                           private_dns_name="ip-10-0-1-4.ec2.internal")
    world = World(now=datetime.now(UTC), cluster="c", nodes=cluster_nodes(RAW), instances=[inst])
    view = world.node("ip-10-0-1-4.ec2.internal")
    assert view is not None and view.raw is RAW
    assert world.node("nope") is None
    assert world.node_for_instance("i-0123456789abcdef0").raw is RAW
    assert [n.name for n in world.node_views()] == ["ip-10-0-1-4.ec2.internal"]


def test_capacity_allocatable_and_taints_are_parsed_once_and_a_bad_one_is_named() -> None:
    """#29.1: the bin-packer takes a Node's capacity, allocatable and taints from the typed node, not from
    the raw object; a Node whose quantity cannot be read is left out of planning, the field named."""
    raw = {**RAW, "status": {**RAW["status"], "capacity": {"cpu": "2", "memory": "8Gi"},
                             "allocatable": {"cpu": "1930m", "memory": "7Gi"}}}
    found = ClusterNode.from_dict(raw).resources
    assert found.error == "" and found.capacity["cpu"] == 2000 and found.allocatable["cpu"] == 1930
    assert [(t.key, t.effect) for t in found.taints] == [("karpenter.sh/disrupted", "NoSchedule")]
    (planned,), unreadable = existing_nodes([ClusterNode.from_dict(raw)], {}, {}, {}, {})
    assert planned.allocatable == found.allocatable and planned.capacity == found.capacity
    assert planned.taints == found.taints and unreadable == {}

    bad = ClusterNode.from_dict({**raw, "status": {"allocatable": {"cpu": "lots"}}})
    assert bad.resources.error.startswith("status.allocatable.cpu")
    assert existing_nodes([bad], {}, {}, {}, {}) == (
        [], {bad.name: f"Node {bad.name}: {bad.resources.error}"})


def test_labels_synced_since_the_read_land_on_the_typed_node_and_the_rest_stays_parsed() -> None:
    """#29.1: World.with_node_labels sets the labels on the typed Node (no re-parse of the raw object):
    its pool and the instance it speaks for follow, its other fields are the very same objects."""
    inst = ManagedInstance("i-0123456789abcdef0", "m5.large", "us-east-1a", "spot", "default", "running", None,
                           private_dns_name="ip-10-0-1-4.ec2.internal")
    world = World(now=datetime.now(UTC), cluster="c", nodes=cluster_nodes(RAW), instances=[inst])
    before = world.node("ip-10-0-1-4.ec2.internal")
    after = world.with_node_labels({before.name: {"karpenter.sh/registered": "true"}}).node(before.name)
    assert after.labels == {**RAW["metadata"]["labels"], "karpenter.sh/registered": "true"}
    assert after.nodepool == "default" and after.resources is before.resources and after.readiness is before.readiness
    assert before.labels == RAW["metadata"]["labels"]  # the snapshot read is left as it was
    assert world.with_node_labels({before.name: {}}).node_for_instance(inst.instance_id).name == before.name


def test_finalizers_are_parsed_once_and_only_a_list_of_names_counts() -> None:
    """#29.1: a Node's finalizers are read once into the typed node, which the termination and the deleted-Node
    check read. A hostile value that is not a list names no finalizer: a string such as
    "xkarpenter.sh/termination" is not searched for substrings (the raw read found the finalizer in it), and
    entries that are not strings are dropped."""
    deleted = {**RAW, "metadata": {**RAW["metadata"], "deletionTimestamp": "2026-11-24T11:00:00Z"}}
    held = ClusterNode.from_dict({**deleted, "metadata": {**deleted["metadata"],
                                                          "finalizers": ["a/b", TERMINATION_FINALIZER, 7, None]}})
    assert held.finalizers == ("a/b", TERMINATION_FINALIZER) and finalize.node_deleting(held)
    for hostile in (f"x{TERMINATION_FINALIZER}", {TERMINATION_FINALIZER: 1}, 7):
        node = ClusterNode.from_dict({**deleted, "metadata": {**deleted["metadata"], "finalizers": hostile}})
        assert node.finalizers == () and not finalize.node_deleting(node)
    assert ClusterNode.from_dict(RAW).finalizers == ()
