"""Price over the LP bound on a seeded family of random workload mixes, not only the benchmark's own (#32).

Each mix: 8 to 24 deployments, each of 100m to 8 vCPU and 0.5 to 16 GiB of memory per vCPU, 20 to 300
replicas; the 5 typical DaemonSets of ``bench.bound``; about one deployment in six topology-bound (zonal
spread, hostname spread or hostname anti-affinity). Every fourth mix runs on a spot c/m/r pool, the rest
on the on-demand one, both on the bundled us-east-1 catalog. For each mix: nodescale's plan, the
Karpenter-like FFD model and the LP bound of ``bench.bound``; the family prints the median and the worst
of plan/bound and FFD/bound and the total solve time.

``python -m bench.boundfamily [BASE [COUNT]]``: mixes seeded BASE .. BASE+COUNT-1 (default 0 and 20), so
seeds the planner was never tuned on can be tried.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench import print_lines
from bench.bound import (
    cmr_pool,
    daemonsets,
    ffd,
    ffd_pods,
    host_groups_of,
    lp_bound,
    on_demand_pool,
    type_rows,
)
from bench.scheduling import HOST_ANTI, HOST_SPREAD, ZONE_SPREAD, _constraint, _pod
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve

CPUS = (100, 250, 500, 750, 1000, 1500, 2000, 3000, 4000, 6000, 8000)  # millicores
GIB_PER_CPU = (0.5, 1, 2, 3, 4, 6, 8, 12, 16)
TOPOLOGY = (ZONE_SPREAD, HOST_SPREAD, HOST_ANTI)
MIXES = 20
TARGET_MEDIAN, TARGET_WORST = 1.03, 1.05


def spot_pool() -> NodePool:
    return cmr_pool("spot", "spot")


def mix(seed: int) -> list[Pod]:
    """One mix's pending pods (see the module's docstring)."""
    rnd = random.Random(seed)
    pods: list[Pod] = []
    for d in range(rnd.randint(8, 24)):
        cpu = rnd.choice(CPUS)
        mem = max(64, int(cpu * rnd.choice(GIB_PER_CPU) * 1.024))  # MiB
        kind = rnd.choice(TOPOLOGY) if rnd.random() < 1 / 6 else "plain"
        # Hostname-bound groups stay small: each of their pods takes a node of its own.
        replicas = rnd.randint(5, 40) if kind in (HOST_SPREAD, HOST_ANTI) else rnd.randint(20, 300)
        labels = {"app": f"deploy-{d}", "kind": kind, "value": f"deploy-{d}"}
        template = _pod(f"deploy-{d}", cpu, mem, labels, _constraint(kind, {"app": f"deploy-{d}"}))
        for r in range(replicas):
            pod = Pod(**{f: getattr(template, f) for f in template.__dataclass_fields__})
            pod.name = f"deploy-{d}-{r}"
            pods.append(pod)
    return pods


@dataclass(frozen=True)
class Result:
    seed: int
    pool: str
    pods: int
    plan: float
    ffd: float
    bound: float
    seconds: float
    unplaced: int


def pools_and_types() -> list[tuple[NodePool, list[InstanceType]]]:
    out = []
    for pool in (on_demand_pool(), spot_pool()):
        by_pool, _labels = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))
        out.append((pool, list(by_pool[pool.name])))
    return out


def run_mix(seed: int, pool: NodePool, types: list[InstanceType], daemons: list[Pod]) -> Result:
    pods = mix(seed)
    started = time.perf_counter()
    plan = solve(pods, [pool], {pool.name: types}, daemonset_pods=daemons)
    seconds = time.perf_counter() - started
    rows = type_rows(pool, types, daemons)
    packed = ffd(ffd_pods(pods), rows)
    groups, one_per_node = host_groups_of(pods)
    bound = lp_bound(groups, rows, one_per_node)
    return Result(seed, pool.name, len(pods), plan.price_per_hour, packed.price, bound, seconds,
                  len(plan.unschedulable))


def family(base: int = 0, count: int = MIXES) -> Iterator[Result]:
    """The mixes' results, one at a time (a long run shows progress)."""
    (on_demand, od_types), (spot, spot_types) = pools_and_types()
    daemons = daemonsets()
    for seed in range(base, base + count):
        yield run_mix(seed, *((spot, spot_types) if seed % 4 == 3 else (on_demand, od_types)), daemons)


def summary(results: Sequence[Result]) -> list[str]:
    plan = [r.plan / r.bound for r in results]
    model = [r.ffd / r.bound for r in results]
    met = statistics.median(plan) <= TARGET_MEDIAN and max(plan) <= TARGET_WORST
    return [
        f"  nodescale / bound: median {statistics.median(plan):.3f}, worst {max(plan):.3f} "
        f"(target median <= {TARGET_MEDIAN}, worst <= {TARGET_WORST}: {'met' if met else 'MISSED'})",
        f"  FFD model / bound: median {statistics.median(model):.3f}, worst {max(model):.3f}",
        f"  solve: {sum(r.seconds for r in results):.2f} s for {sum(r.pods for r in results):,} pods "
        f"(slowest mix {max(r.seconds for r in results):.2f} s)",
    ]


def run(base: int = 0, count: int = MIXES) -> Iterator[str]:
    yield f"bound family: {count} random mixes, seeds {base}..{base + count - 1} (spot pool every 4th)"
    results = []
    for r in family(base, count):
        results.append(r)
        yield (f"    seed {r.seed:>4} {r.pool:<8} {r.pods:>5} pods: plan {r.plan / r.bound:.3f}  "
               f"FFD {r.ffd / r.bound:.3f}  bound ${r.bound:,.2f}/h  solve {r.seconds:.2f} s"
               + (f"  UNPLACED {r.unplaced}" if r.unplaced else ""))
    yield from summary(results)


def arguments(argv: Sequence[str], prog: str = "bench.boundfamily") -> tuple[int, int]:
    """BASE and COUNT from the command line, each a whole number (COUNT at least 1); errors name ``prog``."""
    values = list(argv[1:3])
    if len(argv) > 3 or not all(v.isdigit() for v in values):
        raise SystemExit(f"{prog}: usage: [BASE [COUNT]] (whole numbers), got {' '.join(argv[1:])!r}")
    base = int(values[0]) if values else 0
    count = int(values[1]) if len(values) > 1 else MIXES
    if count < 1:
        raise SystemExit(f"{prog}: COUNT must be at least 1")
    return base, count


if __name__ == "__main__":
    base, count = arguments(sys.argv)
    print_lines(lambda: run(base, count))
