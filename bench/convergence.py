"""Consolidation that converges: a cluster scaled down, disrupted run after run until it is quiet.

The running cluster is the plan of ``bench.bound``'s workload (a): 50,000 pods of 50 deployments with 5
DaemonSets on an on-demand c/m/r, generation > 2 pool, each NodeClaim launched as a node of its cheapest
type (zones taken in turn among its cheapest offerings) with its pods bound and a copy of every
DaemonSet's pod. Each deployment is then scaled down to a random 30-70% of its replicas (seeded; the pods
removed are picked at random, as a ReplicaSet's scale-down does not follow nodes).

Then the disruption planner runs again and again (``disruption.planner.plan``: the pure core the
disruption function runs, consolidation's simulator being ``disruption.simulator``), each run's
decisions applied to the in-memory cluster as the real system would: the nodes decided are removed,
their pods placed where nodescale's packer puts them (existing nodes first, then new nodes, which is
where a REPLACE's replacement comes from), empty nodes marked and removed by emptiness. The clock moves
a minute a run. It stops when a run decides nothing and marks nothing.

The pool's budget is Karpenter's default, ``nodes: 10%`` (one multi-node consolidation still takes at
most 100 nodes), with ``consolidateAfter: 0s``. Printed: the cluster's price over a fresh LP bound
(``bench.bound.lp_bound``) for the pods left, the disruptions, nodes removed and launched, pods moved,
and the runs it took. Target: at most 1.10 times the bound.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench import print_lines
from bench.bound import (
    daemonsets,
    groups_of,
    host_groups_of,
    lp_bound,
    mixed_deployments,
    on_demand_pool,
    type_rows,
)
from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.disruption import planner
from nodescale.disruption.context import Inputs
from nodescale.disruption.decisions import Action
from nodescale.disruption.nodes import EMPTY_SINCE, NodeView
from nodescale.disruption.simulator import bin_packing_simulator
from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType
from nodescale.model.nodelabels import node_labels
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.timestamps import format_timestamp
from nodescale.scheduling.plan import ExistingNode, NodeClaim
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve

TARGET = 1.10
MAX_RUNS = 400
SEED = 29
STARTED = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Node:
    """One node of the in-memory cluster."""

    name: str
    instance_type: str
    zone: str
    price: float
    labels: dict[str, str]
    allocatable: dict[str, int]
    pods: list[Pod] = field(default_factory=list)  # workload pods, no DaemonSet's
    daemon_pods: list[Pod] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    created: datetime = STARTED


class Cluster:
    """Nodes with their pods, and what launching a claim or removing a node does to them."""

    def __init__(self, pool: NodePool, types: Sequence[InstanceType], daemons: Sequence[Pod]) -> None:
        self.pool = pool
        self.types = list(types)
        self.by_name = {t.name: t for t in types}
        self.daemons = list(daemons)
        self.nodes: dict[str, Node] = {}
        self.launched = 0
        self._zone_turn = 0

    @property
    def price(self) -> float:
        return sum(n.price for n in self.nodes.values())

    def pods(self) -> list[Pod]:
        return [p for n in self.nodes.values() for p in n.pods]

    def launch(self, claim: NodeClaim, now: datetime) -> Node:
        """A node of the claim's cheapest type, in one of the zones that type is cheapest in (in turn)."""
        it = self.by_name[claim.instance_types[0]]
        zones = sorted(
            o.zone for o in it.offerings
            if o.available and o.zone in claim.zones and o.capacity_type in claim.capacity_types
            and abs(o.price - claim.price) < 1e-9
        ) or sorted(claim.zones)
        zone = zones[self._zone_turn % len(zones)]
        self._zone_turn += 1
        self.launched += 1
        name = f"ip-10-0-{self.launched // 250}-{self.launched % 250}.ec2.internal"
        capacity_type = claim.capacity_types[0]
        labels = node_labels(self.pool, it.labels, zone=zone, capacity_type=capacity_type)
        labels[wk.INSTANCE_TYPE] = it.name
        labels[wk.HOSTNAME] = name
        node = Node(name, it.name, zone, claim.price, labels, dict(it.allocatable), created=now)
        node.daemon_pods = [dataclasses.replace(d, name=f"{d.name}-{self.launched}", node_name=name)
                            for d in self.daemons]
        self.bind(node, claim.pods)
        self.nodes[name] = node
        return node

    @staticmethod
    def bind(node: Node, pods: Sequence[Pod]) -> None:
        for p in pods:
            p.node_name = node.name
        node.pods.extend(pods)

    def existing(self, exclude: Set[str] = frozenset()) -> list[ExistingNode]:
        return [
            ExistingNode(n.name, n.labels, n.allocatable, pods=[*n.pods, *n.daemon_pods], price=n.price,
                         pool=self.pool.name)
            for n in self.nodes.values() if n.name not in exclude
        ]

    def views(self) -> list[NodeView]:
        return [
            NodeView(
                name=n.name, nodepool=self.pool.name, instance_id=f"i-{i:017x}", instance_type=n.instance_type,
                zone=n.zone, capacity_type=n.labels[wk.CAPACITY_TYPE], created=n.created, labels=n.labels,
                annotations=n.annotations, taints=[], ready=True, ready_since=n.created, unschedulable=False,
                pods=list(n.pods), daemon_pods=list(n.daemon_pods), allocatable=n.allocatable, price=n.price,
            )
            for i, n in enumerate(self.nodes.values())
        ]

    def remove(self, names: Sequence[str], now: datetime) -> tuple[int, int]:
        """Removes the nodes and places their pods as nodescale's packer does; (pods moved, unplaced)."""
        gone = set(names)
        pods = [p for name in names for p in self.nodes[name].pods]
        existing = self.existing(exclude=gone)
        for name in names:
            del self.nodes[name]
        if not pods:
            return 0, 0
        plan = solve(pods, [self.pool], {self.pool.name: self.types}, existing, self.daemons)
        for placement in plan.existing:
            self.bind(self.nodes[placement.node], placement.pods)
        for claim in plan.node_claims:
            self.launch(claim, now)
        return len(pods), len(plan.unschedulable)


def consolidating_pool(pool: NodePool | None = None) -> NodePool:
    """``pool`` (workload (a)'s by default), consolidating as soon as it can, under Karpenter's default budget
    (10%)."""
    pool = pool or on_demand_pool()
    disruption = dataclasses.replace(pool.disruption, consolidation_policy="WhenEmptyOrUnderutilized",
                                     consolidate_after_seconds=0.0)
    return dataclasses.replace(pool, disruption=disruption)


def scale_down(cluster: Cluster, rnd: random.Random) -> int:
    """Each deployment to a random 30-70% of its pods, the pods removed picked at random; pods removed."""
    by_deployment: dict[str, list[tuple[Node, Pod]]] = {}
    for node in cluster.nodes.values():
        for pod in node.pods:
            by_deployment.setdefault(pod.labels["app"], []).append((node, pod))
    removed: set[int] = set()
    for name in sorted(by_deployment):
        members = by_deployment[name]
        keep = round(len(members) * rnd.uniform(0.3, 0.7))
        removed.update(id(pod) for _, pod in rnd.sample(members, len(members) - keep))
    for node in cluster.nodes.values():
        node.pods = [p for p in node.pods if id(p) not in removed]
    return len(removed)


@dataclass
class Convergence:
    nodes_before: int
    price_before: float
    pods_left: int
    runs: int = 0
    decisions: dict[str, int] = field(default_factory=dict)  # reason -> decisions
    nodes_removed: int = 0
    nodes_launched: int = 0
    pods_moved: int = 0
    unplaced: int = 0
    seconds: float = 0.0
    price_after: float = 0.0
    bound: float = 0.0
    quiet: bool = False


def converge(cluster: Cluster, max_runs: int = MAX_RUNS) -> Convergence:
    """Disruption runs, each applied, until one decides and marks nothing (or ``max_runs``)."""
    pool = cluster.pool
    result = Convergence(len(cluster.nodes), cluster.price, len(cluster.pods()))
    started = time.perf_counter()
    now = STARTED + timedelta(hours=1)
    for _ in range(max_runs):
        result.runs += 1
        launched_before = cluster.launched
        simulate = bin_packing_simulator(cluster.existing(), [pool], {pool.name: cluster.types}, cluster.daemons)
        outcome = planner.plan(Inputs(now, {pool.name: pool}, cluster.views()), simulate)
        for name in outcome.mark_empty:
            cluster.nodes[name].annotations[EMPTY_SINCE] = format_timestamp(now)
        for decision in outcome.decisions:
            if decision.action == Action.NONE:
                continue
            result.decisions[decision.reason] = result.decisions.get(decision.reason, 0) + 1
            moved, unplaced = cluster.remove(decision.nodes, now)
            result.nodes_removed += len(decision.nodes)
            result.pods_moved += moved
            result.unplaced += unplaced
        result.nodes_launched += cluster.launched - launched_before
        now += timedelta(minutes=1)
        if not outcome.decisions and not outcome.mark_empty:
            result.quiet = True
            break
    result.seconds = time.perf_counter() - started
    result.price_after = cluster.price
    rows = type_rows(pool, cluster.types, cluster.daemons)
    # Hostname-bound groups (bench.scheduling's kinds) count one pod a node; workload (a) has none.
    groups, one_per_node = host_groups_of(cluster.pods())
    result.bound = lp_bound(groups, rows, one_per_node)
    return result


def scaled_down_cluster(seed: int = SEED) -> tuple[Cluster, int]:
    """Workload (a)'s plan as a running cluster, then scaled down; (cluster, pods removed)."""
    pool = consolidating_pool()
    types_by_pool, _labels = pool_types([pool], {}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))
    types = types_by_pool[pool.name]
    daemons = daemonsets()
    plan = solve(mixed_deployments(), [pool], {pool.name: types}, daemonset_pods=daemons)
    cluster = Cluster(pool, types, daemons)
    for claim in plan.node_claims:
        cluster.launch(claim, STARTED)
    return cluster, scale_down(cluster, random.Random(seed))


def run() -> Iterator[str]:
    cluster, removed = scaled_down_cluster()
    before_bound = lp_bound(groups_of(cluster.pods()), type_rows(cluster.pool, cluster.types, cluster.daemons))
    yield (
        f"convergence: workload (a) scaled down to 30-70% per deployment ({removed:,} of 50,000 pods removed): "
        f"{len(cluster.nodes):,} nodes at ${cluster.price:,.2f}/h = {cluster.price / before_bound:.3f} x bound"
    )
    r = converge(cluster)
    decisions = ", ".join(f"{n} {reason}" for reason, n in sorted(r.decisions.items())) or "none"
    state = "quiet" if r.quiet else f"not quiet after {r.runs} runs"
    yield (
        f"  after {r.runs} disruption runs ({state}, {r.seconds:.0f} s): {len(cluster.nodes):,} nodes at "
        f"${r.price_after:,.2f}/h, bound ${r.bound:,.2f}/h = {r.price_after / r.bound:.3f} x bound "
        f"(target <= {TARGET:.2f}: {'met' if r.price_after / r.bound <= TARGET else 'MISSED'})"
    )
    yield (
        f"  disruptions: {sum(r.decisions.values())} ({decisions}); nodes removed {r.nodes_removed:,}, "
        f"launched {r.nodes_launched:,}; pods moved {r.pods_moved:,}; pods left unplaced {r.unplaced}"
    )


if __name__ == "__main__":
    print_lines(run)
