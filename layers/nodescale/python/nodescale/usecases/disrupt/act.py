"""The disruption run's acting: carry on with what earlier runs started, and act on this run's plan.

Under way: a node carrying the disruption taint is drained a round further and terminated once empty
(instances together, in one batch); a node waiting for its replacement is tainted once every
replacement is Ready, or released when one failed. New decisions: a node whose pods need room gets
its replacement launched first (the node is cordoned and annotated with the instance ids, and a later
run goes on); any other is tainted and drained now. A command launches exactly the NodeClaims it
carries (``launch_claims``), and only once the validation before acting let it through. Every refusal and
decision becomes a log line, a metric and (within limits) an event on the node.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ... import clock, telemetry
from ...disruption import claim_conditions as cc
from ...disruption import event_words as words
from ...disruption.decisions import Action, Blocked, Blocker, Decision
from ...disruption.validation import Invalid, Invalidation
from ...k8s import events as k8s_events
from ...k8s import nodes as k8s_nodes
from ...model.currency import render
from ...model.node import ClusterNode
from .. import finalize
from ..provision.capacity import launch_claims
from ..terminate import TERMINATING, TerminationStep, continue_termination
from .claims import note as note_claim
from .state import (
    EVENT_BLOCKED,
    EVENT_DECISION,
    EVENT_REPLACEMENT_FAILED,
    EVENT_REPLACING,
    EVENT_TERMINATED,
    EVENT_UNCONSOLIDATABLE,
    FORCEFUL,
    MAX_REFUSAL_EVENTS,
    REASON_ANNOTATION,
    REPLACEMENT_ANNOTATION,
    STARTED_ANNOTATION,
    DecisionEntry,
    RefusalEntry,
    RunState,
    log,
    replacement_ids,
)

# -- what is under way ----------------------------------------------------------------------------------------


def finish_under_way(run: RunState, pools: frozenset[str] | None = None) -> tuple[set[str], set[str]]:
    """Returns (nodes in progress, nodes that are replacements still coming up); with ``pools`` (a sliced
    pass), only those pools' nodes are moved on, and the others' are still reported as in progress."""
    in_progress: set[str] = set()
    protected: set[str] = set()
    for view in list(run.world.nodes):
        name = view.name
        if name in run.world.untrusted:
            continue  # claims an instance it is not (#27.5): nothing is done to that instance through it
        disrupted = view.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule")
        if pools is not None and view.nodepool not in pools:
            if disrupted or view.annotations.get(REPLACEMENT_ANNOTATION):
                in_progress.add(name)
                protected.update(_nodes_of(run, replacement_ids(view.annotations)))
            continue
        if finalize.node_deleting(view):
            in_progress.add(name)
            started = _start_deleted(run, name)
            if started is None:
                continue
            view = ClusterNode.from_dict(started)
            disrupted = view.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule")
        if disrupted:
            in_progress.add(name)
            # Its replacement takes the pods this drain evicts: not a candidate while that goes on.
            protected.update(_nodes_of(run, replacement_ids(view.annotations)))
            continue_drain(run, view)
        elif view.annotations.get(REPLACEMENT_ANNOTATION):
            in_progress.add(name)
            protected.update(await_replacement(run, view))
    return in_progress, protected


def _start_deleted(run: RunState, name: str) -> dict[str, Any] | None:
    """A Node deleted with nodescale's finalizer (``kubectl delete node``): tainted and labelled now, then
    terminated as any node under way (``usecases/finalize``). None when this run cannot go on with it."""
    if run.dry_run:
        run.report.terminations.append({"node": name, "state": "draining", "reason": "node deleted"})
        return None
    try:
        return finalize.start(run.rt, name)
    except k8s_nodes.NodeGoneError:
        return None
    except ApiException as exc:
        run.report.errors.append(f"node {name}: could not start its termination: {exc.status} {exc.reason}")
        return None


def _nodes_of(run: RunState, instance_ids: list[str]) -> list[str]:
    return [n.name for n in map(run.world.node_for_instance, instance_ids) if n is not None]


def continue_drain(run: RunState, view: ClusterNode) -> None:
    """One more drain round for a tainted node; its instance joins the batch once it is empty."""
    name = view.name
    annotations = view.annotations
    reason = annotations.get(REASON_ANNOTATION, "")
    if run.dry_run:
        run.report.terminations.append({"node": name, "state": "draining", "reason": reason or "under way"})
        return
    if run.time_left() <= 0:
        return
    try:
        step = continue_termination(
            run.rt, run.world, view, involuntary=reason in FORCEFUL, deadline_monotonic=run.deadline,
            batch=run.batch,
        )
    except (ApiException, ClientError, BotoCoreError) as exc:
        run.report.errors.append(f"node {name}: termination step failed: {exc}")
        log.warning("termination step failed", extra={"node": name, "error": str(exc)})
        return
    if step.state == TERMINATING:
        run.terminating.append((step, reason, annotations))
        return
    _record_step(run, step, reason, annotations)


def flush_terminations(run: RunState) -> None:
    """Terminate the instances of the nodes drained empty so far, together (see TerminationBatch)."""
    waiting, run.terminating = run.terminating, []
    if not waiting:
        return
    try:
        run.batch.flush()
    except (ApiException, ClientError, BotoCoreError) as exc:
        for step, _, _ in waiting:
            run.report.errors.append(f"node {step.node}: terminating its instance failed: {exc}")
        log.warning("terminating instances failed", extra={"nodes": [s.node for s, _, _ in waiting],
                                                           "error": str(exc)})
        return
    for step, reason, notes in waiting:
        note_claim(run, step.node, cc.INSTANCE_TERMINATING, cc.TRUE_MARK)
        _record_step(run, step, reason, notes)


def _record_step(run: RunState, step: TerminationStep, reason: str, annotations: Mapping[str, str]) -> None:
    entry = step.summary()
    if reason:
        entry["disruptionReason"] = reason
    run.report.terminations.append(entry)
    if not step.done:
        return
    started = clock.parse_timestamp(annotations.get(STARTED_ANNOTATION))
    if started is not None:
        telemetry.seconds(telemetry.DRAIN_SECONDS, max(0.0, (run.now() - started).total_seconds()))
    telemetry.count(telemetry.NODES_TERMINATED, 1, **{telemetry.REASON_DIMENSION: reason or "Unknown"})
    run.event(step.node, EVENT_TERMINATED, f"terminated ({reason or 'disrupted'}): instance {step.instance_id}")


def say_terminating(run: RunState, node: str, reason: str) -> None:
    """Karpenter's DisruptionTerminating, as its queue publishes it when the node's termination starts."""
    run.event(node, EVENT_DECISION, words.disrupting("Node", reason), claim_message=words.disrupting("NodeClaim", reason))


def await_replacement(run: RunState, view: ClusterNode) -> list[str]:
    """A node whose replacement was launched: drain it once every replacement is Ready. Returns the
    replacements' node names (not candidates for disruption themselves)."""
    name = view.name
    ids = replacement_ids(view.annotations)
    started = clock.parse_timestamp(view.annotations.get(STARTED_ANNOTATION))
    waiting, failed, protected = _replacement_progress(run, started, ids)
    if failed:
        _call_off(run, name, "; ".join(failed))
    elif waiting:
        run.report.waiting.append({"node": name, "replacements": ids, "notReady": waiting})
    elif run.dry_run:
        run.report.terminations.append({"node": name, "state": "replacement ready"})
    else:
        try:
            change = k8s_nodes.mark_disrupted(run.rt.api, name)
        except k8s_nodes.NodeGoneError:
            return protected
        say_terminating(run, name, view.annotations.get(REASON_ANNOTATION, ""))
        continue_drain(run, ClusterNode.from_dict(change.node))
    return protected


def _replacement_progress(
    run: RunState, started: datetime | None, ids: list[str]
) -> tuple[list[str], list[str], list[str]]:
    """(instances not Ready yet, why others failed, the replacements' node names); ``started``: when the
    disruption was decided."""
    timeout = run.rt.settings.registration_timeout_seconds
    waiting: list[str] = []
    failed: list[str] = []
    protected: list[str] = []
    for iid in ids:
        node = run.world.node_for_instance(iid)
        inst = run.world.instance(iid)
        if node is not None:
            protected.append(node.name)
            if not node.ready:
                waiting.append(iid)
        elif inst is None:
            failed.append(f"instance {iid} is gone")
        else:
            # Counted from the decision (when the launch was made) as well as from EC2's launch time,
            # whichever is later: both are the same moment unless the clocks disagree.
            moments = [m for m in (inst.launch_time, started) if m is not None]
            launched = max(moments) if moments else None
            if launched is not None and (run.world.now - launched).total_seconds() > timeout:
                failed.append(f"instance {iid} did not register within {int(timeout)}s")
            else:
                waiting.append(iid)
    return waiting, failed, protected


def _call_off(run: RunState, name: str, why: str) -> None:
    """A replacement failed: the node stays, uncordoned and without the disruption annotations."""
    run.report.notes.append(f"node {name}: replacement failed ({why}); disruption called off")
    run.event(name, EVENT_REPLACEMENT_FAILED, f"disruption called off: {why}", k8s_events.WARNING)
    if run.dry_run:
        return
    run.annotate(name, {REPLACEMENT_ANNOTATION: None, REASON_ANNOTATION: None, STARTED_ANNOTATION: None})
    with contextlib.suppress(k8s_nodes.NodeGoneError):
        k8s_nodes.uncordon(run.rt.api, name)


EVENT_APPROVED = "ConsolidationApproved"  # Karpenter v1.14's event for an approved Balanced move

# -- this run's plan ------------------------------------------------------------------------------------------


def refused(run: RunState, r: Blocked) -> None:
    message = render(r.message, run.report.currency)
    run.report.refused.append(RefusalEntry.of(r, message))
    run.log.info(message, extra={"nodes": r.nodes, "reason": r.reason, "blocked_by": r.kind})
    if r.kind == Blocker.BUDGET:
        telemetry.count(telemetry.BUDGET_BLOCKED, len(r.nodes), **{telemetry.REASON_DIMENSION: r.reason})
    elif r.kind == Blocker.DO_NOT_DISRUPT:
        telemetry.count(telemetry.DO_NOT_DISRUPT_BLOCKED, len(r.nodes), **{telemetry.REASON_DIMENSION: r.reason})
    for node in r.nodes:
        if run.refusal_events >= MAX_REFUSAL_EVENTS:
            run.events_skipped += 1
            continue
        run.refusal_events += 1
        run.event(node, EVENT_UNCONSOLIDATABLE if r.kind == Blocker.NOT_CONSOLIDATABLE else EVENT_BLOCKED, message)


def act(run: RunState, d: Decision, invalid: Invalid | None = None) -> list[ClusterNode]:
    """Report the decision and, unless this is a dry run, start it: replacements first, else the taint.
    ``invalid``: the validation before acting found the command no longer holds; it is reported, not acted on.
    Returns the nodes tainted, for ``drain`` once every decision of the run is tainted (so the pods one
    drain evicts cannot land on a node another decision is about to drain)."""
    entry = DecisionEntry.of(d, render(d.detail, run.report.currency))
    run.report.decisions.append(entry)
    message = f"{d.reason}: {entry.detail}"
    run.log.info(f"disrupting {', '.join(d.nodes)}: {message}",
                 extra={"nodes": d.nodes, "reason": d.reason, "action": d.action, "dry_run": run.dry_run})
    if run.dry_run:
        return []
    if invalid is not None:
        _dropped(run, d, entry, invalid)
        return []
    telemetry.count(telemetry.DECISIONS, 1, **{telemetry.REASON_DIMENSION: d.reason})
    if d.saving_per_hour > 0:
        telemetry.gauge(telemetry.PRICE_SAVED, d.saving_per_hour, telemetry.Unit.NoUnit,
                        **{telemetry.REASON_DIMENSION: d.reason})
    if d.score is not None:
        _approved(run, d)
    replacements: list[str] = []
    if d.action == Action.REPLACE:
        launched = _launch_replacement(run, d, entry)
        if launched is None:
            return []
        replacements = launched
        entry.replacement_instances = replacements
    return _start(run, d, message, replacements)


def drain(run: RunState, tainted: list[ClusterNode]) -> None:
    """The first drain round of the nodes ``act`` tainted."""
    for view in tainted:
        continue_drain(run, view)


def _approved(run: RunState, d: Decision) -> None:
    """A Balanced move: its score as a metric and a ConsolidationApproved event on each node, as Karpenter v1.14."""
    telemetry.gauge(telemetry.CONSOLIDATION_SCORE, float(d.score or 0.0), telemetry.Unit.NoUnit,
                    **{telemetry.REASON_DIMENSION: d.reason})
    for node in d.nodes:
        run.event(node, EVENT_APPROVED, render(d.detail, run.report.currency))


def _dropped(run: RunState, d: Decision, entry: DecisionEntry, invalid: Invalid) -> None:
    """A command the validation refused: nothing launched or tainted, the reason in the report and on the nodes.
    Pods with nowhere to go, or a NodePool's limits, read as before: the replacement could not be launched."""
    if invalid.kind == Invalidation.LIMITS:
        telemetry.count(telemetry.LIMIT_REACHED, **{telemetry.NODEPOOL_DIMENSION: invalid.nodepool})
    if invalid.kind in (Invalidation.UNSCHEDULABLE, Invalidation.LIMITS) and d.action == Action.REPLACE:
        _not_launched(run, d, entry, render(invalid.why, run.report.currency))
        return
    message = render(invalid.message, run.report.currency)
    entry.dropped(message)
    run.report.notes.append(f"{', '.join(d.nodes)}: {d.reason} {message}; decided again next run")
    run.log.info(message, extra={"nodes": d.nodes, "reason": d.reason, "invalid": invalid.kind})
    for node in d.nodes:
        run.event(node, EVENT_BLOCKED, f"{d.reason}: {message}")


def _not_launched(run: RunState, d: Decision, entry: DecisionEntry, why: str) -> None:
    entry.replacement_failed(why)
    for node in d.nodes:
        run.event(node, EVENT_BLOCKED, f"{d.reason}: replacement could not be launched: {why}", k8s_events.WARNING)
    run.report.errors.append(f"{', '.join(d.nodes)}: replacement could not be launched: {why}")


def _launch_replacement(run: RunState, d: Decision, entry: DecisionEntry) -> list[str] | None:
    """Launch exactly the command's replacement claims; their instance ids (none when the pods fit on other
    nodes), or None (said in the report and on the nodes) when one could not be launched."""
    if not d.replacements:
        return []
    claims = [r.launch_claim() for r in d.replacements]
    launched = launch_claims(run.rt, run.world, claims, replacing=d.nodes,
                             reason=f"replacement for {d.reason.lower()} node(s) {', '.join(d.nodes)}")
    run.world = launched.world or run.world
    ids = [x.instance_id for x in launched.launches if x.instance_id]
    if launched.unschedulable or len(ids) < len(claims):
        why = launched.unschedulable[0][1] if launched.unschedulable else "; ".join(launched.error_messages)
        _not_launched(run, d, entry, why or "no instance was launched")
        return None
    return ids


def _start(run: RunState, d: Decision, message: str, replacements: list[str]) -> list[ClusterNode]:
    """Annotate each node; with replacements, cordon it and wait for them, otherwise taint it (returned, to drain)."""
    started = clock.format_timestamp(run.world.now)
    tainted: list[ClusterNode] = []
    for node in d.nodes:
        annotations = {REASON_ANNOTATION: d.reason, STARTED_ANNOTATION: started}
        if replacements:
            annotations[REPLACEMENT_ANNOTATION] = ",".join(sorted(set(replacements)))
        if not run.annotate(node, annotations):
            continue
        note_claim(run, node, cc.DISRUPTION_REASON, (str(d.reason), str(d.reason)))
        if replacements:
            k8s_nodes.cordon(run.rt.api, node)
            run.event(node, EVENT_REPLACING, f"{message}; waiting for replacement {', '.join(replacements)}")
            continue
        say_terminating(run, node, d.reason)
        tainted.append(ClusterNode.from_dict(k8s_nodes.mark_disrupted(run.rt.api, node).node))
    return tainted
