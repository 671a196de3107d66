"""The repack pass also packs again the spot claims that hold topology-bound pods (#32, "Price on
workloads other than the benchmark's own"): before, such a spot seed kept every pod the greedy pass put on
it, so a hostname-spread pod that joined a large memory-heavy node kept that node's plain pods out of the
pass; now the seed keeps only its bound pods, stays spot-flexible, and the plain pods are mixed again."""

from __future__ import annotations

from bench.bound import cmr_pool, host_groups_of, lp_bound, type_rows
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.model.pod import Pod
from nodescale.scheduling.plan import SPOT_FLEXIBILITY
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.templates import holds
from tests.unit.test_scheduling_repack_mix import deployment


def test_spot_claims_holding_a_hostname_spread_pod_are_packed_again_and_stay_flexible() -> None:
    """#32 (price on other workloads): 40 pods of 8 cpu and 128 GiB beside 60 of 4 cpu and 4 GiB, with a
    hostname spread of 8 small pods, on a spot c/m/r pool. The spread's pods join the first-fit claims of
    the large pods, and the old pass left each of those claims as it was: 1.28 times the LP bound. Now
    they are packed again, within 1.2 of the bound, and every claim still has at least 15 types that
    hold its pods."""
    pool = cmr_pool("spot", "spot")
    types = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0][pool.name]
    specs = [("big", 40, 8000, 131072), ("cpu", 60, 4000, 4096), ("spread", 8, 250, 768, "hostname-spread")]
    pods: list[Pod] = [p for spec in specs for p in deployment(*spec)]
    plan = solve(pods, [pool], {pool.name: types})
    assert not plan.unschedulable
    groups, one_per_node = host_groups_of(pods)
    assert plan.price_per_hour / lp_bound(groups, type_rows(pool, types), one_per_node) <= 1.2
    by_name = {t.name: t for t in types}
    for claim in plan.node_claims:
        assert len(claim.instance_types) >= SPOT_FLEXIBILITY
        spread = [p for p in claim.pods if p.labels["app"] == "spread"]
        assert len(spread) <= 1  # maxSkew 1 over hostnames, and 8 claims or more
        for name in claim.instance_types[:SPOT_FLEXIBILITY]:
            alloc = by_name[name].allocatable
            used = [sum(p.requests.get(k, 0) for p in claim.pods) for k in ("cpu", "memory")]
            assert holds((alloc["cpu"], alloc["memory"]), used)


def test_spot_seeds_are_left_as_they_are_when_no_free_pod_shares_its_shape(monkeypatch) -> None:
    """#32 (keep the solve fast): in Karpenter's benchmark mix every pod has requests of its own, so a
    pattern never repeats and packing the free pods again around each spot seed cost seconds (the 1,000-pod
    mix went from 0.07 s to 3 s) for under 1%. The same spread, with its 100 plain pods each of a different
    size, leaves the spot seeds as the greedy pass made them; with the pods sharing sizes (the test above)
    they are packed again."""
    from nodescale.scheduling import repack

    reseeded = []
    real = repack._reseed
    monkeypatch.setattr(repack, "_reseed", lambda *a, **k: reseeded.append(a[0]) or real(*a, **k))
    pool = cmr_pool("spot", "spot")
    types = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0][pool.name]
    spread = deployment("spread", 8, 250, 768, "hostname-spread")
    distinct = [p for i in range(100) for p in deployment(f"one-{i}", 1, 1000 + 37 * i, 2048 + 101 * i)]
    plan = solve(spread + distinct, [pool], {pool.name: types})
    assert not plan.unschedulable
    assert not [s for s in reseeded if s.floor > 1]
    repeating = [p for spec in (("big", 40, 8000, 131072), ("cpu", 60, 4000, 4096)) for p in deployment(*spec)]
    solve(spread + repeating, [pool], {pool.name: types})
    assert [s for s in reseeded if s.floor > 1]
