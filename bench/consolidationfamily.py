"""Consolidation on ``bench.boundfamily``'s seeded family of mixes: how close to a fresh bound, at what churn (#32).

For each mix (the same seeds, pools and DaemonSets as ``bench.boundfamily``) the running cluster is
nodescale's own plan of the mix, launched as ``bench.convergence`` launches a plan (each NodeClaim a
node of its cheapest type, its pods bound, every DaemonSet's pod on it); then each deployment is scaled
down to a random 30-70% of its replicas, the pods removed picked at random (seeded by the mix's seed),
as a ReplicaSet's scale-down does not follow nodes. That is the realistic over-provisioning: a cluster
packed well for yesterday's load, with holes everywhere today.

Then ``bench.convergence.converge`` runs the disruption planner (the pure core the disruption function
runs, consolidation's simulator being the bin-packer) again and again, each run's decisions applied to
the in-memory cluster (nodes removed, their pods placed by nodescale's scheduler on the other nodes and
on new ones), until a run decides and marks nothing. The pool consolidates as soon as it can
(``WhenEmptyOrUnderutilized``, ``consolidateAfter: 0s``) under Karpenter's default budget (10% of the
nodes); spot-to-spot consolidation stays off, as Karpenter's feature gate is by default, so a spot mix's
nodes can only be deleted, never replaced by cheaper spot nodes (the summary also prints the on-demand mixes
alone).

Printed per mix and as median and worst: the final price over a fresh LP bound of the pods left
(``bench.bound.lp_bound``, hostname-bound groups one pod a node; goal at most 1.05), the planner runs
it took, the pods moved, and pods moved per $/h saved (churn per dollar: lower is better).

``python -m bench.consolidationfamily [BASE [COUNT]]``: mixes seeded BASE .. BASE+COUNT-1 (default 0, 20).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bench import print_lines
from bench.bound import daemonsets, host_groups_of, lp_bound, type_rows
from bench.boundfamily import MIXES, arguments, mix, pools_and_types
from bench.convergence import STARTED, Cluster, Convergence, consolidating_pool, converge, scale_down
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.scheduling.scheduler import solve

TARGET = 1.05


@dataclass(frozen=True)
class Result:
    seed: int
    pool: str
    pods_left: int
    start_bound: float  # the fresh bound of the pods left, before consolidation ran
    run: Convergence
    nodes_after: int
    seconds: float

    @property
    def ratio(self) -> float:
        return self.run.price_after / self.run.bound

    @property
    def saved(self) -> float:
        return self.run.price_before - self.run.price_after

    @property
    def churn(self) -> float:
        """Pods moved per $/h saved (0 when nothing moved; inf when pods moved for no saving)."""
        if not self.run.pods_moved:
            return 0.0
        return self.run.pods_moved / self.saved if self.saved > 1e-9 else float("inf")


def running_cluster(seed: int, pool: NodePool, types: list[InstanceType], daemons: list[Pod]) -> Cluster:
    """The mix planned and launched, then scaled down (see the module's docstring)."""
    pool = consolidating_pool(pool)
    plan = solve(mix(seed), [pool], {pool.name: types}, daemonset_pods=daemons)
    cluster = Cluster(pool, types, daemons)
    for claim in plan.node_claims:
        cluster.launch(claim, STARTED)
    scale_down(cluster, random.Random(seed))
    return cluster


def run_mix(seed: int, pool: NodePool, types: list[InstanceType], daemons: list[Pod]) -> Result:
    started = time.perf_counter()
    cluster = running_cluster(seed, pool, types, daemons)
    groups, one_per_node = host_groups_of(cluster.pods())
    start_bound = lp_bound(groups, type_rows(cluster.pool, types, daemons), one_per_node)
    outcome = converge(cluster)
    return Result(seed, pool.name, len(cluster.pods()), start_bound, outcome, len(cluster.nodes),
                  time.perf_counter() - started)


def family(base: int = 0, count: int = MIXES) -> Iterator[Result]:
    """The mixes' results, one at a time (a long run shows progress)."""
    (on_demand, od_types), (spot, spot_types) = pools_and_types()
    daemons = daemonsets()
    for seed in range(base, base + count):
        yield run_mix(seed, *((spot, spot_types) if seed % 4 == 3 else (on_demand, od_types)), daemons)


def line(r: Result) -> str:
    c = r.run
    state = "" if c.quiet else f"  NOT QUIET after {c.runs} runs"
    return (f"    seed {r.seed:>4} {r.pool:<8} {r.pods_left:>5} pods: {c.nodes_before:>4} -> {r.nodes_after:>4} nodes, "
            f"start {c.price_before / r.start_bound:.3f} -> final {r.ratio:.3f} x bound (${c.bound:,.2f}/h); "
            f"{c.runs} runs, {c.pods_moved:,} pods moved, {r.churn:.1f} pods per $/h saved; {r.seconds:.0f} s"
            + (f"  UNPLACED {c.unplaced}" if c.unplaced else "") + state)


def summary(results: Sequence[Result]) -> list[str]:
    ratios = [r.ratio for r in results]
    starts = [r.run.price_before / r.start_bound for r in results]
    churn = [r.churn for r in results]
    moved = sum(r.run.pods_moved for r in results)
    saved = sum(r.saved for r in results)
    met = max(ratios) <= TARGET
    on_demand = [r.ratio for r in results if r.pool != "spot"]
    return [
        f"  final / fresh bound: median {statistics.median(ratios):.3f}, worst {max(ratios):.3f} "
        f"(target worst <= {TARGET}: {'met' if met else 'MISSED'}); at the start: median "
        f"{statistics.median(starts):.3f}, worst {max(starts):.3f}",
        f"  on-demand mixes only ({len(on_demand)}): median "
        + (f"{statistics.median(on_demand):.3f}, worst {max(on_demand):.3f}" if on_demand else "-"),
        f"  runs: median {statistics.median(r.run.runs for r in results):.0f}, most "
        f"{max(r.run.runs for r in results)}; not quiet: {sum(not r.run.quiet for r in results)}",
        f"  pods moved: {moved:,} in all for ${saved:,.2f}/h saved = {moved / saved if saved else 0:.1f} pods per $/h; "
        f"per mix median {statistics.median(churn):.1f}, worst {max(churn):.1f} pods per $/h saved",
        f"  time: {sum(r.seconds for r in results):.0f} s (slowest mix {max(r.seconds for r in results):.0f} s)",
    ]


def run(base: int = 0, count: int = MIXES) -> Iterator[str]:
    yield (f"consolidation family: {count} mixes, seeds {base}..{base + count - 1} (spot pool every 4th), "
           "each planned then scaled down to 30-70% per deployment, consolidated until quiet")
    results = []
    for r in family(base, count):
        results.append(r)
        yield line(r)
    yield from summary(results)


if __name__ == "__main__":
    base, count = arguments(sys.argv, "bench.consolidationfamily")
    print_lines(lambda: run(base, count))
