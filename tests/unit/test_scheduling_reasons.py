"""Typed unschedulable reasons: each kind the packer tells apart, and the pools refused for their limits."""

from __future__ import annotations

from dataclasses import replace

from nodescale.model import labels as wk
from nodescale.model.requirements import Requirement
from nodescale.model.taints import Taint
from nodescale.scheduling.plan import ExistingNode, Plan, UnschedulableKind
from nodescale.scheduling.scheduler import solve
from tests.builders import GIB, LARGE, MEDIUM, SMALL, itype, plan_for, pods
from tests.builders import scheduling_pool as pool

Kind = UnschedulableKind


def _only(plan: Plan) -> tuple[UnschedulableKind, tuple[str, ...], str]:
    """The kind, limited pools and reason every unschedulable pod shares."""
    found = {(u.kind, u.limited_pools, u.reason) for u in plan.unschedulable}
    assert len(found) == 1, found
    return found.pop()


def test_a_pool_at_its_limits_is_named_and_the_kind_is_limits():
    plan = plan_for(pods(3, cpu="3"), pools=[pool("capped", limits={"cpu": 4_000})], types=[MEDIUM])
    kind, limited, reason = _only(plan)
    assert kind == Kind.LIMITS and limited == ("capped",)
    assert reason == "incompatible with nodepool capped: it would exceed the nodepool's limits"


def test_every_pool_refused_for_its_limits_is_named_in_reason_order():
    pools = [pool("first", limits={"cpu": 1}, weight=5), pool("second", limits={"nodes": 0})]
    kind, limited, reason = _only(plan_for(pods(1), pools=pools, types=[MEDIUM]))
    assert kind == Kind.LIMITS and limited == ("first", "second")
    assert reason.count("it would exceed the nodepool's limits") == 2


def test_limits_decide_the_kind_over_a_pool_the_pods_cannot_use():
    tainted = pool("tainted", taints=(Taint("dedicated", "NoSchedule", "batch"),), weight=5)
    kind, limited, reason = _only(plan_for(pods(1), pools=[tainted, pool("capped", limits={"nodes": 0})]))
    assert kind == Kind.LIMITS and limited == ("capped",)
    assert reason.startswith("incompatible with nodepool tainted: did not tolerate")


def test_a_pod_no_pool_tolerates_is_incompatible_and_names_no_limited_pool():
    tainted = pool("tainted", taints=(Taint("dedicated", "NoSchedule", "batch"),))
    kind, limited, _ = _only(plan_for(pods(1), pools=[tainted]))
    assert kind == Kind.INCOMPATIBLE and limited == ()


def test_a_pod_larger_than_every_type_is_too_large():
    kind, limited, reason = _only(plan_for(pods(1, cpu="64")))
    assert kind == Kind.TOO_LARGE and limited == ()
    assert reason == "incompatible with nodepool default: no instance type has room for cpu=64, memory=1Gi"


def test_no_nodepool_at_all():
    kind, _, reason = _only(solve(pods(1), [], {}))
    assert kind == Kind.NO_NODEPOOL
    assert reason == "no nodepool is defined and no existing node can take it"


def test_too_few_types_for_min_values():
    needs_three = pool("picky", Requirement.create(wk.INSTANCE_TYPE, "Exists", [], min_values=3))
    kind, _, reason = _only(plan_for(pods(1, cpu="6"), pools=[needs_three], types=[SMALL, MEDIUM, LARGE]))
    assert kind == Kind.MIN_VALUES and "minValues" in reason


def test_no_offering_in_the_zone_a_spread_sends_pods_to():
    # The only type is offered in zone-a; a full node in zone-b makes the spread send one pod there.
    one_zone = itype("one-zone", 4, 8, 0.2, zones=("zone-a",))
    full = ExistingNode("full", {wk.ZONE: "zone-b", wk.CAPACITY_TYPE: "on-demand"}, {"cpu": 100, "memory": GIB, "pods": 5})
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": wk.ZONE,
                                             "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"app": "app"}}}]}
    plan = plan_for(pods(2, cpu="3", **spread), types=[one_zone], existing_nodes=[full])
    assert [c.zones for c in plan.node_claims] == [["zone-a"]]
    kind, limited, reason = _only(plan)
    assert kind == Kind.NO_OFFERING and limited == ()
    assert reason == "incompatible with nodepool default: no offering in the zones and capacity types the pods need"


def test_hostname_affinity_beyond_one_node_is_topology():
    together = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "app"}}}]}}}
    plan = plan_for(pods(3, cpu="3", **together), types=[MEDIUM])
    kind, limited, reason = _only(plan)
    assert kind == Kind.TOPOLOGY and limited == ()
    assert reason == "pod affinity on kubernetes.io/hostname: the pods do not fit on one node"


def test_each_pod_of_a_group_is_refused_with_its_own_requests():
    """#27.9: replicas of one spec with different requests are packed a run of equal requests at a time;
    the last run's reason used to be given to every pod left, so a pod asking for 1e18 CPU was reported
    with another pod's requests."""
    huge, big, fits = pods(1, cpu="1e18")[0], pods(1, cpu="100")[0], pods(1, cpu="1")[0]
    workload = [huge, replace(big, name="app-big"), replace(fits, name="app-fits")]
    plan = plan_for(workload)
    reasons = {u.pod.name: (u.kind, u.reason) for u in plan.unschedulable}
    prefix = "incompatible with nodepool default: no instance type has room for"
    assert reasons == {
        "app-0": (Kind.TOO_LARGE, f"{prefix} cpu=1000000000000000000, memory=1Gi"),
        "app-big": (Kind.TOO_LARGE, f"{prefix} cpu=100, memory=1Gi"),
    }
    assert [p.name for claim in plan.node_claims for p in claim.pods] == ["app-fits"]
