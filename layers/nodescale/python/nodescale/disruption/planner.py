"""One run's disruption decisions, in Karpenter's order: repair, expiry, drift, emptiness, consolidation.

Pure: given the nodes as :class:`NodeView` (with the cloud-side facts the use-case looked up) and the
NodePools, it returns what to do and what was refused, with the reason for each. Budgets are
counted per NodePool and reason across the whole run, so a run never takes more than they allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..config.nodepools import V1, WHEN_UNDERUTILIZED
from ..model.nodepool import NodePool
from ..model.pod import LabelSelector, Pod
from ..model.timestamps import parse_timestamp
from . import budgets
from .consolidation import SearchResult, Simulator, search
from .decisions import (
    DRIFTED,
    EMPTY,
    EXPIRED,
    UNDERUTILIZED,
    UNHEALTHY,
    Decision,
    Refusal,
    empty_check,
    expiry_check,
    repair_check,
    unhealthy_share_too_high,
)
from .drift import template_drift
from .guards import node_blocks
from .nodes import NodeView

# Why a refusal happened, for the metrics (BudgetBlocked / DoNotDisruptBlocked) and the summary.
BLOCKED_BY_BUDGET = "budget"
BLOCKED_BY_DO_NOT_DISRUPT = "do-not-disrupt"
BLOCKED_BY_PDB = "pdb"
BLOCKED_BY_HEALTH = "unhealthy-share"
NOT_CONSOLIDATABLE = "not-consolidatable"

_VERB = {
    EMPTY: "not removed (empty)",
    DRIFTED: "not replaced (drifted)",
    EXPIRED: "not replaced (expired)",
    UNDERUTILIZED: "not consolidated",
    UNHEALTHY: "not repaired",
}


@dataclass(slots=True)
class Blocked(Refusal):
    """A refusal with the kind of guard that made it."""

    kind: str = ""

    @property
    def message(self) -> str:
        return f"{_VERB.get(self.reason, 'not disrupted')}: {self.why}"


@dataclass
class Inputs:
    now: datetime
    nodepools: Mapping[str, NodePool]
    views: Sequence[NodeView]  # this system's nodes (in a known NodePool), in-progress ones included
    in_progress: frozenset[str] = frozenset()  # being drained or waiting for their replacement
    protected: frozenset[str] = frozenset()  # replacements still coming up: never candidates
    cloud_drift: Mapping[str, str] = field(default_factory=dict)  # node -> why (Launcher.drift)
    impaired_since: Mapping[str, datetime] = field(default_factory=dict)  # node -> failing status checks since
    pdbs: Sequence[Mapping] = ()
    repair_threshold_seconds: float = 600.0
    consolidation_seconds: float = 30.0


@dataclass
class Outcome:
    decisions: list[Decision] = field(default_factory=list)
    refusals: list[Blocked] = field(default_factory=list)
    mark_empty: list[str] = field(default_factory=list)  # first seen empty now: record empty-since
    clear_empty: list[str] = field(default_factory=list)  # no longer empty: drop empty-since
    consolidation: SearchResult | None = None
    notes: list[str] = field(default_factory=list)  # pool-level reasons (e.g. budget holding consolidation)


class _Budgets:
    """Allowances per (pool, reason), reduced as decisions are taken in this run."""

    def __init__(self, inputs: Inputs) -> None:
        self.now = inputs.now
        self.pools = inputs.nodepools
        self.total: dict[str, int] = {}
        self.disrupting: dict[str, int] = {}
        for v in inputs.views:
            self.total[v.nodepool] = self.total.get(v.nodepool, 0) + 1
            if v.name in inputs.in_progress:
                self.disrupting[v.nodepool] = self.disrupting.get(v.nodepool, 0) + 1

    def allowance(self, pool: str, reason: str) -> budgets.Allowance:
        p = self.pools[pool]
        return budgets.allowed_disruptions(
            p.disruption.budgets, self.total.get(pool, 0), self.disrupting.get(pool, 0), reason, self.now
        )

    def take(self, pool: str, count: int = 1) -> None:
        self.disrupting[pool] = self.disrupting.get(pool, 0) + count


def pdb_blocks(pods: Iterable[Pod], pdbs: Sequence[Mapping]) -> str | None:
    """A pod whose PodDisruptionBudget allows no eviction now: a voluntary drain would stall on it."""
    for pod in pods:
        for pdb in pdbs:
            meta = pdb.get("metadata") or {}
            if (meta.get("namespace") or "default") != pod.namespace:
                continue
            allowed = (pdb.get("status") or {}).get("disruptionsAllowed")
            if allowed is None or int(allowed) > 0:
                continue
            if _selects(pdb, pod):
                return f"pod {pod.key} is protected by PodDisruptionBudget {pod.namespace}/{meta.get('name')} " \
                       f"(0 disruptions allowed)"
    return None


def _selects(pdb: Mapping, pod: Pod) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return LabelSelector.from_dict(selector).matches(pod.labels)


def plan(inputs: Inputs, simulate: Simulator | None = None) -> Outcome:
    out = Outcome()
    counted = _Budgets(inputs)
    now = inputs.now
    decided: set[str] = set()
    candidates = [
        v for v in inputs.views
        if v.name not in inputs.in_progress and v.name not in inputs.protected and v.nodepool in inputs.nodepools
    ]
    by_pool: dict[str, list[NodeView]] = {}
    for v in inputs.views:
        by_pool.setdefault(v.nodepool, []).append(v)

    def refuse(nodes: list[str], reason: str, why: str, kind: str) -> None:
        out.refusals.append(Blocked(nodes, reason, why, kind))

    def voluntary_ok(v: NodeView, reason: str) -> bool:
        why = node_blocks(v, now)
        if why:
            refuse([v.name], reason, why, BLOCKED_BY_DO_NOT_DISRUPT)
            return False
        why = pdb_blocks(v.pods, inputs.pdbs)
        if why:
            refuse([v.name], reason, why, BLOCKED_BY_PDB)
            return False
        allowance = counted.allowance(v.nodepool, reason)
        if allowance.allowed < 1:
            refuse([v.name], reason, allowance.why, BLOCKED_BY_BUDGET)
            return False
        return True

    def take(decision: Decision, pool: str) -> None:
        out.decisions.append(decision)
        decided.update(decision.nodes)
        counted.take(pool, len(decision.nodes))

    # 3. Repair: not held by budgets or do-not-disrupt, but by the share of the pool that is unhealthy.
    repairs: dict[str, list[Decision]] = {}
    for v in candidates:
        d = repair_check(v, now, inputs.repair_threshold_seconds, inputs.impaired_since.get(v.name))
        if d is not None:
            d.pods = [p.key for p in v.pods]
            repairs.setdefault(v.nodepool, []).append(d)
    for pool, found in repairs.items():
        total = len(by_pool.get(pool, []))
        if unhealthy_share_too_high(len(found), total):
            why = (
                f"{len(found)} of {total} nodes of NodePool {pool} are unhealthy (more than 20%): "
                "nothing is repaired, the cause is likely not the nodes"
            )
            out.notes.append(why)
            for d in found:
                refuse(d.nodes, UNHEALTHY, why, BLOCKED_BY_HEALTH)
                decided.update(d.nodes)
            continue
        for d in found:
            take(d, pool)

    # 4. Expiry: forceful under the v1 API; older APIs let budgets and do-not-disrupt hold it.
    for v in candidates:
        if v.name in decided:
            continue
        pool = inputs.nodepools[v.nodepool]
        d = expiry_check(v, pool, now)
        if d is None:
            continue
        d.pods = [p.key for p in v.pods]
        if not v.pods:
            d.action = "delete"
        if pool.api_version == V1 or voluntary_ok(v, EXPIRED):
            take(d, v.nodepool)
        else:
            decided.add(v.name)

    # 5. Drift.
    for v in candidates:
        if v.name in decided:
            continue
        pool = inputs.nodepools[v.nodepool]
        why = inputs.cloud_drift.get(v.name) or template_drift(v, pool)
        if not why:
            continue
        decided.add(v.name)
        if voluntary_ok(v, DRIFTED):
            take(
                Decision([v.name], DRIFTED, f"drifted: {why}", "replace" if v.pods else "delete",
                         pods=[p.key for p in v.pods]),
                v.nodepool,
            )

    # 6. Emptiness: the clock starts when the node is first seen empty (recorded on the node).
    for v in candidates:
        if v.name in decided:
            continue
        pool = inputs.nodepools[v.nodepool]
        if not v.empty:
            if v.empty_since is not None:
                out.clear_empty.append(v.name)
            continue
        if pool.disruption.consolidate_after_seconds is None or not v.ready:
            continue
        if v.empty_since is None:
            out.mark_empty.append(v.name)
            continue
        d = empty_check(v, pool, now)
        if d is None:
            continue
        decided.add(v.name)
        if voluntary_ok(v, EMPTY):
            d.saving_per_hour = v.price
            take(d, v.nodepool)

    # 7. Consolidation of underutilized nodes.
    if simulate is not None:
        _consolidate(inputs, candidates, decided, counted, out, simulate, refuse)
    return out


def settled_since(v: NodeView) -> datetime | None:
    """When the node last changed in a way that matters to consolidation: turned Ready or got a pod."""
    moments = [v.ready_since] if v.ready_since else []
    for p in v.pods:
        started = parse_timestamp((p.raw.get("status") or {}).get("startTime")) or parse_timestamp(
            (p.raw.get("metadata") or {}).get("creationTimestamp")
        )
        if started is not None:
            moments.append(started)
    return max(moments) if moments else None


def _consolidate(
    inputs: Inputs,
    candidates: list[NodeView],
    decided: set[str],
    counted: _Budgets,
    out: Outcome,
    simulate: Simulator,
    refuse: Callable[[list[str], str, str, str], None],
) -> None:
    now = inputs.now
    eligible: list[NodeView] = []
    room: dict[str, int] = {}
    for v in candidates:
        if v.name in decided or v.empty or not v.ready:
            continue
        pool = inputs.nodepools[v.nodepool]
        after = pool.disruption.consolidate_after_seconds
        if pool.disruption.consolidation_policy != WHEN_UNDERUTILIZED or after is None:
            continue
        since = settled_since(v)
        if since is not None and now < since + timedelta(seconds=after):
            continue
        why = node_blocks(v, now)
        if why:
            refuse([v.name], UNDERUTILIZED, why, BLOCKED_BY_DO_NOT_DISRUPT)
            continue
        why = pdb_blocks(v.pods, inputs.pdbs)
        if why:
            refuse([v.name], UNDERUTILIZED, why, BLOCKED_BY_PDB)
            continue
        if v.nodepool not in room:
            allowance = counted.allowance(v.nodepool, UNDERUTILIZED)
            room[v.nodepool] = allowance.allowed
            if allowance.allowed < 1:
                out.notes.append(f"consolidation of NodePool {v.nodepool} held: {allowance.why}")
        if room[v.nodepool] < 1:
            refuse([v.name], UNDERUTILIZED, counted.allowance(v.nodepool, UNDERUTILIZED).why, BLOCKED_BY_BUDGET)
            continue
        eligible.append(v)
    # The budget caps how many of a pool's nodes one (multi-node) decision may take.
    capped: list[NodeView] = []
    used: dict[str, int] = {}
    for v in sorted(eligible, key=lambda n: (len(n.pods), -n.price, n.name)):
        if used.get(v.nodepool, 0) < room.get(v.nodepool, 0):
            capped.append(v)
            used[v.nodepool] = used.get(v.nodepool, 0) + 1
    result = search(capped, simulate, max_seconds=inputs.consolidation_seconds)
    out.consolidation = result
    for r in result.refusals:
        refuse(r.nodes, r.reason, r.why, NOT_CONSOLIDATABLE)
    if result.decision is not None:
        d = result.decision
        out.decisions.append(d)
        decided.update(d.nodes)
        for name in d.nodes:
            pool = next(v.nodepool for v in capped if v.name == name)
            counted.take(pool)
