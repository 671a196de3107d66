"""The disruption use-case: one run of the scheduled health function (and `nodescale disrupt --once`).

Each run, in order:
1. finish what is under way: nodes waiting for their replacement move on once it is Ready; nodes
   carrying the disruption taint are drained further and terminated when empty;
2. clean up: this cluster's instances that never registered, Nodes whose instance is gone, launch
   templates no longer used;
3-7. repair, expiry, drift, emptiness and consolidation decisions (``disruption.planner``), acted on.

A replacement is launched and Ready before the old node is drained: the old node is cordoned and
annotated with the replacement's instance ids, and a later run taints and drains it once they are
Ready. Every decision, taken or refused, becomes an event on the node and a log line.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from .. import clock, telemetry
from ..aws import instances as ec2_instances
from ..aws import launchtemplates
from ..aws.ownership import GONE_STATES, classify
from ..disruption import planner
from ..disruption.consolidation import Replacement, Simulation, Simulator
from ..disruption.decisions import EXPIRED, ORPHANED, UNHEALTHY, Decision
from ..disruption.gauges import cluster_gauges
from ..disruption.nodes import EMPTY_SINCE, NodeView
from ..k8s import events as k8s_events
from ..k8s import nodes as k8s_nodes
from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..runtime import Runtime
from ..scheduling import NodeClaim, solve
from .provision import launch_capacity
from .terminate import TERMINATING, TerminationBatch, TerminationStep, continue_termination
from .world import IN_FLIGHT_PREFIX, World, read_world

log = logging.getLogger(__name__)

# Written on a node being disrupted: why, since when, and the instances replacing it.
REASON_ANNOTATION = "nodescale.io/disruption-reason"
STARTED_ANNOTATION = "nodescale.io/disruption-started"
REPLACEMENT_ANNOTATION = "nodescale.io/disruption-replacement"
# First time the node's instance was seen failing its EC2 status checks (repair counts from it).
IMPAIRED_SINCE = "nodescale.io/impaired-since"

EVENT_DECISION = "DisruptionDecision"
EVENT_BLOCKED = "DisruptionBlocked"
EVENT_REPLACING = "DisruptionReplacing"
EVENT_REPLACEMENT_FAILED = "DisruptionReplacementFailed"
EVENT_TERMINATED = "DisruptionTerminated"
EVENT_WINDOW_SECONDS = 55.0  # below the one-minute schedule: each run may restate a refusal once
# Refusal events one run writes at most (a zero budget in business hours holds every node of a pool
# every minute); the rest are in the log and the summary only.
MAX_REFUSAL_EVENTS = 200

# Reasons whose drain evicts do-not-disrupt pods too (the node goes regardless).
FORCEFUL = frozenset({EXPIRED, UNHEALTHY})
DEFAULT_RUN_SECONDS = 240.0
# Single-node consolidation stops trying after this share of the run's time.
CONSOLIDATION_SHARE = 0.25
# Launch templates younger than this are kept: another function may be launching with one.
TEMPLATE_MIN_AGE_SECONDS = 600.0


@dataclass
class Report:
    dry_run: bool
    decisions: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    terminations: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[dict[str, Any]] = field(default_factory=list)
    cleanup: dict[str, list[str]] = field(
        default_factory=lambda: {"unregisteredInstances": [], "orphanedNodes": [], "launchTemplates": []}
    )
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    gauges: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def to_dict(self) -> dict[str, Any]:
        saving = sum(d.get("savingPerHour", 0.0) for d in self.decisions)
        return {
            "dryRun": self.dry_run,
            "decisions": self.decisions,
            "refused": self.refused,
            "terminations": self.terminations,
            "waitingForReplacement": self.waiting,
            "cleanup": self.cleanup,
            "notes": self.notes,
            "errors": self.errors,
            "pricePerHourSaved": round(saving, 6),
            "cluster": self.gauges,
            "seconds": round(time.monotonic() - self.started, 3),
        }


class _Run:
    def __init__(self, rt: Runtime, world: World, dry_run: bool, deadline: float) -> None:
        self.rt = rt
        self.world = world
        self.dry_run = dry_run
        self.deadline = deadline
        self.report = Report(dry_run)
        self.log = telemetry.logger()
        base, started = world.now.timestamp(), time.monotonic()
        self.recorder = k8s_events.EventRecorder(
            rt.api, dedupe_seconds=EVENT_WINDOW_SECONDS, on_repeat="skip",
            clock=lambda: base + time.monotonic() - started,
        )
        self.raw_by_name = {_name(n): n for n in world.nodes}
        self.refusal_events = 0
        self.events_skipped = 0
        self.batch = TerminationBatch(rt)
        self.terminating: list[tuple[TerminationStep, str, dict[str, Any]]] = []

    # -- helpers -------------------------------------------------------------------------------------------

    def now(self) -> datetime:
        return clock.now()

    def event(self, node: str, reason: str, message: str, type_: str = k8s_events.NORMAL) -> None:
        if self.dry_run:
            return
        uid = str(((self.raw_by_name.get(node) or {}).get("metadata") or {}).get("uid") or "")
        try:
            self.recorder.node(node, reason, message, type_, uid=uid)
        except ApiException as exc:
            log.warning("event not recorded", extra={"node": node, "reason": reason, "status": exc.status})

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> bool:
        if self.dry_run:
            return True
        try:
            k8s_nodes.patch_metadata(self.rt.api, node, annotations=annotations)
            return True
        except k8s_nodes.NodeGoneError:
            return False

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    # -- 1. finish what is under way ----------------------------------------------------------------------

    def finish_under_way(self) -> tuple[set[str], set[str]]:
        """Returns (nodes in progress, nodes that are replacements still coming up)."""
        in_progress: set[str] = set()
        protected: set[str] = set()
        for raw in list(self.world.nodes):
            name = _name(raw)
            annotations = (raw.get("metadata") or {}).get("annotations") or {}
            if k8s_nodes.has_taint(raw, k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule"):
                in_progress.add(name)
                # Its replacement takes the pods this drain evicts: not a candidate while that goes on.
                protected.update(self._nodes_of(replacement_ids(raw)))
                self._continue(raw)
            elif annotations.get(REPLACEMENT_ANNOTATION):
                in_progress.add(name)
                protected.update(self._await_replacement(raw))
        return in_progress, protected

    def _nodes_of(self, instance_ids: Iterable[str]) -> list[str]:
        return [_name(n) for n in map(self.world.node_for_instance, instance_ids) if n is not None]

    def _continue(self, raw: dict[str, Any]) -> None:
        name = _name(raw)
        annotations = (raw.get("metadata") or {}).get("annotations") or {}
        reason = annotations.get(REASON_ANNOTATION, "")
        if self.dry_run:
            self.report.terminations.append({"node": name, "state": "draining", "reason": reason or "under way"})
            return
        if self.time_left() <= 0:
            return
        try:
            step = continue_termination(
                self.rt, self.world, raw, involuntary=reason in FORCEFUL, deadline_monotonic=self.deadline,
                batch=self.batch,
            )
        except (ApiException, ClientError, BotoCoreError) as exc:
            self.report.errors.append(f"node {name}: termination step failed: {exc}")
            log.warning("termination step failed", extra={"node": name, "error": str(exc)})
            return
        if step.state == TERMINATING:
            self.terminating.append((step, reason, annotations))
            return
        self._record(step, reason, annotations)

    def flush_terminations(self) -> None:
        """Terminate the instances of the nodes drained empty so far, together (see TerminationBatch)."""
        waiting, self.terminating = self.terminating, []
        if not waiting:
            return
        try:
            self.batch.flush()
        except (ApiException, ClientError, BotoCoreError) as exc:
            for step, _, _ in waiting:
                self.report.errors.append(f"node {step.node}: terminating its instance failed: {exc}")
            log.warning("terminating instances failed", extra={"nodes": [s.node for s, _, _ in waiting],
                                                               "error": str(exc)})
            return
        for step, reason, notes in waiting:
            self._record(step, reason, notes)

    def _record(self, step: TerminationStep, reason: str, annotations: Mapping[str, str]) -> None:
        name = step.node
        entry = step.summary()
        if reason:
            entry["disruptionReason"] = reason
        self.report.terminations.append(entry)
        if step.done:
            started = clock.parse_timestamp(annotations.get(STARTED_ANNOTATION))
            if started is not None:
                telemetry.seconds(telemetry.DRAIN_SECONDS, max(0.0, (self.now() - started).total_seconds()))
            telemetry.count(telemetry.NODES_TERMINATED, 1, **{telemetry.REASON_DIMENSION: reason or "Unknown"})
            self.event(name, EVENT_TERMINATED, f"terminated ({reason or 'disrupted'}): instance {step.instance_id}")

    def _await_replacement(self, raw: dict[str, Any]) -> list[str]:
        """A node whose replacement was launched: drain it once every replacement is Ready."""
        name = _name(raw)
        annotations = (raw.get("metadata") or {}).get("annotations") or {}
        ids = [i for i in annotations.get(REPLACEMENT_ANNOTATION, "").split(",") if i]
        waiting, failed, protected = [], [], []
        for iid in ids:
            node = self.world.node_for_instance(iid)
            inst = self.world.instance(iid)
            if node is not None:
                protected.append(_name(node))
                if not k8s_nodes.readiness(node).ready:
                    waiting.append(iid)
            elif inst is None:
                failed.append(f"instance {iid} is gone")
            else:
                # Counted from the decision (when the launch was made) as well as from EC2's launch time,
                # whichever is later: both are the same moment unless the clocks disagree.
                moments = [m for m in (inst.launch_time, clock.parse_timestamp(annotations.get(STARTED_ANNOTATION)))
                           if m is not None]
                launched = max(moments) if moments else None
                timeout = self.rt.settings.registration_timeout_seconds
                if launched is not None and (self.world.now - launched).total_seconds() > timeout:
                    failed.append(f"instance {iid} did not register within {int(timeout)}s")
                else:
                    waiting.append(iid)
        if failed:
            why = "; ".join(failed)
            self.report.notes.append(f"node {name}: replacement failed ({why}); disruption called off")
            self.event(name, EVENT_REPLACEMENT_FAILED, f"disruption called off: {why}", k8s_events.WARNING)
            if not self.dry_run:
                self.annotate(name, {REPLACEMENT_ANNOTATION: None, REASON_ANNOTATION: None, STARTED_ANNOTATION: None})
                with contextlib.suppress(k8s_nodes.NodeGoneError):
                    k8s_nodes.uncordon(self.rt.api, name)
            return protected
        if waiting:
            self.report.waiting.append({"node": name, "replacements": ids, "notReady": waiting})
            return protected
        if self.dry_run:
            self.report.terminations.append({"node": name, "state": "replacement ready"})
            return protected
        try:
            change = k8s_nodes.mark_disrupted(self.rt.api, name)
        except k8s_nodes.NodeGoneError:
            return protected
        self._continue(change.node)
        return protected

    # -- 2. clean up --------------------------------------------------------------------------------------

    def clean_up(self) -> None:
        self._unregistered()
        self._orphaned_nodes()
        self._launch_templates()

    def _unregistered(self) -> None:
        timeout = self.rt.settings.registration_timeout_seconds
        stale = ec2_instances.unregistered(self.world.unregistered_instances(), (), timeout, now=self.world.now)
        ids = [i.instance_id for i in stale]
        if not ids:
            return
        if not self.dry_run:
            ids = ec2_instances.terminate(self.rt.aws.ec2, ids, self.rt.cluster).terminated
            if ids:
                telemetry.count(telemetry.NODES_TERMINATED, len(ids), **{telemetry.REASON_DIMENSION: ORPHANED})
        for iid in ids:
            self.log.info(
                f"terminated instance {iid}: no Node registered within {int(timeout)}s",
                extra={"instance_id": iid, "decision": ORPHANED, "dry_run": self.dry_run},
            )
        self.report.cleanup["unregisteredInstances"] = ids

    def _orphaned_nodes(self) -> None:
        """Nodes of this system whose instance EC2 says is gone (or never knew)."""
        suspects: dict[str, str] = {}
        for raw in self.world.nodes:
            iid = k8s_nodes.instance_id(raw)
            if not iid or self.world.instance(iid) is not None:
                continue
            suspects[iid] = _name(raw)
        if not suspects:
            return
        found = classify(self.rt.aws.ec2, suspects, self.rt.cluster)
        removed = []
        for iid, name in suspects.items():
            raw = self.raw_by_name.get(name) or {}
            owned = found.owned.get(iid)
            if owned is not None:
                if owned.state not in GONE_STATES:
                    continue  # stopped, not gone: repair looks after it
            elif not (_pool_label(raw) in self.world.nodepools and found.missing(iid)):
                continue  # someone else's instance, or a node nodescale never made
            if not self.dry_run and not k8s_nodes.delete_node(self.rt.api, name):
                continue
            removed.append(name)
            self.log.info(
                f"deleted node {name}: its instance {iid} no longer exists",
                extra={"node": name, "instance_id": iid, "decision": ORPHANED, "dry_run": self.dry_run},
            )
        self.world.nodes = [n for n in self.world.nodes if _name(n) not in removed]
        self.world.index()
        self.report.cleanup["orphanedNodes"] = removed

    def _launch_templates(self) -> None:
        in_use: set[str] = set()
        for pool in self.world.nodepools.values():
            node_class = self.world.nodeclasses.get(pool.node_class)
            if node_class is None:
                return
            try:
                in_use |= self.rt.launcher.current_template_names(pool, node_class)
            except Exception as exc:  # noqa: BLE001 - any failure to render today's templates means keep them all
                self.report.notes.append(f"launch templates kept: NodePool {pool.name} cannot be resolved ({exc})")
                return
        if not in_use:
            return  # no pools: nothing proves a template unused
        if self.dry_run:
            current = launchtemplates.list_managed(self.rt.aws.ec2, self.rt.cluster)
            self.report.cleanup["launchTemplates"] = sorted(
                t["LaunchTemplateName"] for t in current if t["LaunchTemplateName"] not in in_use
            )
            return
        self.report.cleanup["launchTemplates"] = launchtemplates.cleanup_unused(
            self.rt.aws.ec2, self.rt.cluster, in_use, TEMPLATE_MIN_AGE_SECONDS, now=self.world.now
        )

    # -- 3..7 decisions ------------------------------------------------------------------------------------

    def views(self) -> tuple[list[NodeView], dict[str, Mapping[str, int]]]:
        """This system's nodes: a known NodePool and an instance tagged for this cluster."""
        out: list[NodeView] = []
        capacities: dict[str, Mapping[str, int]] = {}
        for raw in self.world.nodes:
            pool = _pool_label(raw)
            iid = k8s_nodes.instance_id(raw)
            inst = self.world.instance(iid) if iid else None
            if pool not in self.world.nodepools or inst is None:
                continue
            name = _name(raw)
            view = NodeView.from_node(raw, self.world.pods_by_node.get(name, []), self.world.price_of(inst))
            if not view.capacity_type:
                view.capacity_type = inst.capacity_type
            out.append(view)
            capacities[name] = res.parse_resource_list((raw.get("status") or {}).get("capacity") or {}, "capacity")
        return out, capacities

    def cloud_drift(self, views: list[NodeView], skip: set[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        broken: set[str] = set()
        for v in views:
            if v.name in skip or v.nodepool in broken:
                continue
            pool = self.world.nodepools[v.nodepool]
            node_class = self.world.nodeclasses.get(pool.node_class)
            inst = self.world.instance(v.instance_id)
            if node_class is None or inst is None:
                continue
            try:
                why = self.rt.launcher.drift(inst, pool, node_class)
            except Exception as exc:  # noqa: BLE001 - an unresolvable node class is no reason to replace nodes
                broken.add(v.nodepool)
                self.report.notes.append(f"drift of NodePool {v.nodepool} not checked: {exc}")
                continue
            if why:
                out[v.name] = why
        return out

    def impaired_since(self, views: list[NodeView], skip: set[str]) -> dict[str, datetime]:
        wanted = {v.instance_id: v for v in views if v.name not in skip}
        if not wanted:
            return {}
        try:
            impaired = ec2_instances.impaired_instances(self.rt.aws.ec2)
        except (ClientError, BotoCoreError) as exc:
            self.report.notes.append(f"EC2 status checks not read: {exc}")
            return {}
        out: dict[str, datetime] = {}
        for iid, v in wanted.items():
            recorded = clock.parse_timestamp(v.annotations.get(IMPAIRED_SINCE))
            if iid in impaired:
                if recorded is None:
                    recorded = self.world.now
                    self.annotate(v.name, {IMPAIRED_SINCE: clock.format_timestamp(recorded)})
                out[v.name] = recorded
            elif recorded is not None:
                self.annotate(v.name, {IMPAIRED_SINCE: None})
        return out

    def simulator(self, in_progress: set[str]) -> Simulator:
        world = self.world
        everything = world.existing_nodes(exclude=in_progress)
        pools = list(world.nodepools.values())
        types = world.types_by_pool()
        daemons = world.daemonset_pods()
        labels = world.labels_by_pool()
        unavailable = set(world.unavailable)
        pending = list(world.pending)

        def simulate(nodes: Sequence[NodeView]) -> Simulation:
            gone = {n.name for n in nodes}
            pods = [p for n in nodes for p in n.pods]
            mine = {p.uid or p.key for p in pods}
            plan = solve(
                pods + pending, pools, types, [e for e in everything if e.name not in gone], daemons,
                unavailable, node_labels_by_pool=labels,
            )
            sim = Simulation()
            sim.unschedulable = [(u.pod.key, u.reason) for u in plan.unschedulable if (u.pod.uid or u.pod.key) in mine]
            for claim in plan.node_claims:
                if not any((p.uid or p.key) in mine for p in claim.pods):
                    continue  # capacity for pending pods: the provisioner's business
                sim.replacements.append(replacement_from_claim(claim, types.get(claim.nodepool, [])))
            return sim

        return simulate

    def decide(self, in_progress: set[str], protected: set[str]) -> None:
        views, capacities = self.views()
        self.report.gauges = cluster_gauges(views, capacities, self.world.nodepools).to_dict()
        _emit_gauges(views, capacities, self.world)
        skip = in_progress | protected
        inputs = planner.Inputs(
            now=self.world.now,
            nodepools=self.world.nodepools,
            views=views,
            in_progress=frozenset(in_progress),
            protected=frozenset(protected),
            cloud_drift=self.cloud_drift(views, skip),
            impaired_since=self.impaired_since(views, skip),
            pdbs=self.world.pdbs,
            repair_threshold_seconds=self.rt.settings.repair_threshold_seconds,
            consolidation_seconds=max(1.0, self.time_left() * CONSOLIDATION_SHARE),
        )
        outcome = planner.plan(inputs, self.simulator(in_progress))
        by_name = {v.name: v for v in views}
        for name in outcome.mark_empty:
            self.annotate(name, {EMPTY_SINCE: clock.format_timestamp(self.world.now)})
        for name in outcome.clear_empty:
            self.annotate(name, {EMPTY_SINCE: None})
        for note in outcome.notes:
            self.report.notes.append(note)
            self.log.info(note)
        for refusal in outcome.refusals:
            self._refused(refusal)
        if self.events_skipped:
            self.report.notes.append(
                f"{self.events_skipped} refusal(s) logged without a node event (at most {MAX_REFUSAL_EVENTS} a run)"
            )
        for decision in outcome.decisions:
            self._act(decision, by_name)

    def _refused(self, r: planner.Blocked) -> None:
        message = r.message
        self.report.refused.append({"nodes": r.nodes, "reason": r.reason, "blockedBy": r.kind, "why": message})
        self.log.info(message, extra={"nodes": r.nodes, "reason": r.reason, "blocked_by": r.kind})
        if r.kind == planner.BLOCKED_BY_BUDGET:
            telemetry.count(telemetry.BUDGET_BLOCKED, len(r.nodes), **{telemetry.REASON_DIMENSION: r.reason})
        elif r.kind == planner.BLOCKED_BY_DO_NOT_DISRUPT:
            telemetry.count(telemetry.DO_NOT_DISRUPT_BLOCKED, len(r.nodes), **{telemetry.REASON_DIMENSION: r.reason})
        for node in r.nodes:
            if self.refusal_events >= MAX_REFUSAL_EVENTS:
                self.events_skipped += 1
                continue
            self.refusal_events += 1
            self.event(node, EVENT_BLOCKED, message)

    def _act(self, d: Decision, views: Mapping[str, NodeView]) -> None:
        entry: dict[str, Any] = {
            "nodes": d.nodes, "reason": d.reason, "action": d.action, "detail": d.detail,
            "savingPerHour": round(d.saving_per_hour, 6), "pods": len(d.pods),
        }
        if isinstance(d.replacement, Replacement):
            entry["replacement"] = {"nodePool": d.replacement.nodepool, "instanceType": d.replacement.instance_type,
                                    "pricePerHour": d.replacement.price}
        self.report.decisions.append(entry)
        message = f"{d.reason}: {d.detail}"
        self.log.info(f"disrupting {', '.join(d.nodes)}: {message}",
                      extra={"nodes": d.nodes, "reason": d.reason, "action": d.action, "dry_run": self.dry_run})
        if self.dry_run:
            return
        telemetry.count(telemetry.DECISIONS, 1, **{telemetry.REASON_DIMENSION: d.reason})
        if d.saving_per_hour > 0:
            telemetry.gauge(telemetry.PRICE_SAVED, d.saving_per_hour, telemetry.Unit.NoUnit,
                            **{telemetry.REASON_DIMENSION: d.reason})
        replacements: list[str] = []
        if d.action == "replace":
            pods = [p for name in d.nodes for p in (views[name].pods if name in views else [])]
            launched = launch_capacity(self.rt, self.world, pods, exclude_nodes=d.nodes,
                                       reason=f"replacement for {d.reason.lower()} node(s) {', '.join(d.nodes)}")
            if launched.unschedulable or (launched.planned and not launched.launches):
                why = launched.unschedulable[0][1] if launched.unschedulable else "; ".join(launched.error_messages)
                entry["action"] = "none"
                entry["error"] = f"replacement could not be launched: {why}"
                for node in d.nodes:
                    self.event(node, EVENT_BLOCKED, f"{d.reason}: replacement could not be launched: {why}",
                               k8s_events.WARNING)
                self.report.errors.append(f"{', '.join(d.nodes)}: replacement could not be launched: {why}")
                return
            replacements = [x.instance_id for x in launched.launches if x.instance_id]
            replacements += [i for i in (self._in_flight_id(n) for n in launched.waiting) if i]
            entry["replacementInstances"] = replacements
        started = clock.format_timestamp(self.world.now)
        for node in d.nodes:
            annotations = {REASON_ANNOTATION: d.reason, STARTED_ANNOTATION: started}
            if replacements:
                annotations[REPLACEMENT_ANNOTATION] = ",".join(sorted(set(replacements)))
                if not self.annotate(node, annotations):
                    continue
                k8s_nodes.cordon(self.rt.api, node)
                self.event(node, EVENT_REPLACING, f"{message}; waiting for replacement {', '.join(replacements)}")
                continue
            if not self.annotate(node, annotations):
                continue
            self.event(node, EVENT_DECISION, message)
            change = k8s_nodes.mark_disrupted(self.rt.api, node)
            self._continue(change.node)

    def _in_flight_id(self, node_name: str) -> str | None:
        if node_name.startswith(IN_FLIGHT_PREFIX):
            return node_name[len(IN_FLIGHT_PREFIX):]
        raw = self.raw_by_name.get(node_name)
        return k8s_nodes.instance_id(raw) if raw else None


def replacement_from_claim(claim: NodeClaim, types: Sequence[InstanceType]) -> Replacement:
    """The claim's options as (type, price, capacity type), cheapest first, within its zones and capacity types."""
    by_name = {t.name: t for t in types}
    options: list[tuple[str, float, str]] = []
    zones, cts = set(claim.zones), set(claim.capacity_types)
    for name in claim.instance_types:
        it = by_name.get(name)
        if it is None:
            continue
        for o in it.offerings:
            if o.available and o.zone in zones and o.capacity_type in cts:
                options.append((name, o.price, o.capacity_type))
    options.sort(key=lambda x: (x[1], x[0]))
    best: dict[tuple[str, str], tuple[str, float, str]] = {}
    for opt in options:
        best.setdefault((opt[0], opt[2]), opt)
    ordered = sorted(best.values(), key=lambda x: (x[1], x[0]))
    return Replacement(claim.nodepool, claim.price, ordered, list(claim.capacity_types), [p.key for p in claim.pods])


def _emit_gauges(views: Iterable[NodeView], capacities: Mapping[str, Mapping[str, int]], world: World) -> None:
    g = cluster_gauges(views, capacities, world.nodepools)
    for (pool, ct), n in g.nodes.items():
        telemetry.gauge(telemetry.NODES, n, telemetry.Unit.Count,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.CAPACITY_TYPE_DIMENSION: ct})
    telemetry.gauge(telemetry.PRICE_PER_HOUR, round(g.price_per_hour, 6))
    telemetry.gauge(telemetry.MANAGED_CPU, g.cpu, telemetry.Unit.Count)
    telemetry.gauge(telemetry.MANAGED_MEMORY_GIB, round(g.memory_gib, 3), telemetry.Unit.Gigabytes)
    for (pool, resource), value in g.usage.items():
        telemetry.gauge(telemetry.NODEPOOL_USAGE, value,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.RESOURCE_DIMENSION: resource})
    for (pool, resource), value in g.limits.items():
        telemetry.gauge(telemetry.NODEPOOL_LIMIT, value,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.RESOURCE_DIMENSION: resource})


def _name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def _pool_label(node: Mapping[str, Any]) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return labels.get(wk.NODEPOOL) or labels.get(wk.LEGACY_PROVISIONER) or ""


def disrupt_once(rt: Runtime, *, dry_run: bool = False, deadline: float | None = None) -> dict[str, Any]:
    """One disruption run; ``deadline`` is a ``time.monotonic()`` value after which nothing new starts."""
    deadline = deadline if deadline is not None else time.monotonic() + DEFAULT_RUN_SECONDS
    rt.begin_invocation()
    world = read_world(rt)
    run = _Run(rt, world, dry_run, deadline)
    for error in world.config_errors:
        run.report.errors.append(f"configuration: {error}")
    in_progress, protected = run.finish_under_way()
    run.flush_terminations()
    run.clean_up()
    run.decide(in_progress, protected)
    run.flush_terminations()
    summary = run.report.to_dict()
    telemetry.logger().info("disruption summary", extra={"summary": summary})
    return summary


def replacement_ids(node: Mapping[str, Any]) -> list[str]:
    """The instances a node waits for before it is drained (empty when it waits for none)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(REPLACEMENT_ANNOTATION, "")
    return [i for i in raw.split(",") if i]

