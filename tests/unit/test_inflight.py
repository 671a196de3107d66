"""The core's word on capacity in flight, registered nodes and an instance's price (#29.1: moved out of World)."""

from __future__ import annotations

from nodescale.model import labels as wk
from nodescale.model.instancetype import Offering
from nodescale.model.node import ClusterNode
from nodescale.model.nodecost import instance_price
from nodescale.model.taints import Taint
from nodescale.scheduling.existing import existing_nodes
from nodescale.scheduling.inflight import (
    in_flight_instance,
    in_flight_name,
    stand_in,
    startup_keys,
    unregistered,
)
from tests.builders import SMALL, daemon, instance, itype, scheduling_pool

WEB = scheduling_pool("web", taints=(Taint("dedicated", "NoSchedule", "web"),),
                      startup=(Taint("example.com/agent", "NoSchedule"),), labels={"team": "web"})


def test_in_flight_names_round_trip_and_registered_names_are_not_in_flight() -> None:
    """#29.1: the stand-in's name carries its instance id, a Node's name never does."""
    assert in_flight_instance(in_flight_name("i-1")) == "i-1"
    assert in_flight_instance("ip-10-0-0-1.ec2.internal") is None


def test_unregistered_are_the_live_instances_no_node_names() -> None:
    """#29.1: pending/running instances not named by any Node are in flight; stopped or named ones are not."""
    live, named, stopped = instance("i-live", state="pending"), instance("i-named"), instance("i-off", state="stopped")
    assert unregistered([live, named, stopped], {"i-named"}) == [live]


def test_a_stand_in_carries_its_pools_labels_taints_and_the_daemons_that_tolerate_them() -> None:
    """#29.1: the stand-in looks like the Node-to-be: pool labels and taints, the instance's type, zone and
    hostname, and the DaemonSet pods that tolerate the pool's taints (those that do not stay off)."""
    tolerant = daemon("100m", tolerations=[{"operator": "Exists"}])
    picky = daemon("200m")
    inst = instance("i-1", zone="zone-b", capacity_type="spot", nodepool="web", private_dns_name="ip-1.internal")
    node = stand_in(inst, WEB, SMALL, price=0.03, daemon_pods=[tolerant, picky], zone_id="use1-az2",
                    class_labels={"extra": "x"})
    assert node.name == "in-flight/i-1" and node.in_flight and node.price == 0.03 and node.pool == "web"
    assert node.labels["team"] == "web" and node.labels["extra"] == "x"
    assert (node.labels[wk.ZONE], node.labels[wk.ZONE_ID], node.labels[wk.CAPACITY_TYPE]) == ("zone-b", "use1-az2", "spot")
    assert (node.labels[wk.INSTANCE_TYPE], node.labels[wk.HOSTNAME]) == ("small", "ip-1.internal")
    assert node.taints == WEB.taints
    assert [p.name for p in node.pods] == ["ds-i-1"] and node.pods[0].node_name == "in-flight/i-1"


def test_a_stand_in_of_a_pool_no_longer_configured_is_named_by_its_tags() -> None:
    """#29.1: without its NodePool, the instance's tags name the pool; no taints, no class labels."""
    inst = instance("i-2", nodepool="gone", tags={wk.NODEPOOL: "gone"}, capacity_reservation_id="cr-1",
                    capacity_reservation_type="default")
    node = stand_in(inst, None, SMALL, price=0.0, daemon_pods=[daemon("100m")])
    assert node.labels[wk.NODEPOOL] == "gone" and node.taints == ()
    assert node.labels[wk.CAPACITY_RESERVATION_ID] == "cr-1" and node.labels[wk.HOSTNAME] == "in-flight/i-2"
    assert [p.name for p in node.pods] == ["ds-i-2"]


def test_startup_keys_are_the_transient_ones_plus_the_pools() -> None:
    assert "node.kubernetes.io/not-ready" in startup_keys(None)
    assert startup_keys(WEB) == startup_keys(None) | {"example.com/agent"}


def test_instance_price_is_its_offerings_and_a_deselected_reservation_bills_on_demand() -> None:
    """#29.1: the price fallback: the exact offering, else on demand for a reserved instance, else 0."""
    it = itype("r", 2, 4, 0.10, spot=0.03, zones=("zone-a",))
    it = it.copy(offerings=(*it.offerings, Offering("zone-a", wk.CAPACITY_RESERVED, 0.0001, reservation_id="cr-1")))
    assert instance_price(instance("i", "r", capacity_type="spot"), it) == 0.03
    assert instance_price(instance("i", "r", capacity_type="reserved", capacity_reservation_id="cr-1"), it) == 0.0001
    assert instance_price(instance("i", "r", capacity_type="reserved", capacity_reservation_id="cr-2"), it) == 0.10
    assert instance_price(instance("i", "r", zone="zone-z", capacity_type="spot"), it) == 0.0
    assert instance_price(instance("i", "r"), None) == 0.0


def _node(name: str, iid: str, *, ready: bool, taints: list[dict], **meta: object) -> ClusterNode:
    return ClusterNode.from_dict({
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "web"}, **meta},
        "spec": {"providerID": f"aws:///zone-a/{iid}", "taints": taints},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def test_existing_nodes_mark_starting_ones_in_flight_price_trusted_ones_and_report_unreadable_ones() -> None:
    """#29.1: a NotReady node is in flight without its startup taints; a trusted instance prices its node and
    names its capacity type; a deleting node takes no pods; an unreadable node is left out with why;
    ``exclude`` takes node names and instance ids, stand-ins included."""
    starting = _node("starting", "i-s", ready=False, taints=[
        {"key": "example.com/agent", "effect": "NoSchedule"}, {"key": "dedicated", "value": "web", "effect": "NoSchedule"}])
    going = _node("going", "i-g", ready=True, taints=[], deletionTimestamp="2026-01-01T00:00:00Z")
    bad = ClusterNode.from_dict({"metadata": {"name": "bad"}, "spec": {}, "status": {"allocatable": {"cpu": "lots"}}})
    skipped = _node("skipped", "i-x", ready=True, taints=[])
    spot = instance("i-s", capacity_type="spot", nodepool="web")
    flying = stand_in(instance("i-f"), None, SMALL, price=0.0, daemon_pods=[])
    dropped = stand_in(instance("i-d"), None, SMALL, price=0.0, daemon_pods=[])
    nodes, unreadable = existing_nodes([starting, going, bad, skipped], {}, {"web": WEB}, {"starting": spot},
                                       {"i-s": 0.05}, [flying, dropped], exclude=["i-x", "i-d"])
    assert [n.name for n in nodes] == ["starting", "going", "in-flight/i-f"]
    first = nodes[0]
    assert first.in_flight and [t.key for t in first.taints] == ["dedicated"]
    assert first.price == 0.05 and first.labels[wk.CAPACITY_TYPE] == "spot"
    assert nodes[1].unschedulable and not nodes[1].in_flight
    assert set(unreadable) == {"bad"}
