"""The interruption use-case: an EventBridge event about EC2 instances, acted on safely.

    process(event, settings, runtime, account=..., deadline_monotonic=...) -> summary
        parse, ignore what is not ours (logged, counted), else handle each event id once
    handle_event(rt, event, ...) -> summary     the same without the idempotency record

For an instance this cluster owns (``nodescale.io/cluster`` tag) whose Node is registered:

- spot interruption warning, AWS Health scheduledChange, state change to stopping / stopped /
  shutting-down / terminated: taint ``karpenter.sh/disrupted:NoSchedule`` and cordon at once, then
  launch replacement capacity for the node's pods (same bin-packer and launch path as the
  provisioner, the failing spot offering excluded), then drain (PDB-paced evictions, retried with
  backoff in this invocation), and when empty terminate the instance and delete the Node. A spot
  warning also marks its offering unavailable in the shared table for the offering TTL (3 minutes).
- rebalance recommendation: a Kubernetes event on the node and a metric. A NodePool opts in to
  treating it like a spot warning with the annotation ``nodescale.io/rebalance: interrupt`` in its
  node template (``spec.template.metadata.annotations`` for karpenter.sh/v1 and v1beta1 NodePools,
  ``spec.annotations`` for a v1alpha5 Provisioner); a node carrying the annotation itself opts in too.
- state change to pending / running: nothing.

Repeats do no harm: a node already carrying the taint is not marked again, and its pods are planned
against what exists and is in flight (the replacement an earlier event launched), so nothing is
launched twice. A drain that outlives the invocation keeps the taint; the next run of this or the
disruption function continues it (``terminate.continue_termination``).

Bad input never raises (it is ignored with its reason); failures worth retrying (throttling, an API
server or EC2 that does not answer) do, so Lambda's retries and the dead-letter queue apply.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import clock, telemetry
from ..aws.idempotency import once_per_event
from ..aws.ownership import OwnedInstance, classify
from ..interruption import events
from ..k8s import drain as k8s_drain
from ..k8s import listing
from ..k8s import nodes as k8s_nodes
from ..k8s.events import WARNING, EventRecorder
from ..model import labels as wk
from ..model.pod import Pod
from ..runtime import Runtime
from ..settings import Settings
from . import terminate
from .world import World, read_nodes_and_pods, read_world

log = logging.getLogger(__name__)

REBALANCE_ANNOTATION = "nodescale.io/rebalance"
REBALANCE_INTERRUPT = "interrupt"
# Without a caller's deadline (CLI, tests), a drain keeps trying this long.
DEFAULT_DRAIN_SECONDS = 120.0
MAX_BACKOFF_SECONDS = 4.0

# Actions reported per instance.
DRAINED = "drained"  # empty: instance terminated, Node deleted
DRAINING = "draining"  # tainted, replacement started, pods left: a later run carries on
RECORDED = "recorded"  # rebalance recommendation noted
NOTHING = "none"  # nothing to do (running/pending, or no Node for the instance)
IGNORED = "ignored"  # not this cluster's

_EVENT_REASONS = {
    "SpotInterruption": "SpotInterrupted",
    "ScheduledChange": "InstanceScheduledChange",
    "InstanceStateChange": "InstanceStateChange",
    "RebalanceRecommendation": "RebalanceRecommendation",
}


@dataclass
class InstanceReport:
    instance_id: str
    kind: str
    node: str | None = None
    action: str = NOTHING
    reason: str = ""
    already_disrupted: bool = False
    replacement: dict[str, Any] | None = None
    evicted: list[str] = field(default_factory=list)
    blocked_by_pdb: list[str] = field(default_factory=list)
    blocked_total: int = 0
    instance_terminated: bool = False
    node_deleted: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"instanceId": self.instance_id, "kind": self.kind, "node": self.node,
                               "action": self.action}
        if self.reason:
            out["reason"] = self.reason
        if self.action in (DRAINED, DRAINING):
            out.update(
                alreadyDisrupted=self.already_disrupted,
                replacement=self.replacement,
                podsEvicted=len(self.evicted),
                podsBlockedByPdb=sorted(self.blocked_by_pdb),
                instanceTerminated=self.instance_terminated,
                nodeDeleted=self.node_deleted,
            )
        return out


@dataclass
class _Work:
    """An instance being taken out of service in this invocation."""

    intent: events.Intent
    instance: OwnedInstance
    node: dict[str, Any]
    report: InstanceReport

    @property
    def name(self) -> str:
        return terminate.node_name(self.node)


# ------------------------------------------------------------------------------------------ entry points


def process(
    event: object,
    settings: Settings,
    runtime: Callable[[], Runtime],
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    lambda_context: Any = None,
) -> dict[str, Any]:
    """What the Lambda handler and ``nodescale replay`` run for one event.

    ``runtime`` is only called for an event worth acting on, so bad input needs no clients at all.
    """
    parsed = events.parse(event, account, settings.region)
    if isinstance(parsed, events.Ignored):
        return ignored_summary(event, parsed)
    rt = runtime().begin_invocation()
    accepted = dict(event) if isinstance(event, Mapping) else {}  # parse() accepts only objects
    return once_per_event(
        lambda e: handle_event(rt, e, account=account, deadline_monotonic=deadline_monotonic),
        accepted,
        table=rt.settings.table_name,
        dynamodb=rt.aws.dynamodb,
        lambda_context=lambda_context,
    )


def ignored_summary(event: object, ignored: events.Ignored) -> dict[str, Any]:
    log.warning("event ignored", extra={"event_id": ignored.event_id, "reason": ignored.reason})
    telemetry.count(telemetry.IGNORED_EVENTS)
    return {"eventId": ignored.event_id, "detailType": _detail_type(event), "ignored": ignored.reason, "instances": []}


def handle_event(
    rt: Runtime,
    event: object,
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    reader: Callable[[Runtime], World] = read_world,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Act on one event (no idempotency record: see :func:`process`)."""
    started = time.monotonic()
    deadline = deadline_monotonic if deadline_monotonic is not None else started + DEFAULT_DRAIN_SECONDS
    parsed = events.parse(event, account, rt.settings.region)
    if isinstance(parsed, events.Ignored):
        return ignored_summary(event, parsed)
    intents = parsed
    reports = [InstanceReport(i.instance_id, i.kind) for i in intents]
    for intent in intents:
        telemetry.count(telemetry.INTERRUPTIONS, **{telemetry.KIND_DIMENSION: intent.kind})
    acting = [(i, r) for i, r in zip(intents, reports, strict=True) if i.action != events.NO_ACTION]
    for intent, report in zip(intents, reports, strict=True):
        if intent.action == events.NO_ACTION:
            report.reason = f"instance {intent.detail or 'state'}: no disruption, its node is expected to register"
    if acting:
        _act(rt, acting, deadline, reader, sleep)
    summary = {
        "eventId": intents[0].event_id,
        "detailType": _detail_type(event),
        "ignored": None,
        "instances": [r.to_dict() for r in reports],
        "seconds": round(time.monotonic() - started, 3),
    }
    log.info("interruption event handled", extra={"summary": summary})
    return summary


# ------------------------------------------------------------------------------------------ acting


def _act(
    rt: Runtime,
    acting: list[tuple[events.Intent, InstanceReport]],
    deadline: float,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
) -> None:
    owners = classify(rt.aws.ec2, [i.instance_id for i, _ in acting], rt.cluster)
    ours: list[tuple[events.Intent, InstanceReport, OwnedInstance]] = []
    for intent, report in acting:
        owned = owners.owned.get(intent.instance_id)
        if owned is None:
            report.action = IGNORED
            found = owners.not_ours.get(intent.instance_id)
            report.reason = found.message if found else "not this cluster's instance"
            log.warning("instance ignored", extra={"instance_id": intent.instance_id, "reason": report.reason})
            telemetry.count(telemetry.IGNORED_EVENTS)
        else:
            ours.append((intent, report, owned))
    if not ours:
        return
    by_instance = k8s_nodes.nodes_by_instance_id(listing.list_nodes(rt.api).items)
    recorder = EventRecorder(rt.api)
    work: list[_Work] = []
    rebalances: list[_Work] = []
    for intent, report, owned in ours:
        if intent.kind == "SpotInterruption":
            # Before anything else reads the offerings: nothing launches into a pool being reclaimed.
            rt.launcher.offerings.mark(
                [(owned.instance_type, owned.zone, wk.CAPACITY_SPOT)], f"spot interruption of {owned.instance_id}"
            )
        node = by_instance.get(intent.instance_id)
        if node is None:
            report.reason = "no Node names this instance (not registered yet, or already deleted)"
            continue
        report.node = terminate.node_name(dict(node))
        item = _Work(intent, owned, dict(node), report)
        if intent.action != events.INTERRUPT:
            rebalances.append(item)
        elif _mark(rt, recorder, item):
            work.append(item)
    if not work and not rebalances:
        return
    try:
        world = reader(rt)
    except Exception as exc:
        # The nodes are cordoned already; an unreadable world must not leave them to run out the notice
        # with their pods on board. Drain with what the API server says is on each node; the pods go
        # pending and the provisioner's next pass places them.
        log.exception("reading the world failed: draining without a replacement")
        world = read_nodes_and_pods(rt)
        for item in work:
            item.report.replacement = {"launched": [], "reason": f"not planned: reading the world failed ({exc})"}
        _drain(rt, world, work, deadline, sleep)
        return
    for item in rebalances:
        if _rebalance_opted_in(world, item):
            item.report.reason = f"NodePool opted in ({REBALANCE_ANNOTATION}: {REBALANCE_INTERRUPT})"
            if _mark(rt, recorder, item):
                work.append(item)
        else:
            item.report.action = RECORDED
            _event(recorder, item, "rebalance recommended: the instance is at elevated risk of interruption")
            telemetry.count(telemetry.INTERRUPTION_ACTIONS, **{telemetry.KIND_DIMENSION: item.intent.kind})
    for item in work:
        try:
            _replace(rt, world, item)
        except Exception as exc:  # one failed replacement never keeps a node from being drained
            log.exception("replacement failed", extra={"node": item.name})
            item.report.replacement = {"launched": [], "reason": f"replacement failed: {exc}"}
    _drain(rt, world, work, deadline, sleep)


def _mark(rt: Runtime, recorder: EventRecorder, item: _Work) -> bool:
    """Taint and cordon (first, it is what stops new pods landing), then note why and until when.

    False when the Node disappeared meanwhile: there is nothing left to drain.
    """
    item.report.already_disrupted = k8s_nodes.has_taint(item.node, k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule")
    try:
        change = k8s_nodes.mark_disrupted(rt.api, item.name)
    except k8s_nodes.NodeGoneError:
        item.report.reason = "the Node was deleted meanwhile: nothing to drain"
        return False
    item.report.action = DRAINING
    item.node = change.node
    when = item.intent.event_time
    if not item.report.already_disrupted and when is not None:
        telemetry.seconds(telemetry.EVENT_TO_CORDON, _since(when))
    annotations = (item.node.get("metadata") or {}).get("annotations") or {}
    patch: dict[str, str | None] = {}
    if not annotations.get(terminate.INTERRUPTION_ANNOTATION):
        patch[terminate.INTERRUPTION_ANNOTATION] = item.intent.kind
    deadline = item.intent.deadline
    known = terminate.interruption_deadline(item.node)
    if deadline is not None and (known is None or deadline < known):
        patch[terminate.DEADLINE_ANNOTATION] = clock.format_timestamp(deadline)
    if patch:
        try:
            item.node = k8s_nodes.patch_metadata(rt.api, item.name, annotations=patch)
        except k8s_nodes.NodeGoneError:
            item.report.reason = "the Node was deleted meanwhile: nothing to drain"
            item.report.action = NOTHING
            return False
    telemetry.count(telemetry.INTERRUPTION_ACTIONS, **{telemetry.KIND_DIMENSION: item.intent.kind})
    what = item.intent.detail or item.intent.kind
    _event(recorder, item, f"{item.intent.kind} ({what}) for instance {item.instance.instance_id}: "
                           "cordoned, replacing and draining", WARNING)
    return True


def _rebalance_opted_in(world: World, item: _Work) -> bool:
    annotations = (item.node.get("metadata") or {}).get("annotations") or {}
    if annotations.get(REBALANCE_ANNOTATION) == REBALANCE_INTERRUPT:
        return True
    labels = (item.node.get("metadata") or {}).get("labels") or {}
    name = item.instance.nodepool or labels.get(wk.NODEPOOL) or labels.get(wk.LEGACY_PROVISIONER) or ""
    pool = world.nodepools.get(name)
    return pool is not None and pool.annotations.get(REBALANCE_ANNOTATION) == REBALANCE_INTERRUPT


def pods_to_move(world: World, node_name: str) -> list[Pod]:
    """The node's pods a drain will evict, as pending pods for the bin-packer."""
    out = []
    for pod in world.pods_by_node.get(node_name, []):
        if pod.deleting or k8s_drain.skip_reason(pod.raw) is not None:
            continue
        out.append(dataclasses.replace(pod, node_name="", phase="Pending"))
    return out


def _replace(rt: Runtime, world: World, item: _Work) -> None:
    from .provision import launch_capacity  # the provisioner's module pulls in the watch machinery

    moving = pods_to_move(world, item.name)
    if not moving:
        item.report.replacement = {"launched": [], "reason": "no pods to move"}
        return
    # Pods already waiting (e.g. evicted by an earlier interruption) are planned alongside, so
    # capacity on its way for them is not promised to this node's pods too.
    keys = {p.key for p in moving}
    pods = [*[p for p in world.pending if p.key not in keys], *moving]
    unavailable = []
    if item.instance.capacity_type == wk.CAPACITY_SPOT:
        unavailable.append((item.instance.instance_type, item.instance.zone, wk.CAPACITY_SPOT))
    outcome = launch_capacity(
        rt,
        world,
        pods,
        exclude_nodes={item.name, item.instance.instance_id},
        extra_unavailable=unavailable,
        reason=f"replacing {item.name} ({item.intent.kind})",
    )
    item.report.replacement = {
        "launched": [launch.to_dict() for launch in outcome.launches],
        "waitingOnInFlight": sorted(outcome.waiting),
        "placedOnExisting": outcome.placed_existing,
        "unschedulable": [{"pod": p, "reason": why} for p, why in outcome.unschedulable],
        "errors": dict(outcome.errors),
    }
    if outcome.launches and item.intent.event_time is not None:
        telemetry.seconds(telemetry.EVENT_TO_REPLACEMENT, _since(item.intent.event_time))


def _drain(rt: Runtime, world: World, work: list[_Work], deadline: float, sleep: Callable[[float], None]) -> None:
    """Drain rounds over every node being taken out, until all are gone or time runs out."""
    active = {item.name: item for item in work}
    delay = 0.5
    while active:
        retry_after = 0.0
        blocked = False
        for name, item in list(active.items()):
            try:
                fresh = k8s_nodes.get_node(rt.api, name)
            except k8s_nodes.NodeGoneError:
                # Someone else finished it (the disruption function, or EC2's terminated instance).
                item.report.action = DRAINED
                item.report.reason = item.report.reason or "the Node was deleted meanwhile"
                del active[name]
                continue
            step = terminate.continue_termination(rt, world, fresh, involuntary=True, deadline_monotonic=deadline)
            result = step.drain
            if result is not None:
                item.report.evicted = list(dict.fromkeys([*item.report.evicted, *result.evicted]))
                item.report.blocked_by_pdb = list(result.blocked_by_pdb)
                item.report.blocked_total += len(result.blocked_by_pdb)
                if result.blocked_by_pdb:
                    telemetry.count(telemetry.EVICTIONS_BLOCKED, len(result.blocked_by_pdb))
                retry_after = max(retry_after, result.retry_after)
                blocked = blocked or bool(result.blocked_by_pdb or result.failed)
            item.report.instance_terminated = item.report.instance_terminated or step.instance_terminated
            item.report.node_deleted = item.report.node_deleted or step.node_deleted
            if step.state == terminate.TERMINATED:
                item.report.action = DRAINED
                if item.intent.event_time is not None:
                    telemetry.seconds(telemetry.EVENT_TO_EMPTY, _since(item.intent.event_time))
                del active[name]
            elif step.state == terminate.SKIPPED:
                item.report.reason = step.reason
                del active[name]
        if not active:
            return
        # Evictions just accepted need a moment; a blocked budget needs replacements to become Ready.
        pause = max(retry_after, delay if blocked else 0.25) * random.uniform(0.8, 1.2)
        if time.monotonic() + pause >= deadline:
            for item in active.values():
                item.report.reason = "pods left when this invocation's time ran out; the taint stays and the next run continues"
            return
        sleep(pause)
        delay = min(delay * 2, MAX_BACKOFF_SECONDS) if blocked else 0.5


def _event(recorder: EventRecorder, item: _Work, message: str, type_: str = "Normal") -> None:
    reason = _EVENT_REASONS.get(item.intent.kind, item.intent.kind)
    uid = (item.node.get("metadata") or {}).get("uid") or ""
    try:
        recorder.node(item.name, reason, message, type_, uid=uid)
    except ApiException as exc:
        # An event is a courtesy: the action it describes must not fail because of it.
        log.warning("could not record a node event", extra={"node": item.name, "status": exc.status})


def _since(moment: datetime) -> float:
    return max(0.0, (clock.now() - moment).total_seconds())


def _detail_type(event: object) -> str | None:
    value = event.get("detail-type") if isinstance(event, Mapping) else None
    return value if isinstance(value, str) else None
