"""Topology in the bin-packer: spread over zones, nodes and capacity types; pod affinity and anti-affinity."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.plan import ExistingNode, Plan
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.topology import spread_quota

GIB = 2**30
ZONES = ("zone-a", "zone-b", "zone-c")


def itype(name: str, cpu: int, price: float) -> InstanceType:
    offerings = tuple(Offering(z, ct, price * (0.4 if ct == wk.CAPACITY_SPOT else 1))
                      for z in ZONES for ct in (wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT))
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: "amd64", wk.OS: "linux"}
    return InstanceType(name, labels, {"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110}, {}, offerings)


TYPES = [itype("small", 2, 0.1), itype("medium", 4, 0.2), itype("large", 16, 0.8)]
ON_DEMAND = NodePool("default", Requirements([Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"])]), "default")
BOTH = NodePool("default", Requirements(), "default")


def pods(n: int, name: str = "web", cpu: str = "500m", labels: dict | None = None, **spec: object) -> list[Pod]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec}
    first = Pod.from_dict({"metadata": {"name": f"{name}-0", "namespace": "default",
                                        "labels": labels or {"app": name}}, "spec": body})
    return [first] + [replace(first, name=f"{name}-{i}") for i in range(1, n)]


def plan_for(workload: list[Pod], pool: NodePool = ON_DEMAND, **kwargs: object) -> Plan:
    return solve(workload, [pool], {pool.name: TYPES}, **kwargs)


def spread(key: str, app: str = "web", skew: int = 1, when: str = "DoNotSchedule", min_domains: int | None = None):
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": app}}}
    if min_domains:
        c["minDomains"] = min_domains
    return [c]


def affinity(kind: str, key: str, app: str, weight: int = 0) -> dict:
    term = {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}
    if weight:
        return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight, "podAffinityTerm": term}]}}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def node(name: str, zone: str, resident: list[Pod], cpu: int = 8) -> ExistingNode:
    labels = {wk.ZONE: zone, wk.HOSTNAME: name, wk.ARCH: "amd64", wk.OS: "linux", wk.CAPACITY_TYPE: "on-demand"}
    return ExistingNode(name, labels, {"cpu": cpu * 1000, "memory": 32 * GIB, "pods": 110}, pods=resident)


def per_zone(plan: Plan, prefix: str = "web") -> Counter:
    out: Counter = Counter()
    for c in plan.node_claims:
        assert len(c.zones) == 1, c.zones
        out[c.zones[0]] += sum(1 for p in c.pods if p.name.startswith(prefix))
    return out


# -- spread ---------------------------------------------------------------------------------------------------


def test_zone_spread_balances_new_pods():
    plan = plan_for(pods(7, topologySpreadConstraints=spread(wk.ZONE)))
    assert plan.unschedulable == []
    assert sorted(per_zone(plan).values()) == [2, 2, 3]


def test_zone_spread_counts_pods_already_running():
    existing = node("n1", "zone-a", pods(2, name="web-old", labels={"app": "web"}), cpu=1)
    plan = plan_for(pods(4, topologySpreadConstraints=spread(wk.ZONE)), existing_nodes=[existing])
    assert per_zone(plan) == {"zone-b": 2, "zone-c": 2}


def test_min_domains_caps_each_zone_when_too_few_exist():
    plan = plan_for(pods(9, topologySpreadConstraints=spread(wk.ZONE, min_domains=5)))
    assert sum(per_zone(plan).values()) == 3
    assert len(plan.unschedulable) == 6
    assert "topology spread on topology.kubernetes.io/zone (maxSkew 1)" in plan.unschedulable[0].reason


def test_schedule_anyway_spread_is_relaxed_when_it_cannot_be_met():
    plan = plan_for(pods(9, topologySpreadConstraints=spread(wk.ZONE, when="ScheduleAnyway", min_domains=5)))
    assert plan.unschedulable == []
    assert sum(len(c.pods) for c in plan.node_claims) == 9


def test_hostname_spread_puts_at_most_max_skew_on_a_node():
    for skew in (1, 2):
        plan = plan_for(pods(6, topologySpreadConstraints=spread(wk.HOSTNAME, skew=skew)))
        assert plan.unschedulable == []
        assert max(len(c.pods) for c in plan.node_claims) == skew
        assert len(plan.node_claims) == 6 // skew


def test_hostname_spread_still_lets_other_pods_share_the_nodes():
    workload = pods(3, topologySpreadConstraints=spread(wk.HOSTNAME)) + pods(3, name="other")
    plan = plan_for(workload)
    assert len(plan.node_claims) == 3
    assert all(sum(p.name.startswith("web") for p in c.pods) == 1 for c in plan.node_claims)


def test_capacity_type_spread_splits_between_spot_and_on_demand():
    plan = plan_for(pods(4, topologySpreadConstraints=spread(wk.CAPACITY_TYPE)), BOTH)
    counts: Counter = Counter()
    for c in plan.node_claims:
        assert len(c.capacity_types) == 1
        counts[c.capacity_types[0]] += len(c.pods)
    assert counts == {"spot": 2, "on-demand": 2}


# -- pod affinity and anti-affinity ---------------------------------------------------------------------------


def test_hostname_anti_affinity_gives_each_pod_its_own_node():
    plan = plan_for(pods(5, affinity=affinity("podAntiAffinity", wk.HOSTNAME, "web")))
    assert [len(c.pods) for c in plan.node_claims] == [1] * 5


def test_hostname_anti_affinity_avoids_nodes_with_matching_pods():
    busy = node("busy", "zone-a", pods(1, name="web-old", labels={"app": "web"}))
    free = node("free", "zone-a", [])
    plan = plan_for(pods(2, affinity=affinity("podAntiAffinity", wk.HOSTNAME, "web")), existing_nodes=[busy, free])
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("free", 1)]
    assert len(plan.node_claims) == 1


def test_anti_affinity_of_running_pods_keeps_their_targets_away():
    guard = pods(1, name="guard", labels={"app": "guard"}, affinity=affinity("podAntiAffinity", wk.HOSTNAME, "web"))
    plan = plan_for(pods(2), existing_nodes=[node("guarded", "zone-a", guard)])
    assert plan.existing == []
    assert sum(len(c.pods) for c in plan.node_claims) == 2


def test_zone_anti_affinity_with_itself_places_one_per_zone():
    plan = plan_for(pods(5, affinity=affinity("podAntiAffinity", wk.ZONE, "web")))
    assert sorted(per_zone(plan).values()) == [1, 1, 1]
    assert len(plan.unschedulable) == 2
    assert "anti-affinity" in plan.unschedulable[0].reason


def test_hostname_affinity_follows_the_matching_pod():
    db_node = node("db-node", "zone-b", pods(1, name="db", labels={"app": "db"}))
    other = node("other", "zone-b", [])
    plan = plan_for(pods(3, affinity=affinity("podAffinity", wk.HOSTNAME, "db")), existing_nodes=[other, db_node])
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("db-node", 3)]


def test_hostname_affinity_without_a_match_is_unschedulable():
    plan = plan_for(pods(2, affinity=affinity("podAffinity", wk.HOSTNAME, "db")))
    assert plan.node_claims == []
    assert "pod affinity" in plan.unschedulable[0].reason


def test_hostname_self_affinity_puts_the_group_on_one_node():
    plan = plan_for(pods(6, affinity=affinity("podAffinity", wk.HOSTNAME, "web")))
    assert [len(c.pods) for c in plan.node_claims] == [6]


def test_zone_affinity_follows_the_matching_pod_zone():
    db_node = node("db-node", "zone-c", pods(1, name="db", labels={"app": "db"}), cpu=1)
    plan = plan_for(pods(4, affinity=affinity("podAffinity", wk.ZONE, "db")), existing_nodes=[db_node])
    assert plan.unschedulable == []
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("db-node", 1)]
    assert per_zone(plan) == {"zone-c": 3}


def test_zone_self_affinity_keeps_the_group_in_one_zone():
    plan = plan_for(pods(40, cpu="1", affinity=affinity("podAffinity", wk.ZONE, "web")))
    assert len(per_zone(plan)) == 1
    assert sum(per_zone(plan).values()) == 40


def test_preferred_anti_affinity_is_relaxed_when_nodes_run_out():
    capped = NodePool("default", ON_DEMAND.requirements, "default", limits={"cpu": 4000})
    plan = solve(pods(3, affinity=affinity("podAntiAffinity", wk.HOSTNAME, "web", weight=10)), [capped],
                 {"default": [itype("medium", 4, 0.2)]})
    assert plan.unschedulable == []
    assert [len(c.pods) for c in plan.node_claims] == [3]


# -- the quota arithmetic and a mixed workload ---------------------------------------------------------------


def test_spread_quota_fills_the_least_loaded_domains_first():
    assert spread_quota({"a": 3, "b": 0, "c": 1}, "abc", 4, 1, None, True) == {"a": 0, "b": 3, "c": 1}
    # Two pods more than the skew allows stay out.
    assert spread_quota({"a": 0}, ["a", "b"], 5, 1, None, True, cap={"a": 5, "b": 0}) == {"a": 1, "b": 0}
    assert spread_quota({}, ["a", "b"], 5, 2, 3, True) == {"a": 2, "b": 2}


def test_mixed_topology_workload_keeps_every_rule():
    rnd = random.Random(3)
    workload: list[Pod] = []
    for i in range(90):
        kind = i % 4
        app = f"w{i % 3}-{kind}"
        spec: dict = {}
        if kind == 0:
            spec = {"topologySpreadConstraints": spread(wk.ZONE, app)}
        elif kind == 1:
            spec = {"topologySpreadConstraints": spread(wk.HOSTNAME, app)}
        elif kind == 2:
            spec = {"affinity": affinity("podAntiAffinity", wk.HOSTNAME, app)}
        workload += pods(1, name=f"p{i}", cpu=f"{rnd.randint(1, 15) * 100}m", labels={"app": app}, **spec)
    plan = plan_for(workload)
    assert plan.unschedulable == []
    assert sum(len(c.pods) for c in plan.node_claims) == 90
    zone_counts: Counter = Counter()
    for c in plan.node_claims:
        per_node = Counter(p.labels["app"] for p in c.pods)
        for app, n in per_node.items():
            if app.endswith(("-1", "-2")):
                assert n == 1, (app, n)
        for p in c.pods:
            if p.labels["app"].endswith("-0"):
                assert len(c.zones) == 1
                zone_counts[(p.labels["app"], c.zones[0])] += 1
    for app in ("w0-0", "w1-0", "w2-0"):
        counts = [zone_counts[(app, z)] for z in ZONES]
        assert max(counts) - min(counts) <= 1, (app, counts)


def test_hostname_self_affinity_uses_one_empty_node_not_several():
    empty = [node(f"empty-{i}", "zone-a", [], cpu=2) for i in range(3)]
    plan = plan_for(pods(3, affinity=affinity("podAffinity", wk.HOSTNAME, "web")), existing_nodes=empty)
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("empty-0", 3)]
    assert plan.node_claims == []


def test_two_zone_spreads_are_both_kept():
    existing = node("n1", "zone-a", pods(2, name="api-old", labels={"app": "api"}), cpu=1)
    # The second constraint counts the two "api" pods already in zone-a, so zone-a takes none of these.
    both = spread(wk.ZONE) + spread(wk.ZONE, app="api")
    plan = plan_for(pods(4, labels={"app": "web"}, topologySpreadConstraints=both), existing_nodes=[existing])
    # With zone-a at 0 "web" pods, the first constraint lets zone-b and zone-c take one each.
    assert per_zone(plan) == {"zone-b": 1, "zone-c": 1}
    assert len(plan.unschedulable) == 2
