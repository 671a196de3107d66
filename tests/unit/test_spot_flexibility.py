"""Spot flexibility on the bundled us-east-1 catalog: a claim of a spot-allowed pool keeps at least 15
instance types (Karpenter's MinInstanceTypesForSpotToSpotConsolidation, which spot-to-spot consolidation
needs: pkg/controllers/disruption/consolidation.go, and the consolidation_test.go spec "cannot replace
spot with spot if less than minimum InstanceTypes flexibility"), at most 60 (Karpenter's
MaxInstanceTypes), the cheapest that hold its pods, and its price is the cheapest of them, what EC2's
``lowest-price`` would pay. The repack pass keeps that too (it only packs spot claims into patterns that
at least 15 types hold).
"""

from __future__ import annotations

from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.model import labels as wk
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.plan import MAX_INSTANCE_TYPES
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.templates import holds, type_satisfies

SPOT_TO_SPOT_MINIMUM = 15


def pool(capacity_types: list[str]) -> NodePool:
    return NodePool(name="default", node_class="default", requirements=Requirements([
        Requirement.create(wk.CAPACITY_TYPE, "In", capacity_types),
        Requirement.create(wk.INSTANCE_CATEGORY, "In", ["c", "m", "r"]),
        Requirement.create(wk.INSTANCE_GENERATION, "Gt", ["2"]),
        Requirement.create(wk.OS, "In", ["linux"]),
    ]))


SHAPES = [(250, 256), (500, 4096), (1000, 1024), (2000, 16384), (100, 128), (750, 6144), (4000, 32768), (1500, 1536)]


def deployments(replicas: int = 40) -> list[Pod]:
    """Mixed cpu- and memory-heavy deployments (the repack pass has claims to mix); every other one spreads
    over zones (its claims are packed by the greedy pass alone)."""
    pods = []
    for d, (cpu, mem) in enumerate(SHAPES):
        spread = [{"maxSkew": 1, "topologyKey": wk.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": f"d{d}"}}}] if d % 2 else []
        for r in range(replicas):
            pods.append(Pod.from_dict({
                "metadata": {"name": f"d{d}-{r}", "namespace": "default", "labels": {"app": f"d{d}"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}],
                         "topologySpreadConstraints": spread},
            }))
    return pods


def test_a_spot_claim_keeps_at_least_fifteen_types_and_costs_the_cheapest_offering() -> None:
    p = pool(["spot", "on-demand"])
    types = pool_types([p], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0][p.name]
    by_name = {t.name: t for t in types}
    plan = solve(deployments(150), [p], {p.name: types})
    assert not plan.unschedulable and len(plan.node_claims) > 1
    for claim in plan.node_claims:
        assert SPOT_TO_SPOT_MINIMUM <= len(claim.instance_types) <= MAX_INSTANCE_TYPES, claim.instance_types
        assert "spot" in claim.capacity_types
        # Its price is the cheapest offering among its types, zones and capacity types (lowest-price's pick).
        offers = [o.price for name in claim.instance_types for o in by_name[name].offerings
                  if o.available and o.zone in claim.zones and o.capacity_type in claim.capacity_types]
        assert abs(claim.price - min(offers)) < 1e-9
        # Cheapest first, and no type that holds the claim's pods and costs less than its dearest option is left out.
        prices = [min(o.price for o in by_name[n].offerings if o.available and o.zone in claim.zones
                      and o.capacity_type in claim.capacity_types) for n in claim.instance_types]
        assert prices == sorted(prices)
        needed = [sum(pod.requests.get(k, 0) for pod in claim.pods) for k in ("cpu", "memory")]
        for t in types:
            if t.name in claim.instance_types or not type_satisfies(t.labels, t.operating_systems, p.requirements):
                continue
            offered = [o.price for o in t.offerings if o.available and o.zone in claim.zones
                       and o.capacity_type in claim.capacity_types]
            fits = holds((t.allocatable.get("cpu", 0), t.allocatable.get("memory", 0)), needed)
            if fits and offered and len(claim.instance_types) < MAX_INSTANCE_TYPES:
                assert min(offered) >= prices[-1] - 1e-9, (t.name, claim.instance_types)


def test_an_on_demand_claim_is_not_held_to_the_spot_minimum_but_costs_the_cheapest_type() -> None:
    p = pool(["on-demand"])
    types = pool_types([p], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0][p.name]
    plan = solve(deployments(), [p], {p.name: types})
    by_name = {t.name: t for t in types}
    for claim in plan.node_claims:
        assert claim.capacity_types == ["on-demand"]
        cheapest = by_name[claim.instance_types[0]].cheapest(p.requirements)
        assert cheapest is not None and abs(claim.price - cheapest.price) < 1e-9
