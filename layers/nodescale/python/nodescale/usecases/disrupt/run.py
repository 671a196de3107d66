"""The disruption use-case: one run of the scheduled health function (and `nodescale disrupt --once`).

Each run, in order:
1. finish what is under way (``disrupt_act``): nodes waiting for their replacement move on once it
   is Ready; nodes carrying the disruption taint are drained further and terminated when empty;
2. clean up (``disrupt_cleanup``): this cluster's instances that never registered, Nodes whose
   instance is gone, launch templates no longer used;
3. decide: read the world into what the pure planner needs (``disrupt_read``), ask it for repair,
   expiry, drift, emptiness and consolidation decisions (``disruption.planner``), and act on them.

A replacement is launched and Ready before the old node is drained: the old node is cordoned and
annotated with the replacement's instance ids, and a later run taints and drains it once they are
Ready. Every decision, taken or refused, becomes an event on the node and a log line.

This module keeps the names the handler, the CLI, the bench and the tests import.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from ... import clock, telemetry
from ...disruption import planner
from ...disruption.context import Inputs, Outcome
from ...disruption.decisions import Decision
from ...disruption.gauges import cluster_gauges
from ...disruption.nodes import EMPTY_SINCE, PODS_CHANGED, NodeView
from ...disruption.validation import ActTime, Invalid, Validator
from ...k8s import events as k8s_events
from ...model.pod import DO_NOT_DISRUPT, InvalidDoNotDisrupt, Pod, invalid_do_not_disrupt
from ...runtime import Runtime
from ...scheduling.templates import pool_usage
from ..world import read_world
from . import claims as disrupt_claims
from . import slices as disrupt_slices
from .act import act, drain, finish_under_way, flush_terminations, refused
from .cleanup import clean_up
from .read import (
    buffer_placement,
    cloud_drift,
    emit_gauges,
    impaired_since,
    node_views,
    simulator,
)
from .slices import FanOut, Slice
from .state import (
    DEFAULT_RUN_SECONDS,
    EVENT_INVALID_DO_NOT_DISRUPT,
    MAX_ANNOTATION_EVENTS,
    MAX_REFUSAL_EVENTS,
    REPLACEMENT_ANNOTATION,
    RunState,
    log,
)

# Single-node consolidation stops trying after this share of the run's time.
CONSOLIDATION_SHARE = 0.25
# A pool's lease outlives the run's deadline by this much: the drain round and summary under way.
LEASE_SLACK_SECONDS = 60.0
# The pools single-node consolidation ran out of time before reaching: Karpenter keeps them in its controller's
# memory (PreviouslyUnseenNodePools) and deals them out first next time; a warm container keeps them here the
# same way (a cold start forgets them, as a restart of Karpenter does).
_unseen_pools: set[str] = set()


def decide(run: RunState, in_progress: set[str], protected: set[str], pools: frozenset[str] | None = None) -> None:
    """Read what the planner needs, plan, and act on the outcome; with ``pools`` only their nodes are candidates."""
    outcome, views = plan_run(run, in_progress, protected, pools)
    apply(run, outcome, views, in_progress)


def plan_run(run: RunState, in_progress: set[str], protected: set[str],
             pools: frozenset[str] | None = None) -> tuple[Outcome, dict[str, NodeView]]:
    """The planner's outcome for the run's world, and the node views it was given (by name)."""
    world = run.world
    held = buffer_placement(world, in_progress)
    views, capacities = node_views(world, held)
    warn_invalid_annotations(run, views, pools)
    run.report.gauges = cluster_gauges(views, capacities, world.nodepools).to_dict()
    emit_gauges(views, capacities, world)
    skip = in_progress | protected
    inputs = Inputs(
        now=world.now,
        nodepools=world.nodepools,
        views=views,
        in_progress=frozenset(in_progress),
        protected=frozenset(protected),
        cloud_drift=cloud_drift(run, views, skip),
        impaired_since=impaired_since(run, views, skip),
        pdbs=world.pdbs,
        repair_threshold_seconds=run.rt.settings.repair_threshold_seconds,
        consolidation_seconds=max(1.0, run.time_left() * CONSOLIDATION_SHARE),
        shifted_zones=world.shifted_zones(),
        expiring_reservations={r.id: r.end_date for rs in world.reservations.values() for r in rs
                               if r.end_date is not None and r.expiring(world.now)},
        candidate_pools=pools,
        gates=world.gates,
        unseen_pools=tuple(sorted(_unseen_pools & set(pools if pools is not None else world.nodepools))),
    )
    disrupt_claims.note_plan(run, inputs)
    outcome = planner.plan(inputs, simulator(world, in_progress, held))
    remember_unseen(outcome, pools if pools is not None else world.nodepools)
    return outcome, {v.name: v for v in views}


def remember_unseen(outcome: Outcome, considered: Iterable[str]) -> None:
    """Keeps, for the next pass, the pools of ``considered`` that single-node consolidation did not reach;
    unchanged when it stopped at a decision (as Karpenter's), none of them when it tried every candidate."""
    unseen = outcome.consolidation.unseen_pools if outcome.consolidation is not None else None
    if unseen is None:
        return
    _unseen_pools.difference_update(considered)
    _unseen_pools.update(unseen)
    if unseen:
        log.info("single-node consolidation ran out of time before NodePool(s) %s: they go first next pass",
                 ", ".join(unseen))


def warn_invalid_annotations(run: RunState, views: Iterable[NodeView], pools: frozenset[str] | None) -> None:
    """A Warning on each pod (of the run's pools) whose do-not-disrupt value is ignored, as Karpenter writes one.

    Once a run per pod (the recorder folds repeats inside its window), at most MAX_ANNOTATION_EVENTS a
    run; the count of the rest goes in the summary's notes.
    """
    found: list[tuple[Pod, InvalidDoNotDisrupt]] = []
    for view in views:
        if pools is not None and view.nodepool not in pools:
            continue
        for pod in view.pods:
            why = invalid_do_not_disrupt(pod.annotations)
            if why is not None:
                found.append((pod, why))
    for pod, why in found[:MAX_ANNOTATION_EVENTS]:
        run.pod_event(pod, EVENT_INVALID_DO_NOT_DISRUPT, why.why, k8s_events.WARNING)
    if found:
        shown = ", ".join(pod.key for pod, _ in found[:10]) + (", ..." if len(found) > 10 else "")
        note = f"{len(found)} pod(s) with an invalid {DO_NOT_DISRUPT} annotation, ignored: {shown}"
        if len(found) > MAX_ANNOTATION_EVENTS:
            note += f" (a Warning event on the first {MAX_ANNOTATION_EVENTS} only)"
        run.report.notes.append(note)
        run.log.warning(note)


def apply(run: RunState, outcome: Outcome, views: Mapping[str, NodeView], in_progress: Iterable[str] = ()) -> None:
    """The outcome's bookkeeping (empty-since and pod-set marks), notes and refusals, then its decisions, in that
    order, each validated against the world read again just before acting (``in_progress``: nodes under way)."""
    for name in outcome.mark_empty:
        run.annotate(name, {EMPTY_SINCE: clock.format_timestamp(run.world.now)})
        if name in views:
            run.report.empty_since.append(empty_entry(run, views[name]))
    for name in outcome.clear_empty:
        run.annotate(name, {EMPTY_SINCE: None})
    for name, value in outcome.mark_pods.items():
        run.annotate(name, {PODS_CHANGED: value})
    for note in outcome.notes:
        run.report.notes.append(note)
        run.log.info(note)
    for refusal in outcome.refusals:
        refused(run, refusal)
    if run.events_skipped:
        run.report.notes.append(
            f"{run.events_skipped} refusal(s) logged without a node event (at most {MAX_REFUSAL_EVENTS} a run)"
        )
    verdicts = validate(run, outcome.decisions, in_progress)
    tainted = [view for decision, invalid in zip(outcome.decisions, verdicts, strict=True)
               for view in act(run, decision, invalid)]
    drain(run, tainted)


def validate(run: RunState, commands: list[Decision], in_progress: Iterable[str]) -> list[Invalid | None]:
    """Each command checked against the world as it is now (read again), in acting order (dry runs act on
    nothing and skip it): Karpenter's validation, without its wait (a run is one short invocation)."""
    if run.dry_run or not commands:
        return [None] * len(commands)
    world = read_world(run.rt, pod_cache=True)
    held = buffer_placement(world, in_progress)
    views, _ = node_views(world, held)
    busy = frozenset(in_progress) | {v.name for v in views if v.disrupting or v.annotations.get(REPLACEMENT_ANNOTATION)}
    validator = Validator(ActTime(now=world.now, nodepools=world.nodepools, views=views, in_progress=busy,
                                  simulate=simulator(world, set(busy), held), pdbs=world.pdbs,
                                  usage=pool_usage(world.existing_nodes(), {}), types=world.types_by_pool()))
    return [validator.validate(cmd) for cmd in commands]


def empty_entry(run: RunState, view: NodeView) -> dict[str, Any]:
    """A node first seen empty: when its pool's emptiness clock started and when it goes if it stays empty."""
    pool = run.world.nodepools.get(view.nodepool)
    after = pool.disruption.consolidate_after_seconds if pool is not None else None
    v1alpha5 = pool is not None and pool.api_version.endswith("/v1alpha5")
    entry: dict[str, Any] = {
        "node": view.name, "nodePool": view.nodepool, "since": clock.format_timestamp(run.world.now),
        "setting": "ttlSecondsAfterEmpty" if v1alpha5 else "consolidateAfter",
        "afterSeconds": after,
    }
    if after is not None:
        entry["removeAt"] = clock.format_timestamp(run.world.now + timedelta(seconds=after))
    return entry


def disrupt_once(
    rt: Runtime,
    *,
    dry_run: bool = False,
    deadline: float | None = None,
    part: Slice | None = None,
    fan_out: FanOut | None = None,
) -> dict[str, Any]:
    """One disruption run; ``deadline`` is a ``time.monotonic()`` value after which nothing new starts.

    ``part``: this invocation is one slice of a split pass and disrupts only its NodePools. ``fan_out``
    (the scheduled invocation's): how to start a slice; given, a cluster over the split threshold is
    cleaned up here and its disruption handed to one invocation per slice (``disrupt_slices``).
    """
    deadline = deadline if deadline is not None else time.monotonic() + DEFAULT_RUN_SECONDS
    rt.begin_invocation()
    # Pods from the warm container's cache (a watch from the last version; one list per cold container),
    # not a list of every pod each minute: the planner needs every node's pods, the drain reads its node's own.
    world = read_world(rt, pod_cache=True)
    run = RunState(rt, world, dry_run, deadline)
    for error in world.config_errors:
        run.report.errors.append(f"configuration: {error}")
    if part is None and fan_out is not None:
        slices = disrupt_slices.slices_for(rt, world.nodepools, world.node_views())
        if len(slices) > 1:
            clean_up(run)
            for piece in slices:
                try:
                    fan_out(piece.event())
                except Exception as exc:  # one slice not started must not keep the others from starting
                    run.report.errors.append(f"slice {piece.index + 1} of {piece.of} ({', '.join(piece.pools)}) "
                                             f"not started: {exc}; the next pass tries again")
            run.report.slices = [list(piece.pools) for piece in slices]
            return _summary(run)
    pools = tuple(world.nodepools) if part is None else part.pools
    # A dry run changes nothing, so it holds no lease and keeps no real pass from a pool.
    leased = contextlib.nullcontext([]) if dry_run else \
        disrupt_slices.pool_leases(rt, pools, ttl_seconds=run.time_left() + LEASE_SLACK_SECONDS)
    with leased as busy:
        if busy:
            run.report.notes.append(f"NodePools {', '.join(busy)} are being disrupted by another invocation: "
                                    "left to the next pass")
        mine = frozenset(p for p in pools if p not in busy)
        only = None if part is None and not busy else mine
        if part is not None:
            run.report.slices = [list(part.pools)]
        in_progress, protected = finish_under_way(run, only)
        flush_terminations(run)
        if part is None:
            clean_up(run)  # cluster-wide: the scheduled invocation's, never a slice's
        decide(run, in_progress, protected, only)
        flush_terminations(run)
        disrupt_claims.flush(run)
    return _summary(run)


def _summary(run: RunState) -> dict[str, Any]:
    summary = run.report.to_dict()
    telemetry.logger().info("disruption summary", extra={"summary": summary})
    return summary
