"""The world snapshot: what the bin-packer sees of registered, starting and in-flight capacity."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pytest

from nodescale.aws.catalog import bundled_catalog
from nodescale.config import load, parse_documents
from nodescale.model import labels as wk
from nodescale.model.instance import ManagedInstance
from nodescale.model.pod import Pod
from nodescale.scheduling.inflight import IN_FLIGHT_PREFIX
from nodescale.scheduling.templates import pool_usage
from nodescale.scheduling.workloads import read_daemonsets
from nodescale.usecases.provision.registration import sync_nodes
from nodescale.usecases.world import World
from tests.builders import cluster_nodes

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    metadata: {labels: {team: web}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      taints: [{key: dedicated, value: web, effect: NoSchedule}]
      startupTaints: [{key: example.com/agent-not-ready, effect: NoSchedule}]
      requirements: []
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


def _instance(iid: str, itype: str = "m5.large", dns: str = "") -> ManagedInstance:
    return ManagedInstance(iid, itype, "us-east-1a", "spot", "web", "pending", NOW,
                           private_dns_name=dns or f"ip-{iid}.ec2.internal")


def _node(name: str, iid: str, ready: bool, taints: list[dict]) -> dict:
    return {
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "web", "team": "web"}},
        "spec": {"providerID": f"aws:///us-east-1a/{iid}", "taints": taints},
        "status": {
            "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
            "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _daemon() -> dict:
    return {
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"template": {"spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
        }}},
    }


@pytest.fixture
def world() -> World:
    config = load(parse_documents(POOL, "test"))
    assert config.ok, config.errors
    types = [t for t in bundled_catalog("us-east-1") if t.name in ("m5.large", "m5.xlarge")]
    bound = Pod.from_dict({"metadata": {"name": "b", "namespace": "default"},
                           "spec": {"nodeName": "booting", "containers": [{"name": "c", "image": "x"}]}})
    w = World(
        now=NOW,
        cluster="demo",
        nodepools=dict(config.nodepools),
        nodeclasses=dict(config.nodeclasses),
        nodes=cluster_nodes(
            _node("ready", "i-ready", True, [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]),
            _node("booting", "i-boot", False, [
                {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
                {"key": "example.com/agent-not-ready", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
            ]),
        ),
        pods_by_node={"booting": [bound]},
        daemonsets=read_daemonsets([_daemon()])[0],
        instances=[_instance("i-ready", dns="ready"), _instance("i-boot", dns="booting"), _instance("i-new", "m5.xlarge")],
        catalog=types,
        types={"web": types},
    )
    return w


def test_instances_without_a_node_are_unregistered(world: World) -> None:
    assert [i.instance_id for i in world.unregistered_instances()] == ["i-new"]
    assert world.node_for_instance("i-ready").name == "ready"
    assert world.instance_for_node("booting").instance_id == "i-boot"
    assert world.instance_for_node(f"{IN_FLIGHT_PREFIX}i-new").instance_id == "i-new"


def test_a_ready_node_keeps_its_taints_and_is_not_in_flight(world: World) -> None:
    ready = next(n for n in world.existing_nodes() if n.name == "ready")
    assert not ready.in_flight
    assert [t.key for t in ready.taints] == ["dedicated"]


def test_a_starting_node_is_in_flight_without_its_startup_taints_and_keeps_its_pods(world: World) -> None:
    booting = next(n for n in world.existing_nodes() if n.name == "booting")
    assert booting.in_flight
    assert [t.key for t in booting.taints] == ["dedicated"]
    assert [p.name for p in booting.pods] == ["b"]


def test_an_unregistered_instance_stands_in_as_the_node_it_will_be(world: World) -> None:
    stand_in = next(n for n in world.existing_nodes() if n.name == f"{IN_FLIGHT_PREFIX}i-new")
    assert stand_in.in_flight and stand_in.nodepool == "web"
    assert stand_in.labels["team"] == "web"
    assert stand_in.labels["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert stand_in.labels["karpenter.sh/capacity-type"] == "spot"
    assert stand_in.labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert [t.key for t in stand_in.taints] == ["dedicated"]
    # the DaemonSet that tolerates everything takes its share of the new node first
    assert [p.requests["cpu"] for p in stand_in.pods] == [100]
    assert stand_in.allocatable["cpu"] > 3000 and stand_in.price > 0


def test_excluded_nodes_and_instances_are_left_out(world: World) -> None:
    names = {n.name for n in world.existing_nodes(exclude=["ready", "i-new"])}
    assert names == {"booting"}


def test_pool_usage_counts_existing_and_in_flight_capacity(world: World) -> None:
    usage = pool_usage(world.existing_nodes(), {})
    assert usage["web"]["nodes"] == 3
    assert usage["web"]["cpu"] == 2000 + 2000 + 4000


def test_without_nodes_is_a_new_snapshot_and_the_read_one_is_left_as_it_was(world: World) -> None:
    """#29.1: cleanup's deleted Nodes leave a new snapshot (lookups rebuilt: the deleted Node's instance is
    unregistered again there) instead of mutating the one read."""
    after = world.without_nodes(["ready"])
    assert [n.name for n in after.nodes] == ["booting"] and after.node("ready") is None
    assert after.node_for_instance("i-ready") is None
    assert {i.instance_id for i in after.unregistered_instances()} == {"i-new", "i-ready"}
    assert [n.name for n in world.nodes] == ["ready", "booting"] and world.node_for_instance("i-ready") is not None


def test_syncing_labels_gives_a_new_snapshot_with_them_and_leaves_the_read_one(world: World) -> None:
    """#29.1: registration's labels reach the plan through a new snapshot (typed node, planned node and raw
    object agree) instead of being written into the raw Node the read snapshot holds."""
    synced = sync_nodes(None, world, dry_run=True)  # type: ignore[arg-type]  # a dry run writes nothing
    assert synced is not world
    assert synced.node("ready").labels[wk.REGISTERED] == "true"
    assert synced.node("ready").raw["metadata"]["labels"][wk.REGISTERED] == "true"
    assert next(n for n in synced.existing_nodes() if n.name == "ready").labels[wk.INSTANCE_TYPE] == "m5.large"
    assert wk.REGISTERED not in world.node("ready").labels
    assert wk.REGISTERED not in world.node("ready").raw["metadata"]["labels"]


def test_the_snapshot_is_frozen_and_a_refresh_is_a_new_one(world: World) -> None:
    """#29.1: nothing rewrites a read world; re-read instances give a new snapshot, re-indexed."""
    with pytest.raises(FrozenInstanceError):
        world.instances = []  # type: ignore[misc]
    fresh = world.with_instances([_instance("i-later", "m5.xlarge")])
    assert [i.instance_id for i in fresh.unregistered_instances()] == ["i-later"]
    assert fresh.instance("i-new") is None and world.instance("i-new") is not None
