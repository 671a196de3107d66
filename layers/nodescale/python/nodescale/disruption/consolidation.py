"""Consolidation: remove nodes whose pods fit elsewhere, or replace several nodes with one cheaper one.

The search is pure: it is handed a ``simulate(nodes)`` function (the use-case runs the bin-packer
with those nodes gone) and decides from its answers. Multi-node consolidation comes first: the
candidates, best savings per unit of disruption first (``savings_first``), are tried as ever longer prefixes by binary search, and the
longest prefix that consolidates wins. Failing that, the repacking pass (``repacking``: the most
wasteful nodes onto fewer, cheaper ones; every node the budget allows first, then prefixes); then single nodes are tried one by one, the NodePools taking
turns (``interleave_pools``), until one consolidates or the time allowed runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

from ..model import labels as wk
from ..model.currency import Money, Priced
from .balanced import node_disruption
from .decisions import UNDERUTILIZED, Action, Decision, Refusal
from .nodes import NodeView
from .repacking import evaluate_repack, wasteful_first, without_same_type
from .replacement import Replacement, Simulation, Simulator

# Karpenter's rule for spot-to-spot replacement: only with this many cheaper types to choose from,
# so the replacement is not the next node to be interrupted.
MIN_SPOT_OPTIONS = 15
MAX_MULTI_NODE = 100


# Refuses a move that consolidates but is not worth it (the Balanced policy), or None to let it go.
Judge = Callable[[Sequence[NodeView], Decision], Refusal | None]


def savings_ratio(node: NodeView) -> float:
    """Karpenter's candidate SavingsRatio (v1.14+): the node's price per unit of disruption, the disruption
    being 1 for the node plus each pod's eviction cost (deletion cost and priority, negatives counting 0)."""
    return node.price / node_disruption(node)


def savings_first(node: NodeView) -> tuple[float, str]:
    """Karpenter's consolidation order (``sortCandidates``): the highest savings ratio first. Its sort is
    unstable, so equal ratios fall in any order there; here they go by node name, so runs repeat."""
    return (-savings_ratio(node), node.name)


def interleave_pools(ordered: Sequence[NodeView], first: Collection[str] = ()) -> list[NodeView]:
    """Karpenter's single-node order (``SortCandidates``): ``ordered`` (already in consolidation's order) dealt
    out one NodePool at a time, each pool's next best node in turn, so that a pool with many candidates does
    not keep the others' from being tried before the time runs out. The pools in ``first`` (those an earlier
    pass ran out of time before reaching) take their turns before the rest. Karpenter takes the pools in Go's
    map order (random); here a pool's turn comes by its best node, so the first node tried is still the best."""
    queues: dict[str, list[NodeView]] = {pool: [] for pool in dict.fromkeys(n.nodepool for n in ordered
                                                                          if n.nodepool in first)}
    for node in ordered:
        queues.setdefault(node.nodepool, []).append(node)
    dealt: list[NodeView] = []
    for i in range(max((len(q) for q in queues.values()), default=0)):
        dealt.extend(q[i] for q in queues.values() if i < len(q))
    return dealt


def evaluate(nodes: Sequence[NodeView], sim: Simulation, spot_to_spot: bool = False) -> Decision | Refusal:
    """Whether taking ``nodes`` away (and launching at most one replacement) is a consolidation; spot nodes are
    replaced by spot only with ``spot_to_spot`` (Karpenter's SpotToSpotConsolidation gate, off by default)."""
    names = [n.name for n in nodes]
    if sim.blocked:
        return Refusal(names, UNDERUTILIZED, sim.blocked)
    if sim.unschedulable:
        pod, why = sim.unschedulable[0]
        more = f" (and {len(sim.unschedulable) - 1} more pod(s))" if len(sim.unschedulable) > 1 else ""
        return Refusal(names, UNDERUTILIZED, f"pod {pod} would have nowhere to go: {why}{more}")
    current = sum(n.price for n in nodes)
    pods = [p.key for n in nodes for p in n.pods]
    if not sim.replacements:
        detail = _describe(nodes, current)
        return Decision(names, UNDERUTILIZED, detail, Action.DELETE, saving_per_hour=current, pods=pods)
    if len(sim.replacements) > 1:
        return Refusal(names, UNDERUTILIZED, f"the pods would need {len(sim.replacements)} new nodes, not one")
    new = sim.replacements[0]
    if len(nodes) > 1:
        filtered = without_same_type(nodes, new)
        if filtered is None:
            return Refusal(names, UNDERUTILIZED, "the replacement would be no cheaper than a node of the same type "
                                                 "being removed: removing fewer nodes does the same")
        new = filtered
    if new.price >= current - 1e-9:
        return Refusal(
            names,
            UNDERUTILIZED,
            Priced.of(f"the cheapest replacement ({new.instance_type}, ", Money(new.price), "/h) is not cheaper than ",
                      Money(current), "/h"),
        )
    all_spot = all(n.capacity_type == wk.CAPACITY_SPOT for n in nodes)
    if all_spot and new.options and new.options[0][2] == wk.CAPACITY_SPOT:
        if not spot_to_spot:
            return Refusal(names, UNDERUTILIZED, "SpotToSpotConsolidation is disabled: a spot node is not replaced "
                                                 "by a spot node (FEATURE_GATES)")
        cheaper = len({t for t, p, ct in new.options if ct == wk.CAPACITY_SPOT and p < current})
        if cheaper < MIN_SPOT_OPTIONS:
            return Refusal(
                names,
                UNDERUTILIZED,
                f"spot would be replaced by spot with only {cheaper} cheaper instance type(s) "
                f"(at least {MIN_SPOT_OPTIONS} needed)",
            )
    detail = _describe(nodes, current, new)
    return Decision(
        names, UNDERUTILIZED, detail, Action.REPLACE, saving_per_hour=current - new.price, replacements=[new],
        pods=pods
    )


def _describe(nodes: Sequence[NodeView], current: float, new: Replacement | None = None) -> Priced:
    count = f"{len(nodes)} nodes" if len(nodes) > 1 else "node"
    if new is None:
        return Priced.of(f"underutilized: the pods of the {count} fit on other nodes (saves ", Money(current), "/h)")
    return Priced.of(f"underutilized: the {count} (", Money(current), f"/h) can be replaced by one {new.instance_type} (",
                     Money(new.price), "/h)")


@dataclass(slots=True)
class SearchResult:
    decision: Decision | None
    refusals: list[Refusal] = field(default_factory=list)  # single-node attempts that did not consolidate
    simulations: int = 0
    timed_out: bool = False
    # The pools single-node consolidation did not reach before its time ran out (empty once it tried every
    # candidate; None when it stopped at a decision): the next pass deals them out first, as Karpenter's
    # PreviouslyUnseenNodePools.
    unseen_pools: list[str] | None = None


def search(
    candidates: Sequence[NodeView],
    simulate: Simulator,
    *,
    max_multi: int = MAX_MULTI_NODE,
    max_seconds: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    judge: Judge | None = None,
    repack: bool = True,
    spot_to_spot: bool = False,
    cap: Callable[[Sequence[NodeView]], list[NodeView]] | None = None,
    first_pools: Collection[str] = (),
) -> SearchResult:
    """The best consolidation among ``candidates`` (already filtered by guards and budgets); ``judge`` may
    refuse a move that would consolidate (the Balanced policy's score); ``repack`` tries the repacking
    pass (``disruption.repacking``) when Karpenter's multi-node consolidation finds nothing. ``cap`` keeps,
    in the order given, the nodes one decision may take (the budgets); each multi-node pass applies it to its
    own order (a single-node move takes one node, which any pool offered has room for, as in Karpenter).
    ``spot_to_spot`` is Karpenter's SpotToSpotConsolidation gate: without it spot nodes are never replaced by spot.
    ``first_pools``: the pools an earlier single-node pass did not reach (``SearchResult.unseen_pools``)."""
    cap = cap or list
    ordered = cap(sorted(candidates, key=savings_first))
    result = SearchResult(None)
    if not ordered:
        return result
    stop = clock() + max_seconds
    single = partial(evaluate, spot_to_spot=spot_to_spot)

    def attempt(nodes: Sequence[NodeView], judged: Callable[[Sequence[NodeView], Simulation], Decision | Refusal]
                = single) -> Decision | Refusal:
        result.simulations += 1
        outcome = judged(nodes, simulate(nodes))
        if judge is not None and isinstance(outcome, Decision):
            return judge(nodes, outcome) or outcome
        return outcome

    # Multi-node: the longest prefix (of 2 or more) that consolidates; binary search as Karpenter does.
    best = _longest_prefix(ordered, min(len(ordered), max_multi), attempt, stop, clock)
    if best is None and repack:
        # Beyond Karpenter: the most wasteful nodes repacked onto fewer, cheaper ones (disruption.repacking).
        wasteful = cap(wasteful_first(candidates))
        best = _whole_then_longest_prefix(wasteful, min(len(wasteful), max_multi),
                                          lambda nodes: attempt(nodes, evaluate_repack), stop, clock)
    if best is not None:
        result.decision = best
        return result
    # Single-node: every candidate may go alone (each pool offered has room for one), pools interleaved.
    singles = interleave_pools(sorted(candidates, key=savings_first), first_pools)
    unseen = list(dict.fromkeys(n.nodepool for n in singles))
    for node in singles:
        if clock() >= stop:
            result.timed_out = True
            break
        if node.nodepool in unseen:
            unseen.remove(node.nodepool)
        outcome = attempt([node])
        if isinstance(outcome, Decision):
            result.decision = outcome
            return result
        result.refusals.append(outcome)
    result.unseen_pools = unseen
    return result


def _longest_prefix(ordered: Sequence[NodeView], most: int, attempt: Callable[[Sequence[NodeView]], Decision | Refusal],
                    stop: float, clock: Callable[[], float]) -> Decision | None:
    """The decision for the longest prefix (of 2 or more) that consolidates, by binary search as Karpenter's
    multi-node consolidation does; None when no prefix tried does (or time ran out first)."""
    lo, hi = 2, most
    best: Decision | None = None
    while lo <= hi and clock() < stop:
        mid = (lo + hi) // 2
        outcome = attempt(ordered[:mid])
        if isinstance(outcome, Decision):
            best, lo = outcome, mid + 1
        else:
            hi = mid - 1
    return best


def _whole_then_longest_prefix(ordered: Sequence[NodeView], most: int,
                               attempt: Callable[[Sequence[NodeView]], Decision | Refusal],
                               stop: float, clock: Callable[[], float]) -> Decision | None:
    """Repacking's first try is all ``most`` nodes, then the binary search below them. Its saving is not monotone
    in the prefix (more nodes give the packer more pods to mix onto fewer, better-shaped nodes, and the 5%
    is of their price), so a search that halves after a failing middle misses the whole set that repacks: after
    a scale-down the cluster then stays dearer than a fresh plan though a budget's worth of nodes would do."""
    if most < 2 or clock() >= stop:
        return _longest_prefix(ordered, most, attempt, stop, clock)
    outcome = attempt(ordered[:most])
    if isinstance(outcome, Decision):
        return outcome
    return _longest_prefix(ordered, most - 1, attempt, stop, clock)
