"""The interruption use-case: an EventBridge event about EC2 instances, acted on safely.

    process_event(event, settings, runtime, account=..., deadline_monotonic=...) -> EventSummary | Repeat
        parse, ignore what is not ours (logged, counted), else handle the event id once (the function's
        front door, ``entry.process``, sends an SQS batch to ``batch.process_batch`` instead)
    handle_event(rt, event, ...) -> EventSummary     the same without the idempotency record
    handle_events(rt, [(parsed, intents)], ...) -> [EventSummary]    several events acted on together

For an instance this cluster owns (``nodescale.io/cluster`` tag) whose Node is registered:

- spot interruption warning, AWS Health scheduledChange, state change to stopping / stopped /
  shutting-down / terminated: taint ``karpenter.sh/disrupted:NoSchedule`` and cordon at once, evict
  a first round of pods, then drain (PDB-paced evictions, retried with backoff in this invocation; when
  empty terminate the instance and delete the Node) while, beside the drain, the world is read and
  replacement capacity launched for the node's pods (same bin-packer and launch path as the
  provisioner, the failing spot offering excluded; nothing launched with too little time left, the
  provisioner then places the pending pods). A spot
  warning also marks its offering unavailable in the shared table for the offering TTL (3 minutes).
- rebalance recommendation: a Kubernetes event on the node and a metric. A NodePool opts in to
  treating it like a spot warning with the annotation ``nodescale.io/rebalance: interrupt`` in its
  node template (``spec.template.metadata.annotations`` for karpenter.sh/v1 and v1beta1 NodePools,
  ``spec.annotations`` for a v1alpha5 Provisioner); a node carrying the annotation itself opts in too.
- state change to pending / running: nothing.
- ARC zonal shift or autoshift (source ``aws.arc-zonal-shift``): the zone is recorded as shifted away
  from (or back) in the shared table, and launches keep out of it (``zonal_shift.py``).

Repeats do no harm: a node already carrying the taint is not marked again, and its pods are planned
against what exists and is in flight (the replacement an earlier event launched), so nothing is
launched twice. A drain that outlives the invocation keeps the taint; the next run of this or the
disruption function continues it (``terminate.continue_termination``).

Bad input never raises (it is ignored with its reason); failures worth retrying (throttling, an API
server or EC2 that does not answer) do, so Lambda's retries and the dead-letter queue apply.

The flow per event: parse once (``interruption.events``) -> classify ownership (``aws.ownership``) ->
``interruption.actions.action_for`` per instance -> act (``interrupt_actions``: mark, replace, drain).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import clock, telemetry
from ...aws.idempotency import once_per_event
from ...aws.ownership import OwnedInstance, Ownership, classify
from ...interruption import actions, events
from ...interruption.actions import Outcome, Reason, Step, action_for
from ...k8s import nodeclaims as k8s_nodeclaims
from ...k8s.events import EventRecorder, claim_of_node
from ...model.node import ClusterNode
from ...model.nodepool import NodePool
from ...runtime import Runtime
from ...settings import Settings
from ..world import World, read_nodepools, read_world
from . import actions as act
from . import zonal_shift
from .actions import InstanceReport, Work
from .ahead import MARK_WORKERS, Ahead, nodes_of, start
from .summary import EventAnswer, EventSummary


def read_world_cached(rt: Runtime) -> World:
    """The world with its pods from the warm container's pod cache: a watch from the last version instead of
    a list of every pod for each event of an interruption wave (one list per cold container)."""
    return read_world(rt, pod_cache=True)

log = logging.getLogger(__name__)
Slot = tuple[int, int]  # an intent's place in a batch: (event, intent of the event)

# A replacement is still launched this long past the drain's deadline: the function keeps 10 s of its timeout
# back beyond that deadline (lambdas/interruption MARGIN_SECONDS), and a launch takes a few of them. Later, the
# invocation would outlive its timeout: nothing is launched, and the provisioner places the pending pods.
LAUNCH_GRACE_SECONDS = 5.0

# Without a caller's deadline (CLI, tests), a drain keeps trying this long.
DEFAULT_DRAIN_SECONDS = 120.0

# Actions reported per instance (the summary's "action").
DRAINED = Outcome.DRAINED
DRAINING = Outcome.DRAINING
RECORDED = Outcome.RECORDED
NOTHING = Outcome.NOTHING
IGNORED = Outcome.IGNORED



# ------------------------------------------------------------------------------------------ entry points


def process_event(
    event: object,
    settings: Settings,
    runtime: Callable[[], Runtime],
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    lambda_context: Any = None,
) -> EventAnswer:
    """One EventBridge event, handled once (``entry.process`` sends an SQS batch to ``batch`` instead).

    ``runtime`` is only called for an event worth acting on, so bad input needs no clients at all.
    """
    parsed = events.read(event, account, settings.region)
    if isinstance(parsed.result, events.Ignored):
        return ignored_summary(event, parsed.result, parsed.detail_type)
    if isinstance(parsed.result, events.ZoneShift):
        # A zone, not instances: recorded for every function's next read of the world (repeats are harmless).
        return zonal_shift.handle_shift(runtime().begin_invocation(), parsed.result, parsed.detail_type)
    rt = runtime().begin_invocation()
    accepted = dict(event) if isinstance(event, Mapping) else {}  # read() accepts only objects
    return once_per_event(
        lambda e: handle_event(rt, e, account=account, deadline_monotonic=deadline_monotonic, parsed=parsed),
        accepted,
        table=rt.settings.table_name,
        dynamodb=rt.aws.dynamodb,
        lambda_context=lambda_context,
    )


def ignored_summary(event: object, ignored: events.Ignored, detail_type: str | None = None) -> EventSummary:
    """The summary of an event not acted on; ``detail_type`` as :func:`events.read` found it."""
    if detail_type is None:
        detail_type = events.detail_type_of(event)
    log.warning("event ignored", extra={"event_id": ignored.event_id, "reason": ignored.reason})
    telemetry.count(telemetry.IGNORED_EVENTS)
    return EventSummary(ignored.event_id, detail_type, ignored=ignored.reason)


def handle_event(
    rt: Runtime,
    event: object,
    *,
    account: str | None = None,
    deadline_monotonic: float | None = None,
    reader: Callable[[Runtime], World] = read_world_cached,
    sleep: Callable[[float], None] = time.sleep,
    parsed: events.ParsedEvent | None = None,
) -> EventSummary:
    """Act on one event (no idempotency record: see :func:`process`); ``parsed`` is the event read
    already, so it is not parsed again."""
    started = time.monotonic()
    deadline = deadline_monotonic if deadline_monotonic is not None else started + DEFAULT_DRAIN_SECONDS
    if parsed is None:
        parsed = events.read(event, account, rt.settings.region)
    if isinstance(parsed.result, events.Ignored):
        return ignored_summary(event, parsed.result, parsed.detail_type)
    if isinstance(parsed.result, events.ZoneShift):
        return zonal_shift.handle_shift(rt, parsed.result, parsed.detail_type)
    return handle_events(rt, [(parsed, parsed.result)], deadline=deadline, reader=reader, sleep=sleep,
                         started=started)[0]


def handle_events(
    rt: Runtime,
    batch: list[tuple[events.ParsedEvent, list[events.Intent]]],
    *,
    deadline: float,
    reader: Callable[[Runtime], World] = read_world_cached,
    sleep: Callable[[float], None] = time.sleep,
    started: float | None = None,
    ahead: Ahead | None = None,
) -> list[EventSummary]:
    """Act on the intents of several events together (an SQS batch; one event is a batch of one): one
    ownership check, every going-away node cordoned first, one drain over all of them and, beside it, ONE
    read of the world and one plan of replacements. A summary per event, in order. ``ahead``: the ownership
    checked and the nodes cordoned while the batch's records were claimed (``ahead.cordon_ahead``)."""
    started = time.monotonic() if started is None else started
    reports = [[InstanceReport(i.instance_id, i.kind) for i in intents] for _, intents in batch]
    chosen: dict[str, tuple[events.Intent, Slot]] = {}  # instance id -> what is acted on for it
    others: list[tuple[events.Intent, Slot]] = []
    for e, (_, intents) in enumerate(batch):
        for i, intent in enumerate(intents):
            telemetry.count(telemetry.INTERRUPTIONS, **{telemetry.KIND_DIMENSION: intent.kind})
            if intent.action == events.NO_ACTION:
                # Nothing will be done whoever owns the instance: EC2 is not asked.
                reports[e][i] = replace(reports[e][i], reason=action_for(intent, None, None).reason)
                continue
            held = chosen.get(intent.instance_id)
            if held is None or (held[0].action != events.INTERRUPT and intent.action == events.INTERRUPT):
                # A going-away intent wins over a rebalance recommendation for the same instance.
                chosen[intent.instance_id] = (intent, (e, i))
                if held is not None:
                    others.append(held)
            else:
                others.append((intent, (e, i)))
    for intent, (e, i) in others:
        # Two events about one instance in a batch (a warning and its state change): one node, acted on once,
        # so its pods are not planned twice.
        reports[e][i] = replace(
            reports[e][i], reason=f"acted on with event {chosen[intent.instance_id][0].event_id} of the same batch")
    acting = list(chosen.values())
    if acting:
        done = _act(rt, [(intent, reports[e][i]) for intent, (e, i) in acting], deadline, reader, sleep, ahead)
        for (_, (e, i)), report in zip(acting, done, strict=True):
            reports[e][i] = report
    seconds = round(time.monotonic() - started, 3)
    handled_at = clock.format_timestamp(clock.now())
    summaries = []
    for (parsed, intents), event_reports in zip(batch, reports, strict=True):
        summary = EventSummary(intents[0].event_id if intents else None, parsed.detail_type,
                               instances=tuple(event_reports), seconds=seconds, handled_at=handled_at)
        log.info("interruption event handled", extra={"summary": summary.to_json()})
        summaries.append(summary)
    return summaries


# ------------------------------------------------------------------------------------------ acting


def _act(
    rt: Runtime,
    acting: list[tuple[events.Intent, InstanceReport]],
    deadline: float,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
    ahead: Ahead | None = None,
) -> list[InstanceReport]:
    """classify ownership -> action_for -> act. Going-away instances are cordoned before the world is
    read (the slow part), or were while the batch's records were claimed (``ahead``); a rebalance
    recommendation waits for the world, as its NodePool decides. The final report of each of ``acting``,
    in order."""
    ahead = ahead or Ahead()
    out = [report for _, report in acting]
    ours = _owned(rt, acting, out, ahead.owners)
    if not ours:
        return out
    unread = [owned for _, _, owned in ours if owned.instance_id not in ahead.nodes]
    by_instance = {**ahead.nodes, **(nodes_of(rt, unread) if unread else {})}
    recorder = EventRecorder(rt.api)
    started: dict[int, Work] = {}  # index in ``acting`` -> its work, whose report is the latest
    work: list[Work] = []
    rebalances: list[Work] = []
    going: list[tuple[int, events.Intent, OwnedInstance, ClusterNode | None]] = []
    for k, intent, owned in ours:
        node = by_instance.get(intent.instance_id)
        if node is not None and intent.action == events.REBALANCE_RISK:
            started[k] = Work(intent, owned, node, replace(out[k], node=node.name))
            rebalances.append(started[k])
            continue
        going.append((k, intent, owned, node))
    # Every going-away node cordoned side by side, each in one write, before anything else is read (the
    # NodeClaims, for the events, are read once the evictions are under way): a batch of a hundred took
    # longer than the goal leaves for it (#33.3).
    marked = act.side_by_side(lambda g: _adopted(ahead, g[1]) or start(rt, recorder, out[g[0]], g[1], g[2], g[3]),
                              going, MARK_WORKERS, "nodescale-cordon")
    for (k, *_), (report, item) in zip(going, marked, strict=True):
        out[k] = report
        if item is not None:
            started[k] = item
            work.append(item)
    _mark_offerings(rt, [(intent, owned, node) for _, intent, owned, node in going])
    if work or rebalances:
        _replace_and_drain(rt, recorder, work, rebalances, deadline, reader, sleep)
    for k, item in started.items():
        out[k] = item.report
    return out


def _adopted(ahead: Ahead, intent: events.Intent) -> tuple[InstanceReport, Work] | None:
    """The intent's Work, cordoned ahead of the claims, now counted as acted on."""
    item = ahead.adopt(intent)
    if item is None:
        return None
    act.count_action(item)
    return item.report, item


def _replace_and_drain(
    rt: Runtime,
    recorder: EventRecorder,
    work: list[Work],
    rebalances: list[Work],
    deadline: float,
    reader: Callable[[Runtime], World],
    sleep: Callable[[float], None],
) -> None:
    """Start evicting from the cordoned nodes and say so; then drain them while the world is read and their
    replacements planned beside the drain (#33.3: at 2,000 nodes the read and the launch took longer than the
    function's timeout, and the drained nodes' instances waited for both). The rebalances that opt in are
    replaced with them and drained after."""
    evicted = act.evict_at_once(rt, work, deadline)
    claims = _claims(rt)
    for item in [*work, *rebalances]:
        item.claim = claim_of_node(claims, item.node)
    act.say_evicted(rt, evicted)
    act.side_by_side(lambda item: act.announce_marked(recorder, item), work, MARK_WORKERS, "nodescale-events")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nodescale-replace") as pool:
        replacing = pool.submit(contextvars.copy_context().run, _read_and_replace, rt, recorder, work, rebalances,
                                deadline, reader)
        if work:
            act.drain(rt, drain_world(rt, work, claims), work, deadline, sleep)
        world, opted = replacing.result()
    if world is not None and opted:
        act.drain(rt, world, opted, deadline, sleep)


def _read_and_replace(
    rt: Runtime,
    recorder: EventRecorder,
    work: list[Work],
    rebalances: list[Work],
    deadline: float,
    reader: Callable[[Runtime], World],
) -> tuple[World | None, list[Work]]:
    """The world read once, the rebalances that opt in marked, and one plan of replacements for them and
    ``work``: the world (None when it could not be read) and the rebalances to drain. Nothing is launched
    later than ``LAUNCH_GRACE_SECONDS`` past ``deadline``: the pods evicted meanwhile are pending, and the
    provisioner's next pass places them."""
    try:
        world = reader(rt)
    except Exception as exc:
        # The drain carries on without it: the pods go pending and the provisioner places them.
        log.exception("reading the world failed: draining without a replacement")
        for item in work:
            item.update(replacement=act.ReplacementReport.none(f"not planned: reading the world failed ({exc})"))
        return None, []
    opted = [item for item in rebalances if _act_on_rebalance(rt, recorder, world, item)]
    moving = [*work, *opted]
    if time.monotonic() >= deadline + LAUNCH_GRACE_SECONDS:
        log.warning("no time left to plan replacements: the provisioner places the pods",
                    extra={"nodes": [item.name for item in moving]})
        for item in moving:
            item.update(replacement=act.ReplacementReport.none(
                "not planned: out of time in this invocation; the provisioner places the pods"))
        return world, opted
    return act.replace(rt, world, moving), opted


def drain_world(rt: Runtime, work: list[Work], claims: list[dict[str, Any]] | None) -> World:
    """What a drain needs of the world, without reading it: the nodes being drained as last read, their
    instances as the ownership check found them, the NodePools (their terminationGracePeriod) and the
    NodeClaims. A configuration that cannot be read leaves the pools out (the drain then keeps no grace
    period of theirs); it never holds the drain up."""
    try:
        nodepools = read_nodepools(rt)
    except Exception as exc:
        log.warning("NodePools not read: the drain goes on without their terminationGracePeriod",
                    extra={"error": str(exc)})
        nodepools = {}
    return World(now=clock.now(), cluster=rt.settings.cluster_name, nodepools=nodepools,
                 nodes=[item.node for item in work], instances=[item.instance.managed() for item in work],
                 nodeclaims=claims, gates=rt.settings.feature_gates)


def _claims(rt: Runtime) -> list[dict[str, Any]] | None:
    """The NodeClaims, for the events Karpenter publishes on them too; None (events on the Nodes alone)
    without the CRD or when the list fails: an event never holds an interruption up."""
    try:
        return k8s_nodeclaims.list_all(rt.api)
    except (k8s_nodeclaims.NodeClaimsMissing, ApiException) as exc:
        log.warning("NodeClaims not read: interruption events go on the Nodes only", extra={"error": str(exc)})
        return None


def _owned(
    rt: Runtime, acting: list[tuple[events.Intent, InstanceReport]], out: list[InstanceReport],
    checked: Ownership | Exception | None = None,
) -> list[tuple[int, events.Intent, OwnedInstance]]:
    """The intents for this cluster's instances (with their index in ``acting``); the others are reported
    ignored in ``out``, with why. ``checked``: ownership read already, used when it covers every instance."""
    if isinstance(checked, Exception):
        raise checked
    ids = [i.instance_id for i, _ in acting]
    covered = checked is not None and all(i in checked.owned or i in checked.not_ours for i in ids)
    owners = checked if covered and checked is not None else classify(rt.aws.ec2, ids, rt.cluster)
    ours: list[tuple[int, events.Intent, OwnedInstance]] = []
    for k, (intent, report) in enumerate(acting):
        owned = owners.owned.get(intent.instance_id)
        if owned is not None:
            ours.append((k, intent, owned))
            continue
        found = owners.not_ours.get(intent.instance_id)
        out[k] = replace(report, action=IGNORED, reason=found.message if found else Reason.NOT_OURS)
        log.warning("instance ignored", extra={"instance_id": intent.instance_id, "reason": out[k].reason})
        telemetry.count(telemetry.IGNORED_EVENTS)
    return ours


def _mark_offerings(rt: Runtime, going: list[tuple[events.Intent, OwnedInstance, ClusterNode | None]]) -> None:
    """The spot offerings being reclaimed, marked unavailable in one write for the batch. After the cordons
    (one write a node mattered more than one for the batch) and before the first eviction makes a pod
    pending that a launch could place: nothing launches into a pool being reclaimed."""
    reclaimed = [owned for intent, owned, node in going if action_for(intent, node, None).mark_offering]
    if reclaimed:
        act.mark_offerings(rt, reclaimed)


def _act_on_rebalance(rt: Runtime, recorder: EventRecorder, world: World, item: Work) -> bool:
    """Record a rebalance recommendation, or cordon the node where its NodePool opted in: True to
    replace and drain it."""
    action = action_for(item.intent, item.node, _pool(world, item))
    if action.step == Step.RECORD:
        act.record(recorder, item)
        return False
    item.update(reason=action.reason)
    return act.mark(rt, recorder, item)


def _pool(world: World, item: Work) -> NodePool | None:
    return world.nodepools.get(actions.nodepool_name(item.node, item.instance.nodepool, world.nodepools))


def _rebalance_opted_in(world: World, item: Work) -> bool:
    return actions.rebalance_opted_in(item.node, _pool(world, item))
