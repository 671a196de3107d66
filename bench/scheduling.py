"""Scheduling throughput and plan price.

1. Karpenter's benchmark mix: 400 synthetic types (type i has i+1 vCPU and 2(i+1) GiB), pods split
   evenly between plain, zonal spread, hostname spread, zonal self-affinity and hostname anti-affinity,
   cpu 100m-1500m and memory 100Mi-4Gi at random; 100, 1,000 and 5,000 pods.
2. 50,000 pods from 50 deployments (one in five spread over zones) on the real us-east-1 catalog, with
   one NodePool like Karpenter's default example: c/m/r, generation > 2, amd64 or arm64, spot or on-demand.

Throughput counts only the solve (pods are built beforehand, as the provisioner has them listed), best
of three runs.
The price is compared with the fractional lower bound: the cheapest fractional cover of the total CPU
and memory requests by any one allowed instance type.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator, Sequence

from bench import print_lines
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.catalog_kwok import benchmark_types
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.plan import Plan
from nodescale.scheduling.scheduler import solve
from nodescale.scheduling.templates import type_satisfies

ZONE_SPREAD = "zonal-spread"
HOST_SPREAD = "hostname-spread"
ZONE_AFFINITY = "zonal-affinity"
HOST_ANTI = "hostname-anti-affinity"
KINDS = ("plain", ZONE_SPREAD, HOST_SPREAD, ZONE_AFFINITY, HOST_ANTI)
LABEL_VALUES = 10  # pods of one kind are spread over this many label values (selectors match one value)


def _pod(name: str, cpu_m: int, mem_mi: int, labels: dict[str, str], extra: dict) -> Pod:
    spec = {"containers": [{"name": "app", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}}}]}
    spec.update(extra)
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec})


def _constraint(kind: str, labels: dict[str, str]) -> dict:
    selector = {"matchLabels": labels}
    if kind in (ZONE_SPREAD, HOST_SPREAD):
        key = wk.ZONE if kind == ZONE_SPREAD else wk.HOSTNAME
        return {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
        ]}
    if kind == ZONE_AFFINITY:
        term = {"topologyKey": wk.ZONE, "labelSelector": selector}
        return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    if kind == HOST_ANTI:
        term = {"topologyKey": wk.HOSTNAME, "labelSelector": selector}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    return {}


def karpenter_mix(count: int, seed: int = 7) -> list[Pod]:
    rnd = random.Random(seed)
    pods = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        labels = {"kind": kind, "value": f"v{rnd.randrange(LABEL_VALUES)}"}
        pods.append(_pod(f"{kind}-{i}", rnd.randint(100, 1500), rnd.randint(100, 4096), labels, _constraint(kind, labels)))
    return pods


def fifty_deployments(total: int = 50_000, seed: int = 11) -> list[Pod]:
    """50 deployments of equal size; one in five spreads over zones, the rest are plain."""
    rnd = random.Random(seed)
    per = total // 50
    pods: list[Pod] = []
    for d in range(50):
        cpu = rnd.choice((100, 250, 500, 750, 1000, 1500, 2000, 4000))
        mem = int(cpu * rnd.choice((1, 2, 4, 8)) * 1.024)  # 1, 2, 4 or 8 GiB per vCPU, in MiB
        labels = {"app": f"deploy-{d}"}
        extra = _constraint(ZONE_SPREAD, labels) if d % 5 == 0 else {}
        template = _pod(f"deploy-{d}", cpu, mem, labels, extra)
        for r in range(per):
            # Replicas share their template's parsed spec, as workloads.expand builds them.
            pod = Pod(**{f: getattr(template, f) for f in template.__dataclass_fields__})
            pod.name = f"deploy-{d}-{r}"
            pods.append(pod)
    return pods


def general_pool() -> NodePool:
    reqs = Requirements([
        Requirement.create(wk.ARCH, "In", ["amd64", "arm64"]),
        Requirement.create(wk.CAPACITY_TYPE, "In", ["spot", "on-demand"]),
        Requirement.create(wk.INSTANCE_CATEGORY, "In", ["c", "m", "r"]),
        Requirement.create(wk.INSTANCE_GENERATION, "Gt", ["2"]),
        Requirement.create(wk.OS, "In", ["linux"]),
    ])
    return NodePool(name="default", requirements=reqs, node_class="default")


def lower_bound(pods: Sequence[Pod], types: Sequence[InstanceType], pool: NodePool) -> float:
    cpu = sum(p.requests.get(res.CPU, 0) for p in pods)
    mem = sum(p.requests.get(res.MEMORY, 0) for p in pods)
    best = float("inf")
    for it in types:
        if not type_satisfies(it.labels, it.operating_systems, pool.requirements):
            continue
        offer = it.cheapest(pool.requirements)
        alloc = it.allocatable
        if offer is None or not alloc.get(res.CPU) or not alloc.get(res.MEMORY):
            continue
        best = min(best, max(cpu / alloc[res.CPU], mem / alloc[res.MEMORY]) * offer.price)
    return best


REPEATS = 3
THROUGHPUT_TARGET = 20_000  # pods/s for 50,000 pods (issue #16)
MIX_TARGET = 15_000  # pods/s for the benchmark mix at 5,000 pods, spot and on-demand flexibility kept (issue #32)


def _timed(pods: list[Pod], pool: NodePool, types: list[InstanceType]) -> tuple[Plan, float]:
    """The best of a few runs: other processes on a shared machine only ever make a run slower."""
    best = None
    for _ in range(REPEATS):
        started = time.perf_counter()
        plan = solve(pods, [pool], {pool.name: types})
        seconds = time.perf_counter() - started
        if best is None or seconds < best[1]:
            best = (plan, seconds)
    return best


def _line(name: str, pods: list[Pod], plan: Plan, seconds: float, bound: float) -> str:
    placed = plan.pods - len(plan.unschedulable)
    return (
        f"{name:<34} {len(pods):>7} pods  {len(pods) / seconds:>9,.0f} pods/s  {seconds:7.3f} s  "
        f"{len(plan.node_claims):>5} claims  {placed:>6} placed  ${plan.price_per_hour:,.2f}/h  "
        f"bound ${bound:,.2f}/h  (+{(plan.price_per_hour / bound - 1) * 100:.1f}%)"
    )


def run() -> Iterator[str]:
    types = benchmark_types(400)
    pool = NodePool(name="default", requirements=Requirements(), node_class="default")
    yield f"scheduling: Karpenter's benchmark mix (target: >= {MIX_TARGET:,} pods/s at 5,000 pods)"
    for count in (100, 1_000, 5_000):
        pods = karpenter_mix(count)
        plan, seconds = _timed(pods, pool, types)
        yield "  " + _line(f"mix of 5 kinds, {count} pods", pods, plan, seconds, lower_bound(pods, types, pool))
    rate = len(pods) / seconds
    # pods/s is an absolute figure: on a shared machine it falls with the load, so the load goes beside it.
    yield (f"  mix at 5,000 pods: {rate:,.0f} pods/s, best of {REPEATS}, load average {os.getloadavg()[0]:.1f} "
           f"(target >= {MIX_TARGET:,} pods/s: {'met' if rate >= MIX_TARGET else 'MISSED'})")
    yield "scheduling: 50 deployments on the us-east-1 catalog (targets: >= 20,000 pods/s, price <= bound + 10%)"
    catalog = bundled_catalog("us-east-1")
    pool = general_pool()
    pods = fifty_deployments()
    plan, seconds = _timed(pods, pool, catalog)
    yield "  " + _line("50 deployments x 1,000 replicas", pods, plan, seconds, lower_bound(pods, catalog, pool))
    rate = len(pods) / seconds
    verdict = "met" if rate >= THROUGHPUT_TARGET else "MISSED"
    yield (f"  headline: {len(pods):,} pods scheduled at {rate:,.0f} pods/s, best of {REPEATS} "
           f"(target >= {THROUGHPUT_TARGET:,} pods/s: {verdict})")


if __name__ == "__main__":
    print_lines(run)
