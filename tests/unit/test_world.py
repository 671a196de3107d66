"""The world snapshot: what the bin-packer sees of registered, starting and in-flight capacity."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime, timedelta

import pytest

from nodescale import clock
from nodescale.aws.catalog import bundled_catalog
from nodescale.config.documents import parse_documents
from nodescale.config.loader import load
from nodescale.model import labels as wk
from nodescale.model.instance import ManagedInstance
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirements
from nodescale.scheduling import inflight
from nodescale.scheduling.inflight import IN_FLIGHT_PREFIX, LAUNCH_LAG_SECONDS
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


# ---------------------------------------------------------------------- NodeClaims in flight (#30.1)
# Karpenter behaviour restated: kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/suite_test.go,
# Describe("In-Flight Nodes"): It("should not launch a second node if there is an in-flight node that can support
# the pod") (a NodeClaim without its Node is planned onto, whoever made it: the cluster state tracks every
# NodeClaim) and It("should launch a second node if an in-flight node is terminating") (a NodeClaim being deleted
# is not).

def _claim(name: str, *, provider: str = "", labels: dict | None = None, requirements: list | None = None,
           ours: bool = True, **status: object) -> dict:
    meta: dict = {"name": name, "labels": {"karpenter.sh/nodepool": "web", "team": "web", **(labels or {})},
                  "annotations": {"nodescale.io/cluster": "demo"} if ours else {}}
    if status.pop("deleting", False):
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    reqs = requirements if requirements is not None else [
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge", "m5.large"]},
        {"key": wk.ZONE, "operator": "In", "values": ["us-east-1a"]},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
    ]
    spec = {"requirements": reqs, "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
            "startupTaints": [{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}]}
    return {"metadata": meta, "spec": spec,
            "status": {**({"providerID": provider} if provider else {}), **status}}


def _in_flight(world: World) -> dict[str, object]:
    return {n.name: n for n in world.existing_nodes() if n.name.startswith(IN_FLIGHT_PREFIX)}


def test_a_nodeclaim_of_an_instance_in_the_snapshot_is_counted_once_as_the_instance(world: World) -> None:
    """#30.1: a NodeClaim whose providerID names an instance EC2 shows adds nothing: the plan is the one the
    instance alone gives (same stand-in, same name), never two nodes for one instance."""
    claimed = replace(world, nodeclaims=[_claim("web-a1b2c", provider="aws:///us-east-1a/i-new",
                                                labels={wk.INSTANCE_TYPE: "m5.xlarge"})])
    assert list(_in_flight(claimed)) == [f"{IN_FLIGHT_PREFIX}i-new"]
    assert _in_flight(claimed) == _in_flight(world)


def test_a_nodeclaim_ec2_does_not_show_stands_in_flight_as_its_cheapest_type(world: World) -> None:
    """#30.1: a NodeClaim without providerID (not launched yet) is capacity in flight: the cheapest type its
    requirement allows, its single zone and capacity type, its pool's labels and taints (startup taints
    dropped), and the DaemonSet pods that will run there; keyed by the claim's name."""
    w = replace(world, nodeclaims=[_claim("web-a1b2c")])
    node = _in_flight(w)[f"{IN_FLIGHT_PREFIX}web-a1b2c"]
    assert node.in_flight and node.pool == "web"
    assert (node.labels[wk.INSTANCE_TYPE], node.labels[wk.ZONE], node.labels[wk.CAPACITY_TYPE]) == (
        "m5.large", "us-east-1a", "spot")
    assert node.labels["team"] == "web" and node.labels[wk.HOSTNAME] == f"{IN_FLIGHT_PREFIX}web-a1b2c"
    assert [t.key for t in node.taints] == ["dedicated"]
    assert [p.name for p in node.pods] == ["agent-daemon-web-a1b2c"]
    m5_large = next(t for t in world.catalog if t.name == "m5.large")
    assert node.price == m5_large.cheapest(Requirements.from_labels({wk.ZONE: "us-east-1a",
                                                                       wk.CAPACITY_TYPE: "spot"})).price > 0
    assert set(_in_flight(w)) == {f"{IN_FLIGHT_PREFIX}i-new", f"{IN_FLIGHT_PREFIX}web-a1b2c"}


def test_a_launched_nodeclaim_ec2_does_not_list_yet_counts_once_by_its_label(world: World) -> None:
    """#30.1: launched (providerID, instance-type label) but EC2 lagging: one stand-in of the labelled type,
    however many NodeClaims name that instance."""
    lagging = _claim("web-zzzzz", provider="aws:///us-east-1a/i-later", labels={wk.INSTANCE_TYPE: "m5.xlarge"})
    twin = {**lagging, "metadata": {**lagging["metadata"], "name": "web-yyyyy"}}
    w = replace(world, nodeclaims=[lagging, twin])
    assert set(_in_flight(w)) == {f"{IN_FLIGHT_PREFIX}i-new", f"{IN_FLIGHT_PREFIX}web-zzzzz"}
    assert _in_flight(w)[f"{IN_FLIGHT_PREFIX}web-zzzzz"].labels[wk.INSTANCE_TYPE] == "m5.xlarge"


def test_a_launched_nodeclaim_whose_instance_ec2_no_longer_lists_stops_counting_after_the_lag(world: World) -> None:
    """#30.1: EC2 may not list a just-launched instance for some seconds, so a launched NodeClaim it does not
    show counts in flight for LAUNCH_LAG_SECONDS; after that its instance is gone (terminated, or reclaimed before
    it joined) and it holds no pods back. The NodeClaim itself stays until the registration TTL, as in
    kubernetes-sigs/karpenter pkg/controllers/nodeclaim/garbagecollection suite_test.go, It "shouldn't delete the
    NodeClaim when the Node isn't there and the instance is gone" (its 20 s step is "past the cache eventual
    consistency timeout"); where Karpenter's cluster state would still plan onto it, nodescale does not."""
    def launched(name: str, seconds_ago: float) -> dict:
        at = clock.format_timestamp(world.now - timedelta(seconds=seconds_ago))
        return _claim(name, provider="aws:///us-east-1a/i-" + name[-5:], labels={wk.INSTANCE_TYPE: "m5.xlarge"},
                      conditions=[{"type": "Registered", "status": "Unknown", "lastTransitionTime": at}])

    w = replace(world, nodeclaims=[launched("web-fresh", 5), launched("web-stale", LAUNCH_LAG_SECONDS + 1)])
    assert set(_in_flight(w)) == {f"{IN_FLIGHT_PREFIX}i-new", f"{IN_FLIGHT_PREFIX}web-fresh"}
    assert inflight.instance_gone(w.nodeclaims[1], {"i-new"}, w.now)
    assert not inflight.instance_gone(w.nodeclaims[0], {"i-new"}, w.now)


def test_a_deleting_or_registered_nodeclaim_is_not_in_flight(world: World) -> None:
    """#30.1: a NodeClaim being deleted, or whose node registered, is not capacity in flight."""
    w = replace(world, nodeclaims=[_claim("web-dying", deleting=True), _claim("web-joined", nodeName="x"),
                                   _claim("web-reg", conditions=[{"type": "Registered", "status": "True"}])])
    assert list(_in_flight(w)) == [f"{IN_FLIGHT_PREFIX}i-new"]


def test_a_nodeclaim_nodescale_did_not_create_is_in_flight_too(world: World) -> None:
    """#30.1: a NodeClaim without nodescale's annotation (Karpenter's, during a migration) is planned onto as
    Karpenter plans onto every NodeClaim it sees."""
    w = replace(world, nodeclaims=[_claim("web-karpe", ours=False)])
    assert f"{IN_FLIGHT_PREFIX}web-karpe" in _in_flight(w)


def test_a_nodeclaim_that_cannot_be_read_is_left_out_and_the_others_count(world: World, caplog) -> None:
    """#30.1: a NodeClaim whose requirements the API server would refuse, or of no known type, is left out of
    planning with a warning naming it; the others still count."""
    bad = _claim("web-bad01", requirements=[{"key": wk.ZONE, "operator": "Sideways", "values": ["x"]}])
    unknown = _claim("web-unkno", labels={wk.INSTANCE_TYPE: "z9.huge"})
    w = replace(world, nodeclaims=[bad, unknown, _claim("web-good1")])
    assert set(_in_flight(w)) == {f"{IN_FLIGHT_PREFIX}i-new", f"{IN_FLIGHT_PREFIX}web-good1"}
    assert "in-flight/web-bad01" in caplog.text and "Sideways" in caplog.text
    assert "in-flight/web-unkno" in caplog.text


def test_without_nodeclaims_capacity_in_flight_is_ec2s(world: World) -> None:
    """#30.1: without the CRD (nodeclaims None) the unregistered instances alone are in flight."""
    assert world.nodeclaims is None and list(_in_flight(world)) == [f"{IN_FLIGHT_PREFIX}i-new"]


# ------------------------------------------------------------------ registering nodes (#30.4)
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def test_a_ready_node_of_ours_still_unregistered_is_capacity_on_its_way(world: World) -> None:
    """#30.4: a Node nodescale launched that is Ready but still carries karpenter.sh/unregistered (the watch
    has not registered it yet) is planned onto as capacity on its way, the taint ignored, as Karpenter's
    cluster state ignores ephemeral taints on a managed node not yet initialized (kubernetes-sigs/karpenter
    pkg/controllers/state/statenode.go, Taints). On the old code the NoExecute taint kept every pod off it
    and the plan launched another node."""
    joining = _node("ip-i-new.ec2.internal", "i-new", True, [
        UNREGISTERED, {"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    w = replace(world, nodes=cluster_nodes(*[n.raw for n in world.nodes], joining))
    node = next(n for n in w.existing_nodes() if n.name == "ip-i-new.ec2.internal")
    assert node.in_flight
    assert [t.key for t in node.taints] == ["dedicated"]


def test_a_node_not_ours_with_the_unregistered_taint_keeps_it(world: World) -> None:
    """#30.4: the taint is ignored only on nodes nodescale launched; another's Node (no instance of this
    cluster behind it) is planned with its taints as they are, and is not capacity on its way."""
    foreign = _node("foreign", "i-foreign", True, [UNREGISTERED])
    w = replace(world, nodes=cluster_nodes(*[n.raw for n in world.nodes], foreign))
    node = next(n for n in w.existing_nodes() if n.name == "foreign")
    assert not node.in_flight
    assert [t.key for t in node.taints] == ["karpenter.sh/unregistered"]
