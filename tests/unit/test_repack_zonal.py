"""The repack pass moves the pods of zonal spreads among the claims of their zone (#32, "Price on
workloads other than the benchmark's own"): before, a zonal spread's pods kept the claims the greedy pass
opened for them, each zone's share on the nodes it first filled; now the claims pinned to one zone are
packed again with those pods and the plain ones mixed, every zone's count unchanged."""

from __future__ import annotations

from collections import Counter

from bench.bound import host_groups_of, lp_bound, on_demand_pool, type_rows
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.model import labels as wk
from nodescale.model.pod import Pod
from nodescale.scheduling.boundgroups import zonal_groups
from nodescale.scheduling.groups import group_pods
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.topology import Topology


def deployment(name: str, replicas: int, cpu_m: int, mem_mi: int, key: str | None = None) -> list[Pod]:
    """Replicas; ``key`` adds a maxSkew 1 spread of the deployment over that topology key."""
    extra = {}
    if key is not None:
        extra = {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}}}]}
    return [
        Pod.from_dict({
            "metadata": {"name": f"{name}-{i}", "namespace": "default", "labels": {"app": name}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m",
                                                                              "memory": f"{mem_mi}Mi"}}}], **extra},
        })
        for i in range(replicas)
    ]


def test_zonal_spread_pods_are_packed_again_within_their_zone() -> None:
    """#32 (price on other workloads): two zonal spreads (3 cpu and 24 GiB, 0.75 cpu and 4.5 GiB) beside
    a plain cpu-heavy deployment on an on-demand c/m/r pool: 1.138 times the LP bound when the spreads'
    pods kept their first claims, under 1.125 now; each spread stays within maxSkew 1 over the zones."""
    pool = on_demand_pool()
    types = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0][pool.name]
    pods = deployment("z", 140, 3000, 24576, wk.ZONE) + deployment("z2", 200, 750, 4608, wk.ZONE)
    pods += deployment("p", 150, 3000, 6144)
    plan = solve(pods, [pool], {pool.name: types})
    assert not plan.unschedulable
    groups, one_per_node = host_groups_of(pods)
    assert plan.price_per_hour / lp_bound(groups, type_rows(pool, types), one_per_node) < 1.125
    for app in ("z", "z2"):
        per_zone = Counter()
        for claim in plan.node_claims:
            held = sum(p.labels["app"] == app for p in claim.pods)
            if held:
                assert len(claim.zones) == 1
                per_zone[claim.zones[0]] += held
        assert max(per_zone.values()) - min(per_zone.values()) <= 1


def test_only_groups_bound_on_the_zone_alone_are_zonal() -> None:
    """#32: a zonal spread's group moves within its zone; a group a hostname spread also selects, or one
    spread over hostnames, does not; a plain group is not topology-bound at all."""
    zonal = deployment("z", 2, 100, 128, wk.ZONE)
    host = deployment("h", 2, 100, 128, wk.HOSTNAME)
    both = deployment("b", 2, 100, 128, wk.ZONE)
    both += [Pod.from_dict({
        "metadata": {"name": "b-watcher", "namespace": "default", "labels": {"app": "w"}},
        "spec": {"containers": [{"name": "c"}], "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": wk.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "b"}}}]},
    })]
    groups = group_pods(zonal + host + both + deployment("plain", 2, 100, 128))
    topology = Topology(groups, {})
    found = zonal_groups(groups, topology.matcher)
    names = {g.id: g.sample.labels["app"] for g in groups}
    assert {names[g] for g in found} == {"z"}
