"""Consolidation: remove underutilized nodes whose pods fit elsewhere, or replace several with one cheaper.

This method picks the candidates (pool policy WhenEmptyOrUnderutilized or Balanced, no pod added or
removed for ``consolidateAfter``),
applies do-not-disrupt, PodDisruptionBudgets and the Underutilized budget, and hands the rest to the
pure search in ``disruption.consolidation`` with the simulator the use-case built.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from ...config.nodepools import BALANCED, WHEN_UNDERUTILIZED
from ...model.timestamps import format_timestamp
from ..balanced import Judge
from ..consolidation import search
from ..context import Context
from ..decisions import Action, Blocker, Decision, Reason
from ..nodes import NodeView
from ..replacement import Simulation, Simulator
from .base import Method


def settled_since(v: NodeView) -> datetime | None:
    """When the node last changed in a way its pods show: turned Ready or got a pod."""
    moments = [v.ready_since] if v.ready_since else []
    moments.extend(started for p in v.pods if (started := p.started) is not None)
    return max(moments) if moments else None


def pods_settled_since(v: NodeView, now: datetime) -> datetime | None:
    """When a pod was last added to or removed from the node (Karpenter's lastPodEventTime).

    A pod added shows by its start; a pod removed only by the node's recorded pod set
    (``PODS_CHANGED``) no longer matching, which restarts the clock now. Never recorded: what the pods show.
    """
    base = settled_since(v)
    recorded = v.pods_changed
    if recorded is None:
        return base
    when, digest = recorded
    if digest != v.pods_digest:
        return now
    return max(when, base) if base is not None else when


def pods_record(v: NodeView, now: datetime) -> str | None:
    """The ``PODS_CHANGED`` value to write when the recorded pod set is missing or stale, else None."""
    recorded = v.pods_changed
    if recorded is not None and recorded[1] == v.pods_digest:
        return None
    when = settled_since(v) if recorded is None else now
    return f"{format_timestamp(when or now)} {v.pods_digest}"


class Consolidation(Method):
    name = "consolidation"
    reason = Reason.UNDERUTILIZED

    def __init__(self, simulate: Simulator) -> None:
        self.simulate = simulate

    def notice(self, candidates: Sequence[NodeView], ctx: Context) -> None:
        """Records each node's pod set, so that a pod removed restarts consolidateAfter next run too."""
        for v in candidates:
            after = ctx.pool(v).disruption.consolidate_after_seconds
            if v.empty or ctx.pool(v).static or not _consolidates(ctx.pool(v).disruption.consolidation_policy) \
                    or not after:
                continue
            value = pods_record(v, ctx.now)
            if value is not None:
                ctx.out.mark_pods[v.name] = value

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        if node.empty or not node.ready:
            return False  # empty nodes are emptiness's
        if ctx.pool(node).static:
            return False  # a static pool (spec.replicas) keeps its nodes: never consolidated
        disruption = ctx.pool(node).disruption
        after = disruption.consolidate_after_seconds
        if not _consolidates(disruption.consolidation_policy) or after is None:
            return False
        since = pods_settled_since(node, ctx.now) if after else None
        return since is None or ctx.now >= since + timedelta(seconds=after)

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        """Consolidations, one after another, while the budgets leave room and the time allows.

        Karpenter's disruption loop takes one command per reconcile and reconciles again at once, the
        nodes of earlier commands no longer destinations; a pass here runs every minute, so it takes
        several. Each search after the first simulates the earlier decisions' nodes gone too (all of
        them at once must leave no pod without a place), and the rounds stop after a replacement (the
        next simulation could not count the new node) or when nothing more consolidates.
        """
        eligible, room = self._admit(candidates, ctx)
        judge = Judge(ctx.inputs.nodepools, ctx.inputs.views)
        views = {v.name: v for v in ctx.inputs.views}
        # Empty nodes an earlier method is removing this pass are no destination for anyone's pods.
        gone = [views[n] for d in ctx.out.decisions for n in d.nodes if n in views and not views[n].pods]
        pool_of = {v.name: v.nodepool for v in eligible}
        tried: set[str] = set()  # refused alone: with fewer destinations left, still refused
        stop = time.monotonic() + ctx.inputs.consolidation_seconds
        taken: list[Decision] = []
        while True:
            offered = [v for v in eligible if v.name not in ctx.decided and v.name not in tried
                       and room.get(v.nodepool, 0) > 0]
            if not offered or (taken and time.monotonic() >= stop):
                break
            result = search(offered, _without(self.simulate, gone), max_seconds=max(0.0, stop - time.monotonic()),
                             judge=judge, repack=not taken and ctx.inputs.gates.repack,
                            spot_to_spot=ctx.inputs.gates.spot_to_spot_consolidation, cap=lambda ordered: _cap(ordered, room),
                            first_pools=ctx.inputs.unseen_pools)
            if ctx.out.consolidation is None:
                ctx.out.consolidation = result
                for r in result.refusals:
                    ctx.refuse(r.nodes, r.reason, r.why, Blocker.NOT_CONSOLIDATABLE)
            else:
                ctx.out.consolidation.simulations += result.simulations
                ctx.out.consolidation.timed_out = result.timed_out
                if result.unseen_pools is not None:
                    ctx.out.consolidation.unseen_pools = result.unseen_pools
            tried.update(n for r in result.refusals for n in r.nodes)
            d = result.decision
            if d is None:
                break
            # One multi-node decision may span pools: each pool's budget pays for its own nodes.
            ctx.out.decisions.append(d)
            ctx.decided.update(d.nodes)
            taken.append(d)
            for name in d.nodes:
                ctx.budgets.take(pool_of[name])
            for pool in {pool_of[name] for name in d.nodes}:
                # What the tally leaves; a one-at-a-time pool (v1alpha5) has had its turn this pass.
                room[pool] = 0 if ctx.budgets.wait_turn(pool) else \
                    min(room[pool], ctx.budgets.allowance(pool, Reason.UNDERUTILIZED).allowed)
            if d.action != Action.DELETE or result.timed_out:
                break
            gone.extend(views[name] for name in d.nodes)
        return taken

    def _admit(self, candidates: Sequence[NodeView], ctx: Context) -> tuple[list[NodeView], dict[str, int]]:
        """The candidates guards let through, and each pool's room under its Underutilized budget.

        A one-at-a-time pool (v1alpha5) with a disruption under way offers none: Karpenter v0.2x started
        no consolidation before the last command's nodes were gone. Its budget is unlimited, so one
        multi-node consolidation may take up to ``MAX_MULTI_NODE`` of its nodes, as v0.2x's did.
        """
        eligible: list[NodeView] = []
        room: dict[str, int] = {}
        for v in candidates:
            if ctx.zone_held(v, Reason.UNDERUTILIZED) or ctx.guarded(v, Reason.UNDERUTILIZED) \
                    or ctx.wait_turn(v, Reason.UNDERUTILIZED):
                continue
            if v.nodepool not in room:
                allowance = ctx.budgets.allowance(v.nodepool, Reason.UNDERUTILIZED)
                room[v.nodepool] = allowance.allowed
                if allowance.allowed < 1:
                    ctx.out.notes.append(f"consolidation of NodePool {v.nodepool} held: {allowance.why}")
            if room[v.nodepool] < 1:
                why = ctx.budgets.allowance(v.nodepool, Reason.UNDERUTILIZED).why
                ctx.refuse([v.name], Reason.UNDERUTILIZED, why, Blocker.BUDGET)
                continue
            eligible.append(v)
        return eligible, room


def _without(simulate: Simulator, gone: Sequence[NodeView]) -> Simulator:
    """``simulate`` with ``gone`` taken away as well (decided this pass): the list is read at each call."""

    def simulate_after(nodes: Sequence[NodeView]) -> Simulation:
        return simulate([*gone, *nodes]) if gone else simulate(nodes)

    return simulate_after


def _consolidates(policy: str) -> bool:
    """Whether the policy consolidates nodes with pods (WhenEmptyOrUnderutilized, Balanced)."""
    return policy in (WHEN_UNDERUTILIZED, BALANCED)


def _cap(ordered: Sequence[NodeView], room: dict[str, int]) -> list[NodeView]:
    """The budget caps how many of a pool's nodes one (multi-node) decision may take: the first in the
    search's order (the cheapest to disrupt for Karpenter's passes, the most wasteful for the repack)."""
    capped: list[NodeView] = []
    used: dict[str, int] = {}
    for v in ordered:
        if used.get(v.nodepool, 0) < room.get(v.nodepool, 0):
            capped.append(v)
            used[v.nodepool] = used.get(v.nodepool, 0) + 1
    return capped
