"""The ``Balanced`` consolidation policy (Karpenter v1.14): a move goes only when its saving is worth the pods it disrupts.

As in Karpenter's ``balanced.go`` and its design (``designs/balanced-consolidation.md``), a move's saving
and its disruption are both taken as fractions of its NodePool's totals, and the move is approved when

    score = (saving / pool's price per hour) / (move's disruption / pool's disruption)  >=  1 / consolidationThreshold

A node's disruption is 1 (the node itself) plus each pod's eviction cost, at least 0; a pod's eviction
cost is 1 plus its ``controller.kubernetes.io/pod-deletion-cost`` / 2^27 plus its priority / 2^25,
held within [-10, 10]. A move spanning pools is scored once per Balanced pool, with that pool's share
of the saving, and goes only if every one approves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..config.nodepools import BALANCED
from ..model.nodepool import NodePool
from ..model.pod import Pod
from .decisions import Decision, Refusal
from .nodes import NodeView

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def eviction_cost(pod: Pod) -> float:
    """Karpenter's per-pod EvictionCost: 1, more for a high deletion cost or priority, within [-10, 10]."""
    cost = 1.0 + pod.priority / 2**25
    with contextlib.suppress(ValueError):
        cost += int(pod.annotations.get(DELETION_COST, "0")) / 2**27
    return min(10.0, max(-10.0, cost))


def node_disruption(v: NodeView) -> float:
    """1 for the node plus its pods' eviction costs (negative ones count 0)."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in v.pods)


@dataclass(frozen=True, slots=True)
class Score:
    pool: str
    score: float
    savings_fraction: float
    disruption_fraction: float
    threshold: float  # 1 / consolidationThreshold

    @property
    def approved(self) -> bool:
        return self.score >= self.threshold

    def describe(self) -> str:
        return (f"balanced score {self.score:.2f} for NodePool {self.pool}: saves {self.savings_fraction:.1%} of its "
                f"price for {self.disruption_fraction:.1%} of its pod disruption (needs {self.threshold:.2f})")


@dataclass(frozen=True, slots=True)
class Totals:
    cost: float
    disruption: float


def pool_totals(views: Iterable[NodeView]) -> dict[str, Totals]:
    """Each pool's price per hour and disruption over all its nodes (nodes without a price left out)."""
    cost: dict[str, float] = {}
    disruption: dict[str, float] = {}
    for v in views:
        if v.price <= 0:
            continue
        cost[v.nodepool] = cost.get(v.nodepool, 0.0) + v.price
        disruption[v.nodepool] = disruption.get(v.nodepool, 0.0) + node_disruption(v)
    return {p: Totals(cost[p], disruption[p]) for p in cost}


def score_move(saving: float, disruption: float, totals: Totals | None, threshold: float, pool: str) -> Score:
    """The score of one move for one pool (0 when there is nothing to save or no priced pool)."""
    if totals is None or totals.cost <= 0 or saving <= 0:
        return Score(pool, 0.0, saving / totals.cost if totals and totals.cost > 0 else 0.0, 0.0, 1 / threshold)
    savings_fraction = saving / totals.cost
    disruption_fraction = disruption / totals.disruption
    return Score(pool, savings_fraction / disruption_fraction, savings_fraction, disruption_fraction, 1 / threshold)


class Judge:
    """Approves or refuses consolidation moves that take nodes of Balanced pools; others pass untouched."""

    def __init__(self, pools: Mapping[str, NodePool], views: Iterable[NodeView]) -> None:
        self.pools = pools
        self.totals = pool_totals(views)

    def __call__(self, nodes: Sequence[NodeView], decision: Decision) -> Refusal | None:
        by_pool: dict[str, list[NodeView]] = {}
        for v in nodes:
            by_pool.setdefault(v.nodepool, []).append(v)
        whole = sum(v.price for v in nodes)
        worst: Score | None = None
        for name, members in by_pool.items():
            pool = self.pools[name]
            if pool.disruption.consolidation_policy != BALANCED:
                continue
            share = sum(v.price for v in members) / whole if whole > 0 and len(by_pool) > 1 else 1.0
            disruption = sum(node_disruption(v) for v in members)
            s = score_move(decision.saving_per_hour * share, disruption, self.totals.get(name),
                           pool.disruption.consolidation_threshold, name)
            if not s.approved:
                return Refusal(decision.nodes, decision.reason, f"not worth the disruption: {s.describe()}")
            worst = s if worst is None or s.score < worst.score else worst
        if worst is not None:
            decision.score = worst.score
            decision.detail = decision.detail + f"; {worst.describe()}"
        return None
