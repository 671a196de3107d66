"""The bin-packer, one constraint kind at a time: resources, selectors, affinity, taints, pools, nodes."""

from __future__ import annotations

import pytest

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType
from nodescale.model.requirements import Requirement
from nodescale.model.taints import Taint
from nodescale.scheduling.groups import group_pods, relaxation_levels
from nodescale.scheduling.plan import ExistingNode, Plan
from nodescale.scheduling.scheduler import solve
from tests.builders import (
    C_SMALL,
    GIB,
    LARGE,
    MEDIUM,
    SMALL,
    TYPES,
    ZONES,
    itype,
    plan_for,
    pods,
)
from tests.builders import daemon as _daemon
from tests.builders import existing_node as _node
from tests.builders import scheduling_pool as pool


def by_type() -> dict[str, InstanceType]:
    return {t.name: t for t in [*TYPES, C_SMALL]}


def assert_claims_hold_their_pods(plan: Plan) -> None:
    """Every option of every claim has room for all the claim's pods plus its daemon overhead."""
    types = by_type()
    for claim in plan.node_claims:
        for name in claim.instance_types:
            alloc = types[name].allocatable
            for resource, amount in claim.requests.items():
                assert amount <= alloc.get(resource, 0), (name, resource, claim.requests)


# -- resources -----------------------------------------------------------------------------------------------


def test_identical_pods_go_on_the_type_with_the_lowest_price_per_pod():
    # large holds 5 pods of 1.5 CPU at 0.08 each; small and medium cost 0.10 per pod. The sixth pod alone
    # goes on the cheapest type that holds it.
    plan = plan_for(pods(6, cpu="1500m"), types=[SMALL, MEDIUM, LARGE])
    assert [len(c.pods) for c in plan.node_claims] == [5, 1]
    assert plan.node_claims[0].instance_types == ["large"]
    assert plan.node_claims[1].instance_types[0] == "small"
    assert plan.price_per_hour == pytest.approx(0.50)
    assert_claims_hold_their_pods(plan)


def test_a_group_takes_one_node_rather_than_several_for_the_same_price():
    # Prices proportional to size: 5 pods of 1.2 CPU cost the same on one large as on two mediums (3 + 2),
    # and one node is what a person expects (Karpenter too): fewer nodes, less daemon overhead.
    plan = plan_for(pods(5, cpu="1200m"), types=[SMALL, MEDIUM, LARGE])
    assert [len(c.pods) for c in plan.node_claims] == [5]
    assert plan.node_claims[0].instance_types == ["large"]
    assert plan.price_per_hour == pytest.approx(0.40)


def test_claim_options_are_every_type_that_fits_cheapest_first():
    plan = plan_for(pods(1, cpu="500m"), types=[LARGE, MEDIUM, SMALL])
    assert plan.node_claims[0].instance_types == ["small", "medium", "large"]
    assert plan.node_claims[0].price == pytest.approx(0.10)


def test_a_pod_larger_than_every_type_is_unschedulable_with_the_resource_named():
    plan = plan_for(pods(1, cpu="64"))
    assert plan.node_claims == []
    assert plan.unschedulable[0].reason == "incompatible with nodepool default: no instance type has room for cpu=64, memory=1Gi"


def test_gpu_requests_go_to_gpu_types_only():
    plan = plan_for(pods(2, limits={"nvidia.com/gpu": 1}) + pods(3, name="web"))
    gpu_claims = [c for c in plan.node_claims if any(p.name.startswith("app") for p in c.pods)]
    assert len(gpu_claims) == 2  # one GPU per type
    assert all(c.instance_types == ["gpu"] for c in gpu_claims)
    web = [c for c in plan.node_claims if c not in gpu_claims]
    assert all("gpu" not in c.instance_types[:1] for c in web)
    assert_claims_hold_their_pods(plan)


def test_pod_count_capacity_limits_pods_per_node():
    tiny = itype("few-pods", 64, 256, 0.5, pods=3)
    plan = plan_for(pods(7, cpu="100m", memory="10Mi"), types=[tiny])
    assert sorted(len(c.pods) for c in plan.node_claims) == [1, 3, 3]


def test_init_containers_and_overhead_count_in_requests():
    spec = {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "500m"}}
    plan = plan_for(pods(1, cpu="1", **spec), types=[SMALL, MEDIUM])
    # peak of init (3) and containers (1), plus 0.5 overhead: 3.5 CPU needs medium.
    assert plan.node_claims[0].instance_types == ["medium"]


# -- node selection ------------------------------------------------------------------------------------------


def test_node_selector_restricts_the_types():
    plan = plan_for(pods(2, nodeSelector={wk.ARCH: "arm64"}))
    assert [c.instance_types for c in plan.node_claims] == [["arm-medium"]]
    assert plan.node_claims[0].labels[wk.ARCH] == "arm64"


def test_deprecated_label_aliases_mean_the_ga_key():
    plan = plan_for(pods(1, nodeSelector={"beta.kubernetes.io/arch": "arm64"}))
    assert plan.node_claims[0].instance_types == ["arm-medium"]


def test_required_node_affinity_terms_are_ored():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["zone-nowhere"]}]},
        {"matchExpressions": [{"key": wk.ARCH, "operator": "In", "values": ["arm64"]}]},
    ]}}}
    plan = plan_for(pods(1, affinity=affinity))
    assert plan.unschedulable == []
    assert plan.node_claims[0].instance_types == ["arm-medium"]


def _preferred(*terms: tuple[int, str, str, list[str]]) -> dict:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": op, "values": v}]}}
        for w, k, op, v in terms
    ]}}


def test_preferred_node_affinity_is_honoured_when_it_can_be():
    plan = plan_for(pods(2, affinity=_preferred((10, wk.ZONE, "In", ["zone-b"]))))
    assert [c.zones for c in plan.node_claims] == [["zone-b"]]


def test_preferred_node_affinity_is_dropped_when_it_cannot_be_met():
    plan = plan_for(pods(2, affinity=_preferred((10, wk.ZONE, "In", ["zone-x"]))))
    assert plan.unschedulable == []
    assert plan.node_claims[0].zones == list(ZONES)


def test_conflicting_preferences_drop_the_lowest_weight_first():
    affinity = _preferred((50, wk.ZONE, "In", ["zone-b"]), (1, wk.ZONE, "In", ["zone-a"]))
    plan = plan_for(pods(1, affinity=affinity))
    assert plan.node_claims[0].zones == ["zone-b"]


def test_capacity_type_selector_uses_spot_prices():
    spot_pool = pool("default", Requirement.create(wk.CAPACITY_TYPE, "In", ["spot", "on-demand"]))
    plan = plan_for(pods(1, nodeSelector={wk.CAPACITY_TYPE: "spot"}), [spot_pool], [SMALL])
    claim = plan.node_claims[0]
    assert claim.capacity_types == ["spot"]
    assert claim.price == pytest.approx(0.03)


def test_unavailable_offerings_are_not_used():
    unavailable = {("small", z, wk.CAPACITY_ON_DEMAND) for z in ZONES}
    plan = plan_for(pods(1, cpu="500m"), types=[SMALL, MEDIUM], unavailable=unavailable)
    assert plan.node_claims[0].instance_types == ["medium"]


def test_zones_and_capacity_types_are_only_those_offered():
    one_zone = itype("one-zone", 2, 4, 0.05, zones=("zone-c",))
    plan = plan_for(pods(1, cpu="500m"), types=[one_zone])
    assert plan.node_claims[0].zones == ["zone-c"]
    assert plan.node_claims[0].labels[wk.ZONE] == "zone-c"


# -- taints --------------------------------------------------------------------------------------------------

SPECIAL = Taint("example.com/special", "NoSchedule", "yes")


def test_a_pool_taint_keeps_pods_without_toleration_away_and_says_so():
    plan = plan_for(pods(1), [pool("banana", taints=(SPECIAL,))])
    assert plan.node_claims == []
    assert plan.unschedulable[0].reason == "incompatible with nodepool banana: did not tolerate example.com/special=yes:NoSchedule"


def test_a_tolerating_pod_uses_the_tainted_pool():
    tol = [{"key": "example.com/special", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    plan = plan_for(pods(1, tolerations=tol), [pool("banana", taints=(SPECIAL,))])
    assert plan.node_claims[0].taints == (SPECIAL,)


def test_startup_taints_do_not_block_scheduling():
    plan = plan_for(pods(1), [pool("init", startup=(SPECIAL,))])
    assert plan.unschedulable == []
    assert plan.node_claims[0].startup_taints == (SPECIAL,)


def test_one_clause_per_pool_in_the_reason():
    pools = [pool("banana", taints=(SPECIAL,)), pool("arm", Requirement.create(wk.ARCH, "In", ["arm64"]))]
    plan = plan_for(pods(1, nodeSelector={wk.ARCH: "amd64"}), pools)
    assert plan.unschedulable[0].reason == (
        "incompatible with nodepool arm: kubernetes.io/arch In [amd64] conflicts with kubernetes.io/arch In [arm64]; "
        "incompatible with nodepool banana: did not tolerate example.com/special=yes:NoSchedule"
    )


# -- pools: weight, limits, minValues, labels ----------------------------------------------------------------


def test_the_higher_weight_pool_wins_even_when_dearer():
    cheap = pool("cheap", Requirement.create(wk.CAPACITY_TYPE, "In", ["spot"]))
    pricey = pool("pricey", weight=10)
    plan = plan_for(pods(3), [cheap, pricey])
    assert {c.nodepool for c in plan.node_claims} == {"pricey"}


def test_limits_count_the_largest_option_of_each_claim_and_hold():
    limited = pool("capped", limits={"cpu": 10_000})
    plan = plan_for(pods(30), [limited], [SMALL, MEDIUM, LARGE])
    types = by_type()
    reserved = sum(max(types[t].capacity["cpu"] for t in c.instance_types) for c in plan.node_claims)
    assert reserved <= 10_000
    assert plan.unschedulable
    assert all("limits" in u.reason for u in plan.unschedulable)
    # A claim reserves no more than the type chosen for it: the whole 10 CPU goes to pods.
    assert sum(len(c.pods) for c in plan.node_claims) == 10


def test_existing_nodes_count_against_limits():
    node = ExistingNode("old-1", {wk.NODEPOOL: "capped", wk.ZONE: "zone-a"}, {"cpu": 8000, "memory": 16 * GIB,
                        "pods": 110}, pods=pods(8, name="busy", cpu="1"))
    limited = pool("capped", limits={"cpu": 10_000})
    plan = plan_for(pods(4), [limited], [SMALL, MEDIUM, LARGE], existing_nodes=[node])
    # 8 of the 10 CPU are in use: one small node (2 CPU) for 2 pods, the rest cannot be launched.
    assert [c.instance_types for c in plan.node_claims] == [["small"]]
    assert len(plan.unschedulable) == 2


def test_min_values_keep_enough_distinct_families():
    req = Requirement.create(wk.INSTANCE_FAMILY, "In", ["m", "c"], min_values=2)
    plan = plan_for(pods(1, cpu="500m", memory="512Mi"), [pool("mv", req)], [SMALL, C_SMALL, MEDIUM])
    families = {by_type()[t].labels[wk.INSTANCE_FAMILY] for t in plan.node_claims[0].instance_types}
    assert families == {"m", "c"}


def test_min_values_that_cannot_be_met_leave_pods_unschedulable():
    req = Requirement.create(wk.INSTANCE_FAMILY, "In", ["m", "c"], min_values=2)
    # Only "m" types hold 3 CPU, so the claim cannot keep two families.
    plan = plan_for(pods(1, cpu="3"), [pool("mv", req)], [SMALL, C_SMALL, MEDIUM])
    assert plan.node_claims == []
    assert "minValues" in plan.unschedulable[0].reason


def test_pool_labels_are_node_labels_pods_can_select():
    team = pool("team", labels={"billing-team": "my-team"})
    plain = pool("plain", weight=5)
    plan = plan_for(pods(2, nodeSelector={"billing-team": "my-team"}), [team, plain])
    assert {c.nodepool for c in plan.node_claims} == {"team"}
    assert plan.node_claims[0].labels["billing-team"] == "my-team"


def test_windows_build_from_the_node_class_selects_the_pool():
    win_types = [itype("win", 4, 8, 0.3, oses=frozenset({"linux", "windows"}))]
    pools = [pool("w2019"), pool("w2022")]
    labels = {"w2019": {wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.17763"},
              "w2022": {wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.20348"}}
    workload = pods(2, name="new", nodeSelector={wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.20348"}) + pods(
        2, name="old", nodeSelector={wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.17763"})
    plan = solve(workload, pools, {p.name: win_types for p in pools}, node_labels_by_pool=labels)
    assert plan.unschedulable == []
    for claim in plan.node_claims:
        prefix = "new" if claim.nodepool == "w2022" else "old"
        assert all(p.name.startswith(prefix) for p in claim.pods)


def test_linux_pods_stay_off_windows_pools():
    win_types = [itype("win", 4, 8, 0.3, oses=frozenset({"linux", "windows"}))]
    labels = {"w": {wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.20348"}}
    plan = solve(pods(1, nodeSelector={wk.OS: "linux"}), [pool("w")], {"w": win_types}, node_labels_by_pool=labels)
    assert plan.node_claims == []


# -- daemon overhead -----------------------------------------------------------------------------------------


def test_daemonset_overhead_is_reserved_on_each_new_node():
    plan = plan_for(pods(1, cpu="1500m", memory="1Gi"), types=[SMALL, MEDIUM], daemonset_pods=[_daemon("1")])
    # 1.5 + 1 CPU of daemon does not fit small (2 CPU).
    assert plan.node_claims[0].instance_types == ["medium"]
    assert plan.node_claims[0].requests["cpu"] == 2500
    assert_claims_hold_their_pods(plan)


def test_daemons_that_would_not_run_on_the_pool_add_nothing():
    tol = [{"key": "example.com/special", "operator": "Exists"}]
    tainted = pool("tainted", taints=(SPECIAL,))
    arm_only = _daemon("1", nodeSelector={wk.ARCH: "arm64"})
    plan = plan_for(pods(1, cpu="1500m", tolerations=tol), [tainted], [SMALL, MEDIUM],
                    daemonset_pods=[_daemon("1"), arm_only])
    assert plan.node_claims[0].instance_types[0] == "small"


# -- existing nodes ------------------------------------------------------------------------------------------


def test_existing_nodes_with_room_are_filled_before_launching():
    node = _node("n1", cpu=4, pods=pods(1, name="old", cpu="1"))
    plan = plan_for(pods(4), existing_nodes=[node])
    assert [(e.node, len(e.pods)) for e in plan.existing] == [("n1", 3)]
    assert len(plan.node_claims) == 1 and len(plan.node_claims[0].pods) == 1


def test_in_flight_capacity_is_used_and_flagged():
    plan = plan_for(pods(2), existing_nodes=[_node("claim-1", in_flight=True)])
    assert plan.node_claims == []
    assert plan.existing[0].in_flight is True


def test_cordoned_and_tainted_nodes_take_no_new_pods():
    cordoned = _node("cordoned", unschedulable=True)
    tainted = _node("tainted", taints=(Taint("karpenter.sh/disrupted", "NoSchedule"),))
    plan = plan_for(pods(2), existing_nodes=[cordoned, tainted])
    assert plan.existing == []
    assert sum(len(c.pods) for c in plan.node_claims) == 2


def test_node_labels_must_satisfy_the_pod():
    plan = plan_for(pods(1, nodeSelector={wk.ARCH: "arm64"}), existing_nodes=[_node("amd")])
    assert plan.existing == []


# -- grouping and narrowing ----------------------------------------------------------------------------------


def test_replicas_form_one_group_and_distinct_specs_do_not():
    groups = group_pods(pods(100) + pods(3, name="other"))
    assert sorted(len(g.pods) for g in groups) == [3, 100]


def test_a_claim_shared_by_two_groups_keeps_only_types_that_hold_both():
    plan = plan_for(pods(3, cpu="2") + pods(2, name="small", cpu="500m", memory="256Mi"), types=[SMALL, MEDIUM, LARGE])
    assert_claims_hold_their_pods(plan)
    assert sum(len(c.pods) for c in plan.node_claims) == 5
    assert plan.price_per_hour == pytest.approx(0.40)


def test_relaxation_order_follows_karpenter():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["zone-a"]}]},
                {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["zone-b"]}]},
            ]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
            ],
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"a": "b"}}}}
        ]},
    }
    spread = [{"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": "app"}}}]
    levels = relaxation_levels(pods(1, affinity=affinity, topologySpreadConstraints=spread)[0])
    assert [lv.relaxed for lv in levels] == [
        "", "required node affinity term 1", "preferred pod anti-affinity", "preferred node affinity",
        "ScheduleAnyway topology spread",
    ]
    assert levels[0].requirements[wk.ZONE].values == {"zone-a"}
    assert levels[1].requirements[wk.ZONE].values == {"zone-b"}
    assert len(levels[0].spreads) == 1 and levels[-1].spreads == ()
