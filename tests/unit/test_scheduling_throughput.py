"""#32 Throughput: the work a solve does grows with its pods, not with pods times claims."""

from __future__ import annotations

import random

import pytest

from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.catalog_kwok import benchmark_types
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirements
from nodescale.scheduling.instance_selection import InstanceSelector
from nodescale.scheduling.plan import UnschedulableKind
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.templates import Fit, build_template, fit_level
from nodescale.scheduling.topology import HostRules

GIB = 2**30
ZONES = ("zone-a", "zone-b", "zone-c")
POOL = NodePool("default", Requirements(), "default")


def itype(name: str, cpu: int, price: float) -> InstanceType:
    offerings = tuple(Offering(z, ct, price * (0.4 if ct == wk.CAPACITY_SPOT else 1))
                      for z in ZONES for ct in (wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT))
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: "amd64", wk.OS: "linux"}
    return InstanceType(name, labels, {"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110}, {}, offerings)


TYPES = [itype(f"t{cpu}", cpu, 0.05 * cpu) for cpu in (1, 2, 4, 8, 16, 32)]


def pod(i: int, app: str, spec: dict) -> Pod:
    # Each pod requests a little more cpu than the one before: a run of one pod each, as in Karpenter's mix.
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{100 + i}m", "memory": "128Mi"}}}],
            **spec}
    return Pod.from_dict({"metadata": {"name": f"{app}-{i}", "namespace": "default", "labels": {"app": app}},
                          "spec": body})


def anti_affinity(app: str) -> dict:
    term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def host_spread(app: str) -> dict:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": wk.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": app}}}]}


@pytest.mark.parametrize("constraint", [anti_affinity, host_spread], ids=["anti-affinity", "hostname-spread"])
def test_a_claim_full_of_a_groups_pods_is_not_scanned_again_for_each_pod(monkeypatch: pytest.MonkeyPatch,
                                                                         constraint) -> None:
    """#32 Throughput ("something scans all open claims per pod"): pods one to a node by hostname rules
    each open a claim; every later pod of the group used to ask every one of those claims again (about
    n*n/2 hostname checks for n pods). A claim those rules rule out is ruled out for good, so the checks
    grow with the pods."""
    calls = 0
    cap = HostRules.cap

    def counted(self: HostRules, counts: dict[int, int]) -> int:
        nonlocal calls
        calls += 1
        return cap(self, counts)

    monkeypatch.setattr(HostRules, "cap", counted)
    n = 150
    plan = solve([pod(i, "web", constraint("web")) for i in range(n)], [POOL], {POOL.name: TYPES})
    assert not plan.unschedulable
    assert len(plan.node_claims) == n
    assert all(len(claim.pods) == 1 for claim in plan.node_claims)
    assert calls < 4 * n  # 11,475 before for 150 pods (about n * n / 2)


def test_claims_pinned_alike_each_get_their_own_labels() -> None:
    """#32 Throughput: claims sharing requirements, pool and domains are pinned once for them all; each
    still carries its own labels (a later step that labels one claim, e.g. with a reservation, must not
    label the others) and the same pinned requirements."""
    spec = anti_affinity("web")
    plan = solve([pod(i, "web", spec) for i in range(6)], [POOL], {POOL.name: TYPES})
    first, *others = plan.node_claims
    assert others and all(c.labels == first.labels and c.requirements == first.requirements for c in others)
    first.labels["example.com/only-the-first"] = "yes"
    assert all("example.com/only-the-first" not in c.labels for c in others)


def test_growing_a_claim_for_less_than_any_new_node_does_not_price_new_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    """#32 Throughput: a pod joining an open claim whose next type costs less per pod than any new node
    could (the pod's cpu or memory at the cheapest rate of any type) needs no new claim priced; before,
    nearly every pod of a growing claim asked the selector (57 asks for these 60 pods, now one per claim)."""
    asks = 0
    price_per_pod = InstanceSelector.price_per_pod

    def counted(self: InstanceSelector, *args: object) -> float:
        nonlocal asks
        asks += 1
        return price_per_pod(self, *args)

    monkeypatch.setattr(InstanceSelector, "price_per_pod", counted)
    types = [itype(f"t{cpu}", cpu, 0.05 * cpu) for cpu in range(1, 41)]  # one vCPU apart: cheap steps up
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "3Gi"}}}]}
    workload = []
    for i in range(60):
        body["containers"][0]["resources"]["requests"]["cpu"] = f"{1500 - 10 * i}m"  # a run of one pod each
        workload.append(Pod.from_dict({"metadata": {"name": f"w-{i}", "namespace": "default"}, "spec": body}))
    plan = solve(workload, [POOL], {POOL.name: types})
    assert not plan.unschedulable
    assert sum(len(claim.pods) for claim in plan.node_claims) == 60
    assert asks <= len(plan.node_claims) < 60


def test_replicas_sharing_a_manifest_are_each_refused_or_placed_by_their_manifests_resource_claims() -> None:
    """#32 Throughput: whether a pod has DRA claims is read once per manifest its replicas share; every
    replica of the claiming template is still refused as DRA, every replica of the other placed."""
    def replicas(name: str, spec: dict, n: int) -> list[Pod]:
        template = pod(0, name, spec)
        return [Pod(**{**{f: getattr(template, f) for f in template.__dataclass_fields__}, "name": f"{name}-{i}"})
                for i in range(n)]

    claiming = replicas("dra", {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}, 4)
    plain = replicas("plain", {}, 3)
    plan = solve(claiming[:2] + plain + claiming[2:], [POOL], {POOL.name: TYPES})
    assert sorted(p.name for c in plan.node_claims for p in c.pods) == ["plain-0", "plain-1", "plain-2"]
    assert sorted(u.pod.name for u in plan.unschedulable) == ["dra-0", "dra-1", "dra-2", "dra-3"]
    assert all(u.kind == UnschedulableKind.DRA for u in plan.unschedulable)


@pytest.mark.parametrize("catalog", ["us-east-1", "benchmark"])
def test_a_run_of_many_pods_picks_the_type_scoring_every_type_would(catalog: str) -> None:
    """#32 Throughput: for a run of many pods only the cheapest type for each number of pods a node
    holds is scored (a dearer one holding as many never scores better); the pick is the one scoring
    every type gives. The full scan is what a pool with limits (here limits nothing reaches) still does."""
    types = bundled_catalog("us-east-1") if catalog == "us-east-1" else benchmark_types(400)
    dims = (res.CPU, res.MEMORY, res.PODS)
    template = build_template(0, POOL, types, dims, [], {}, frozenset(), {})
    fit = fit_level(template, Requirements(), ())
    assert isinstance(fit, Fit)
    rnd = random.Random(5)
    for _ in range(60):
        req = (rnd.choice((100, 250, 500, 1000, 2000, 4000, 7000)), rnd.choice((128, 512, 2048, 8192, 30000)) * 2**20, 1)
        want = rnd.choice((2, 3, 7, 40, 333, 1000))
        for zones in (None, frozenset([min(fit.zones)])):
            selector = InstanceSelector(dims, [template])
            candidates = selector.candidates(fit, zones, None)
            template.remaining = None
            distinct = selector._pick_type(fit, candidates, req, want, False)
            template.remaining = [2**62] * len(template.limit_keys)  # limits that limit nothing: every type scored
            every = selector._pick_type(fit, candidates, req, want, False)
            template.remaining = None
            assert distinct == every
