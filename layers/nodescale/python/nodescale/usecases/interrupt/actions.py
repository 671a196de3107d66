"""Carrying out the interruption function's actions on one Node: mark, record, replace, drain.

What to do was decided already (``interruption.actions.action_for``); these functions talk to the
API server, EC2 (through the provisioner's launch path) and the metrics, and fill in each
instance's ``InstanceReport``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import clock, telemetry
from ...aws.ownership import OwnedInstance
from ...disruption import drain_policy
from ...interruption.actions import TERMINATING_ON_INTERRUPTION, Outcome, Reason, notice, terminating_message
from ...interruption.intents import Intent
from ...k8s import client as k8s_client
from ...k8s import drain as k8s_drain
from ...k8s import listing
from ...k8s import nodes as k8s_nodes
from ...k8s.events import WARNING, EventRecorder, ObjectRef
from ...model import labels as wk
from ...model.node import ClusterNode
from ...model.pod import Pod
from ...runtime import Runtime
from .. import terminate, world_sources
from ..leaving import leaving_pods, reschedulable
from ..provision.capacity import launch_capacity
from ..provision.launch import Launch, LaunchOutcome, PodReason
from ..side_by_side import side_by_side
from ..world import World

log = logging.getLogger(__name__)

# The drain backoff's cap here: a spot notice is two minutes, so a budget that frees up is retried soon.
MAX_BACKOFF_SECONDS = 4.0
# Nodes whose first eviction round runs side by side, each evicting its pods EVICTION_WORKERS at a time: as
# many calls at once as the client keeps connections for.
NODES_AT_ONCE = max(1, k8s_client.POOL_MAXSIZE // k8s_drain.EVICTION_WORKERS)
# Pods of each node evicted before any node's others: its drain is under way at once (#33.3).
FIRST_PODS = 1


@dataclass(frozen=True)
class ReplacementReport:
    """What the joint plan did with one node's pods (its share of the launches, in-flight nodes and
    refusals), or why nothing was planned for them (``not_planned``)."""

    launched: list[Launch] = field(default_factory=list)
    waiting_on_in_flight: list[str] = field(default_factory=list)  # in-flight nodes its pods wait for
    placed_on_existing: int = 0  # its pods the plan put on registered nodes
    unschedulable: list[PodReason] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # of the whole pass
    not_planned: str | None = None

    @classmethod
    def none(cls, why: str) -> ReplacementReport:
        return cls(not_planned=why)

    def to_json(self) -> dict[str, Any]:
        launched = [launch.to_dict() for launch in self.launched]
        if self.not_planned is not None:
            return {"launched": launched, "reason": self.not_planned}
        return {"launched": launched, "waitingOnInFlight": self.waiting_on_in_flight,
                "placedOnExisting": self.placed_on_existing,
                "unschedulable": [u.to_json() for u in self.unschedulable], "errors": dict(self.errors)}


@dataclass(frozen=True)
class InstanceReport:
    """What was done for one instance of an event; each step makes the next with ``dataclasses.replace``."""

    instance_id: str
    kind: str
    node: str | None = None
    action: str = Outcome.NOTHING
    reason: str = ""
    already_disrupted: bool = False
    replacement: ReplacementReport | None = None
    evicted: tuple[str, ...] = ()
    blocked_by_pdb: tuple[str, ...] = ()
    blocked_total: int = 0
    instance_terminated: bool = False
    node_deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"instanceId": self.instance_id, "kind": self.kind, "node": self.node,
                               "action": self.action}
        if self.reason:
            out["reason"] = self.reason
        if self.action in (Outcome.DRAINED, Outcome.DRAINING):
            out.update(
                alreadyDisrupted=self.already_disrupted,
                replacement=None if self.replacement is None else self.replacement.to_json(),
                podsEvicted=len(self.evicted),
                podsBlockedByPdb=sorted(self.blocked_by_pdb),
                instanceTerminated=self.instance_terminated,
                nodeDeleted=self.node_deleted,
            )
        return out


@dataclass
class Work:
    """An instance of this cluster with a Node, being acted on in this invocation."""

    intent: Intent
    instance: OwnedInstance
    node: ClusterNode  # as last read or written (each patch's answer is parsed again)
    report: InstanceReport
    claim: ObjectRef | None = None  # the Node's NodeClaim, which Karpenter's events name too
    evicted_pods: list[Pod] = field(default_factory=list)  # evicted before the world was read, still to place
    evicted_at: datetime | None = None  # when that first eviction round started
    # The drain and the replacement plan update the report from two threads (``handle._replace_and_drain``).
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.node.name

    def update(self, **changes: Any) -> None:
        """The instance's report, with ``changes``: the report is frozen, the work item holds the latest one."""
        with self._lock:
            self.report = dataclasses.replace(self.report, **changes)


def mark_offerings(rt: Runtime, reclaimed: Sequence[OwnedInstance]) -> None:
    """The (type, zone, spot) offerings of the instances being reclaimed unavailable, in one write."""
    ids = [owned.instance_id for owned in reclaimed]
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    rt.launcher.offerings.mark(sorted({(owned.instance_type, owned.zone, wk.CAPACITY_SPOT) for owned in reclaimed}),
                               f"spot interruption of {ids[0]}{more}")


def mark(rt: Runtime, recorder: EventRecorder, item: Work, announce: bool = True, count: bool = True) -> bool:
    """Taint and cordon (it is what stops new pods landing) and note why and until when, in one write on the
    node as last read (a batch's cordons wait on these writes, #33.3), then (unless not ``announce``: the
    caller does it once the drain is under way, see :func:`announce_marked`) say so. Without ``count`` the
    action is counted by :func:`count_action` once the caller knows it acts on it (a cordon made ahead of a
    batch's claims, ``ahead.py``, may be for an event handled already).

    False when the Node disappeared meanwhile: there is nothing left to drain.
    """
    already = item.node.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule")
    item.update(already_disrupted=already)
    try:
        change = k8s_nodes.mark_disrupted(rt.api, item.name, current=item.node.raw,
                                          annotations=lambda known: _interruption_annotations(item.intent, known))
    except k8s_nodes.NodeGoneError:
        item.update(reason=Reason.NODE_GONE)
        return False
    item.update(action=Outcome.DRAINING)
    item.node = ClusterNode.from_dict(change.node)
    when = item.intent.event_time
    if not already and when is not None:
        telemetry.seconds(telemetry.EVENT_TO_CORDON, since(when))
    if count:
        count_action(item)
    if announce:
        announce_marked(recorder, item)
    return True


def count_action(item: Work) -> None:
    telemetry.count(telemetry.INTERRUPTION_ACTIONS, **{telemetry.KIND_DIMENSION: item.intent.kind})


def announce_marked(recorder: EventRecorder, item: Work) -> None:
    """Karpenter's events for a node marked for an interruption: the message's own and TerminatingOnInterruption."""
    notify(recorder, item)
    node_event(recorder, item, TERMINATING_ON_INTERRUPTION, terminating_message("Node"), WARNING,
               claim_message=terminating_message("NodeClaim"))


def _interruption_annotations(intent: Intent, annotations: Mapping[str, str]) -> dict[str, str | None]:
    """The first interruption's kind, and the earliest deadline any event gave (a repeat keeps both)."""
    patch: dict[str, str | None] = {}
    if not annotations.get(terminate.INTERRUPTION_ANNOTATION):
        patch[terminate.INTERRUPTION_ANNOTATION] = intent.kind
    deadline = intent.deadline
    known = clock.parse_timestamp(annotations.get(terminate.DEADLINE_ANNOTATION))
    if deadline is not None and (known is None or deadline < known):
        patch[terminate.DEADLINE_ANNOTATION] = clock.format_timestamp(deadline)
    return patch


def record(recorder: EventRecorder, item: Work) -> None:
    item.update(action=Outcome.RECORDED)
    notify(recorder, item)
    count_action(item)


def pods_to_move(world: World, node_name: str, evicted: Sequence[Pod] = ()) -> list[Pod]:
    """The node's pods a drain will evict, and those it evicted already (``evicted``: the world may show
    them leaving, or not at all), as pending pods for the bin-packer."""
    out = {pod.key: dataclasses.replace(pod, deleting=False) for pod in evicted}
    for pod in world.pods_by_node.get(node_name, []):
        if pod.key not in out:
            out[pod.key] = pod
    return reschedulable(out.values())


def evict_at_once(rt: Runtime, work: list[Work], deadline: float) -> list[tuple[Work, drain_policy.DrainResult]]:
    """The first eviction round of every node in ``work``, side by side, before the world is read and the
    replacements planned: as Karpenter's interruption controller, the drain starts the moment the node is
    tainted, and the pods evicted are planned with the rest (``replace``). Each node's pods are read on
    their own (a list by node name), which is all a drain needs. Every node's first pod goes before any
    node's others (a hundred nodes' evictions, a node at a time, started the last node's drain seconds after
    the first's, #33.3). A node whose round fails is left to the drain rounds that follow. The rounds that
    ran, for :func:`say_evicted`."""
    if not work or time.monotonic() >= deadline:
        return []
    now = clock.now()
    firsts = side_by_side(lambda item: _first_round(rt, item, now, FIRST_PODS), work, k8s_client.POOL_MAXSIZE,
                          "nodescale-interrupt")
    started = [(item, first) for item, first in zip(work, firsts, strict=True) if first is not None]
    rests = side_by_side(lambda one: _rest_of_round(rt, one[0], one[1], now), started, NODES_AT_ONCE,
                         "nodescale-interrupt")
    done = []
    for (item, (raw, first)), rest in zip(started, rests, strict=True):
        for result in (first, rest):
            if result is not None:
                _note_drain(item, result)
        gone = set(item.report.evicted)
        item.evicted_pods = [pod for pod in _pods(raw) if pod.key in gone]
        item.evicted_at = now
        done.append((item, _joined(first, rest)))
    return done


def _joined(first: drain_policy.DrainResult, rest: drain_policy.DrainResult | None) -> drain_policy.DrainResult:
    """The node's first round as one result (its events name every pod evicted)."""
    if rest is None:
        return first
    return dataclasses.replace(rest, evicted=[*first.evicted, *rest.evicted],
                               deleted=[*first.deleted, *rest.deleted])


def say_evicted(rt: Runtime, done: list[tuple[Work, drain_policy.DrainResult]]) -> None:
    """The events of the first eviction rounds (one per pod evicted), once every node's evictions are under
    way and its NodeClaim is known."""
    side_by_side(lambda one: terminate.say_drained(rt, one[0].node, one[0].claim, one[1], None), done,
                 NODES_AT_ONCE, "nodescale-events")


def _first_round(rt: Runtime, item: Work, now: datetime, limit: int
                 ) -> tuple[list[dict[str, Any]], drain_policy.DrainResult] | None:
    """The node's pods, listed, and the first ``limit`` of them evicted."""
    try:
        raw = listing.pods_on_node(rt.api, item.name)
    except ApiException as exc:
        _round_failed(item, exc)
        return None
    result = _round(rt, item, raw, now, limit)
    return None if result is None else (raw, result)


def _rest_of_round(rt: Runtime, item: Work, first: tuple[list[dict[str, Any]], drain_policy.DrainResult],
                   now: datetime) -> drain_policy.DrainResult | None:
    """The rest of the node's first round: its listed pods but those the first step took."""
    raw, result = first
    taken = {*result.evicted, *result.deleted}
    return _round(rt, item, [pod for pod in raw if _key(pod) not in taken], now)


def _round(rt: Runtime, item: Work, pods: list[dict[str, Any]], now: datetime, limit: int | None = None
           ) -> drain_policy.DrainResult | None:
    """One eviction round over ``pods`` of the node (None if the API server refused it)."""
    try:
        return k8s_drain.drain_round(rt.api, item.name, involuntary=True, pods=pods, now=lambda: now,
                                     grace_period_seconds=terminate.notice_grace_cap(item.node, now), limit=limit)
    except ApiException as exc:
        _round_failed(item, exc)
        return None


def _round_failed(item: Work, exc: ApiException) -> None:
    log.warning("first eviction round failed: the drain rounds carry on", extra={"node": item.name,
                                                                                   "status": exc.status})


def _key(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _pods(raw: list[dict[str, Any]]) -> list[Pod]:
    out = []
    for one in raw:
        try:
            out.append(Pod.from_dict(one))
        except (TypeError, ValueError, AttributeError):
            continue  # the world's read reports a pod it cannot read; here it is only not planned twice
    return out


def _volume_topology(rt: Runtime, world: World, work: list[Work]) -> None:
    """What their volumes require of a node, for the pods evicted before the world was read (a StatefulSet's
    pod on a zonal EBS volume is planned in the volume's zone, #31.1), as the world gives it to its own pods.
    One whose volumes cannot be honoured is left out of the plan, as the world leaves it out."""
    evicted = [pod.raw for item in work for pod in item.evicted_pods]
    if not evicted:
        return
    objects = world.volumes if world.volumes.claims else world_sources.read_volumes(rt, evicted)
    for item in work:
        kept = []
        for pod in item.evicted_pods:
            why = world_sources.apply_volume_topology(pod, objects)
            if why is None:
                kept.append(pod)
            else:
                log.warning("evicted pod not planned: %s", why, extra={"pod": pod.key, "node": item.name})
        item.evicted_pods = kept


def _without_recreations(pending: list[Pod], evicted: list[Pod], since: datetime) -> list[Pod]:
    """The pending pods less, per controller, as many as were evicted early, among those made since the
    evictions (``since``): those are the evicted pods made again (a ReplicaSet's under new names), which the
    plan counts as the evicted ones already. A pod pending from before (an earlier interruption's, waiting
    for capacity in flight) is never one of them; a recreation not made yet is planned by a later pass."""
    owed = Counter((p.namespace, p.owner_kind, p.owner_name) for p in evicted if p.owner_name)
    cutoff = since.replace(microsecond=0)  # creation times are whole seconds
    dropped: set[str] = set()
    for pod in pending:
        owner = (pod.namespace, pod.owner_kind, pod.owner_name)
        if pod.owner_name and owed[owner] > 0 and pod.created is not None and pod.created >= cutoff:
            owed[owner] -= 1
            dropped.add(pod.key)
    return [pod for pod in pending if pod.key not in dropped]


def replace(rt: Runtime, world: World, work: list[Work]) -> World:
    """Launch replacements for the pods of every node in ``work``, planned together in one pass: planned one
    node at a time, the second node's pods would count on the in-flight node launched for the first node's
    pods, which has no room for them (the plan does not know what the first launch is for). Each node's
    report names what the plan did with its own pods. Returns the snapshot to go on with (the launch's)."""
    _volume_topology(rt, world, work)
    moving = {item.name: pods_to_move(world, item.name, item.evicted_pods) for item in work}
    items = [item for item in work if moving[item.name]]
    for item in work:
        if not moving[item.name]:
            item.update(replacement=ReplacementReport.none("no pods to move"))
    if not items:
        return world
    # Pods already waiting (e.g. evicted by an earlier interruption) and those still on other nodes being
    # taken out are planned alongside, as the provisioner plans them: capacity on its way for them is not
    # promised to these nodes' pods too.
    keys = {p.key for item in items for p in moving[item.name]}
    since = min((item.evicted_at for item in items if item.evicted_at is not None), default=None)
    others = leaving_pods(world, exclude={item.name for item in work})
    waiting = [p for p in [*world.pending, *others] if p.key not in keys]
    if since is not None:
        waiting = _without_recreations(waiting, [p for item in items for p in item.evicted_pods], since)
    pods = [*waiting, *[p for item in items for p in moving[item.name]]]
    unavailable = {(item.instance.instance_type, item.instance.zone, wk.CAPACITY_SPOT)
                   for item in items if item.instance.capacity_type == wk.CAPACITY_SPOT}
    exclude = {name for item in items for name in (item.name, item.instance.instance_id)}
    reason = (f"replacing {items[0].name} ({items[0].intent.kind})" if len(items) == 1
              else f"replacing {len(items)} interrupted nodes")
    try:
        outcome = launch_capacity(rt, world, pods, exclude_nodes=exclude, extra_unavailable=sorted(unavailable),
                                  reason=reason)
    except Exception as exc:  # a failed replacement never keeps the nodes from being drained
        log.exception("replacement failed", extra={"nodes": [item.name for item in items]})
        for item in items:
            item.update(replacement=ReplacementReport.none(f"replacement failed: {exc}"))
        return world
    for item in items:
        _report_replacement(item, {p.key for p in moving[item.name]}, outcome)
    return outcome.world or world


def _report_replacement(item: Work, mine: set[str], outcome: LaunchOutcome) -> None:
    """The node's share of the joint plan: the launches, in-flight nodes and refusals its pods got."""
    launched = [launch for launch in outcome.launches if mine & set(launch.pods)]
    waiting = sorted(node for node, on in outcome.waiting.items() if mine & set(on))
    unschedulable = [PodReason(p, why) for p, why in outcome.unschedulable if p in mine]
    elsewhere = {p for launch in launched for p in launch.pods} | {
        p for node in waiting for p in outcome.waiting[node]} | {u.pod for u in unschedulable}
    item.update(replacement=ReplacementReport(launched, waiting, len(mine - elsewhere), unschedulable,
                                              dict(outcome.errors)))
    if launched and item.intent.event_time is not None:
        telemetry.seconds(telemetry.EVENT_TO_REPLACEMENT, since(item.intent.event_time))


def drain(rt: Runtime, world: World, work: list[Work], deadline: float, sleep: Callable[[float], None]) -> None:
    """Drain rounds over every node being taken out, until all are gone or time runs out."""
    active = {item.name: item for item in work}
    done = k8s_drain.drain_rounds(lambda: _drain_round(rt, world, active, deadline), until=deadline,
                                  max_delay=MAX_BACKOFF_SECONDS, sleep=sleep)
    if not done:
        for item in active.values():
            item.update(reason=Reason.OUT_OF_TIME)


def _drain_round(
    rt: Runtime, world: World, active: dict[str, Work], deadline: float
) -> drain_policy.DrainResult | None:
    """One termination step per node still active (finished ones leave ``active``); None once none is left,
    else what blocks the nodes still there and the longest retry-after the API server asked for. The
    instances of the nodes the round empties are terminated together at its end (one ownership check and
    TerminateInstances call per hundred, not two calls a node: a batch of 100 interrupted nodes spent most
    of its drain on them)."""
    blocking = drain_policy.DrainResult(node=",".join(active))
    batch = terminate.TerminationBatch(rt)
    waiting: dict[str, Work] = {}  # node -> its work, while its instance waits in the batch
    for name, item in list(active.items()):
        try:
            fresh = ClusterNode.from_dict(k8s_nodes.get_node(rt.api, name))
        except k8s_nodes.NodeGoneError:
            # Someone else finished it (the disruption function, or EC2's terminated instance).
            item.update(action=Outcome.DRAINED, reason=item.report.reason or Reason.NODE_DELETED)
            del active[name]
            continue
        step = terminate.continue_termination(rt, world, fresh, involuntary=True, deadline_monotonic=deadline,
                                              batch=batch)
        result = step.drain
        if result is not None:
            _note_drain(item, result)
            blocking.retry_after = max(blocking.retry_after, result.retry_after)
            blocking.blocked_by_pdb += result.blocked_by_pdb
            blocking.failed.update(result.failed)
        if step.state == terminate.TERMINATING:
            waiting[name] = item
            continue
        _settle(active, item, step)
    for step in batch.flush():
        _settle(active, waiting[step.node], step)
    return blocking if active else None


def _settle(active: dict[str, Work], item: Work, step: terminate.TerminationStep) -> None:
    """The node's report after its step; a node that is done (terminated, or left alone) leaves ``active``."""
    item.update(instance_terminated=item.report.instance_terminated or step.instance_terminated,
                node_deleted=item.report.node_deleted or step.node_deleted)
    if step.state == terminate.TERMINATED:
        item.update(action=Outcome.DRAINED)
        if item.intent.event_time is not None:
            telemetry.seconds(telemetry.EVENT_TO_EMPTY, since(item.intent.event_time))
        del active[item.name]
    elif step.state == terminate.SKIPPED:
        item.update(reason=step.reason)
        del active[item.name]


def _note_drain(item: Work, result: drain_policy.DrainResult) -> None:
    report = item.report
    item.update(evicted=tuple(dict.fromkeys([*report.evicted, *result.evicted])),
                blocked_by_pdb=tuple(result.blocked_by_pdb),
                blocked_total=report.blocked_total + len(result.blocked_by_pdb))
    if result.blocked_by_pdb:
        telemetry.count(telemetry.EVICTIONS_BLOCKED, len(result.blocked_by_pdb))


def notify(recorder: EventRecorder, item: Work) -> None:
    """Karpenter's event for the message itself (SpotInterrupted, InstanceStopping, ...)."""
    said = notice(item.intent)
    node_event(recorder, item, said.reason, said.message, said.type_)


def node_event(
    recorder: EventRecorder, item: Work, reason: str, message: str, type_: str = "Normal",
    claim_message: str | None = None,
) -> None:
    """On the Node and its NodeClaim, as Karpenter publishes them."""
    try:
        recorder.node_and_claim(item.name, item.claim, reason, message, type_, uid=item.node.uid,
                                claim_message=claim_message)
    except ApiException as exc:
        # An event is a courtesy: the action it describes must not fail because of it.
        log.warning("could not record a node event", extra={"node": item.name, "status": exc.status})


def since(moment: datetime) -> float:
    return max(0.0, (clock.now() - moment).total_seconds())
