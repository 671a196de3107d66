"""The provisioner's launch step: NodeClaims the plan admitted, launched with one EC2 Fleet per group.

    Launch, LaunchOutcome        what was launched (or, dry, would be) and what was not, with why
    LimitHit                     a launch a NodePool or cluster-wide limit held back
    launch_admitted(...)         identical claims grouped into Fleet requests; capacity failures kept for a retry
    launch_key(claim)            the Fleet client token of a planned node (a launch retried within minutes reuses it)

Also the pod events a launch writes (Nominated, FailedScheduling) and ``pending_since``. The
orchestration (plan, cluster budget, retry, the passes) is in ``provision.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ... import clock, telemetry
from ...aws import instances as ec2_instances
from ...aws import launchfailures
from ...aws.fleet import LaunchResult
from ...aws.launchfailures import LaunchFailure
from ...k8s import events as k8s_events
from ...model.instance import instance_id
from ...model.instancetype import InstanceType
from ...model.nodepool import NodeClass, NodePool
from ...model.pod import Pod
from ...runtime import Runtime
from ...scheduling.plan import NodeClaim
from ...settings import SettingsError
from ..world import World
from . import nodeclaims

log = logging.getLogger(__name__)

NOMINATED = "Nominated"
FAILED_SCHEDULING = "FailedScheduling"
# The Nominated event's ``related`` object names the launched instance (nodescale's own reference kind: the
# node has no name yet), so the provisioner reads the nomination back as data, never from the message.
NOMINATED_INSTANCE = k8s_events.ObjectRef("Instance", "", api_version="nodescale.io/v1")

@dataclass(frozen=True)
class PodReason:
    """A pod, and why it is named (not placed, or its spec could not be read)."""

    pod: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"pod": self.pod, "reason": self.reason}


@dataclass
class Launch:
    """One node launched (or, in a dry run, one that would be)."""

    nodepool: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    pods: list[str]
    instance_types: list[str] = field(default_factory=list)  # the options the Fleet was given
    launch_template: str = ""
    nodeclaim: str = ""  # the karpenter.sh/v1 NodeClaim written for it ("" where none was)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodePool": self.nodepool,
            "instanceId": self.instance_id,
            "instanceType": self.instance_type,
            "zone": self.zone,
            "capacityType": self.capacity_type,
            "price": round(self.price, 6),
            "pods": self.pods,
            "instanceTypes": self.instance_types[:10],
            "launchTemplate": self.launch_template,
        }


class LimitScope(StrEnum):
    """Which limit held a launch back."""

    NODEPOOL = "nodepool"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class LimitHit:
    """A launch a NodePool's limits or a cluster-wide limit held back, and why."""

    scope: LimitScope
    nodepool: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"scope": self.scope.value, "nodePool": self.nodepool, "reason": self.reason}


@dataclass
class LaunchOutcome:
    """What a launch_capacity call did: launches, pods placed or waiting, and what held the rest back."""

    launches: list[Launch] = field(default_factory=list)
    planned: list[NodeClaim] = field(default_factory=list)  # node claims of the plan (what a dry run shows)
    waiting: dict[str, list[str]] = field(default_factory=dict)  # in-flight node -> pods planned onto it
    placed_existing: int = 0  # pods that fit on registered, Ready nodes
    unschedulable: list[tuple[str, str]] = field(default_factory=list)  # (pod, reason)
    errors: dict[str, int] = field(default_factory=dict)
    error_messages: list[str] = field(default_factory=list)
    limits: list[LimitHit] = field(default_factory=list)  # launches a NodePool/cluster limit held back
    buffer_unplaced: list[tuple[str, str]] = field(default_factory=list)  # CapacityBuffer pods without room
    # NodePools whose launch failed in this pass for a reason other than capacity, and why (the last failure).
    failing: dict[str, LaunchFailure] = field(default_factory=dict)
    solve_seconds: float = 0.0
    dry_run: bool = False
    # The snapshot after this launch (instances re-read under the lease, what it launched into capacity
    # reservations, pool failures it ended): the caller plans on with it. None until launch_capacity returns.
    world: World | None = None

    def count_error(self, code: str, message: str = "", n: int = 1) -> None:
        self.errors[code] = self.errors.get(code, 0) + n
        if message:
            self.error_messages.append(f"{code}: {message}")


def merge(outcome: LaunchOutcome, again: LaunchOutcome) -> None:
    """Fold a retry's outcome into the pass that asked for it."""
    outcome.launches.extend(again.launches)
    outcome.unschedulable.extend(again.unschedulable)
    outcome.buffer_unplaced.extend(again.buffer_unplaced)
    outcome.limits.extend(x for x in again.limits if x not in outcome.limits)
    outcome.error_messages.extend(again.error_messages)
    outcome.failing.update(again.failing)
    for launch in again.launches:
        outcome.failing.pop(launch.nodepool, None)
    for code, n in again.errors.items():
        outcome.errors[code] = outcome.errors.get(code, 0) + n
    for node, pods in again.waiting.items():
        outcome.waiting.setdefault(node, []).extend(pods)
    outcome.solve_seconds += again.solve_seconds


@dataclass
class LaunchLedger:
    """What a launch pass changed that the world it read does not know yet, for its later plans: instances
    launched into each capacity reservation (every pool plans with that many fewer free there, Karpenter's
    MarkLaunched) and the pools whose recorded launch failure a launch ended. Shared by a pass and its
    retries; the next run reads both from EC2 and DynamoDB again."""

    reserved: dict[str, int] = field(default_factory=dict)  # reservation id -> instances launched into it
    cleared: set[str] = field(default_factory=set)  # pools whose launch failure this pass cleared

    def applied(self, world: World) -> World:
        """``world`` (as read, or re-read under the lease) with what this pass launched."""
        return world.after_launches(self.reserved, self.cleared)


@dataclass
class Retry:
    """Pods whose every chosen offering was out of capacity, to plan again without those offerings."""

    pods: list[Pod] = field(default_factory=list)
    offerings: set[tuple[str, str, str]] = field(default_factory=set)


def launch_admitted(
    rt: Runtime,
    world: World,
    admitted: list[tuple[NodeClaim, list[InstanceType]]],
    outcome: LaunchOutcome,
    unschedulable: list[tuple[Pod, str]],
    *,
    reason: str,
    recorder: k8s_events.EventRecorder | None,
    may_retry: bool,
    fence: Callable[[], None] | None = None,
    replacing: Iterable[str] = (),
    ledger: LaunchLedger | None = None,
) -> Retry:
    """Launch the admitted claims (each with its instance-type options) and nominate their pods; a
    claim that got no instance adds its pods to ``unschedulable``, or to the retry when every offering
    failed for capacity and ``may_retry``. ``fence`` runs before each CreateFleet (the launch lease's
    check); what it raises ends the launching, the claims launched so far kept in ``outcome``. ``replacing``
    names the nodes the claims replace: part of their client token, so a replacement for pods still on the
    node it replaces never repeats that node's launch. ``ledger`` gets what the launches change that the world
    does not know yet (reserved launches, cleared failures); ``world`` is the pass's, with the ledger applied."""
    retry = Retry()
    replaced = tuple(sorted(set(replacing)))
    ledger = LaunchLedger() if ledger is None else ledger
    for group, options in _identical_claims(admitted):
        for claim, launched, capacity_failures in _launch_claims(rt, world, group, options, outcome, reason, fence,
                                                                      replaced, ledger):
            if launched is None:
                if capacity_failures and may_retry:
                    # Every offering the plan chose is out of capacity: plan these pods again without them.
                    retry.pods.extend(claim.pods)
                    retry.offerings |= capacity_failures
                    continue
                failure = outcome.failing.get(claim.nodepool)
                why = failure.describe() if failure is not None else "the launch failed: " + (
                    outcome.error_messages[-1] if outcome.error_messages else "no capacity"
                )
                unschedulable.extend((p, why) for p in claim.pods)
                continue
            outcome.launches.append(launched)
            if recorder is not None:
                nominate(recorder, [p for p in claim.pods if not p.buffer], launched)
    return retry


def planned_launch(claim: NodeClaim) -> Launch:
    """What a dry run reports for a claim: the node it would launch (no instance yet)."""
    return Launch(claim.nodepool, "", claim.instance_types[0] if claim.instance_types else "",
                  ",".join(claim.zones), ",".join(claim.capacity_types), claim.price,
                  [p.key for p in claim.pods], list(claim.instance_types))


# How long a launch's client token stands for it. EC2 answers a repeated token with the first request's
# instances, so the token must change whenever the same pods need another node: a replacement for pods
# still running on the node it replaces, or a node for pods whose first instance never joined (given up
# after the registration TTL, 15 minutes). Within the window, a launch repeated because its invocation died
# mid-call, or because DescribeInstances did not show the instances yet, is answered with the first ones.
TOKEN_WINDOW_SECONDS = 300


def launch_key(claim: NodeClaim, now: float | None = None) -> str:
    """The planned node's identity: the pool, the pods it is for and the token window it is launched in
    (see TOKEN_WINDOW_SECONDS)."""
    ids = sorted(p.uid or p.key for p in claim.pods)
    if getattr(claim, "key", ""):  # a claim without pods (static capacity) names itself
        ids.append(claim.key)
    window = int((clock.epoch() if now is None else now) // TOKEN_WINDOW_SECONDS)
    return hashlib.sha256("\0".join([claim.nodepool, str(window), *ids]).encode()).hexdigest()[:32]


# One EC2 Fleet request launches at most this many identical nodes (a hostname spread of 2,000 pods
# is 2,000 identical nodes: 20 requests, not 2,000).
MAX_FLEET_COUNT = 100


def _identical_claims(
    claims: list[tuple[NodeClaim, list[InstanceType]]],
) -> list[tuple[list[NodeClaim], list[InstanceType]]]:
    """Claims that would make the same Fleet request (pool, options, zones, capacity types, node
    requirements, labels, taints), in batches: each batch is one request for ``len(batch)`` nodes."""
    groups: dict[tuple, tuple[list[NodeClaim], list[InstanceType]]] = {}
    for claim, options in claims:
        key = (
            claim.nodepool,
            tuple(claim.instance_types),
            tuple(sorted(claim.zones)),
            tuple(sorted(claim.capacity_types)),
            claim.requirements,
            tuple(sorted(claim.labels.items())),
            claim.taints,
            claim.startup_taints,
        )
        groups.setdefault(key, ([], options))[0].append(claim)
    out = []
    for members, options in groups.values():
        for i in range(0, len(members), MAX_FLEET_COUNT):
            out.append((members[i : i + MAX_FLEET_COUNT], options))
    return out


def _launch_claims(
    rt: Runtime,
    world: World,
    claims: list[NodeClaim],
    options: list[InstanceType],
    outcome: LaunchOutcome,
    reason: str,
    fence: Callable[[], None] | None = None,
    replaced: tuple[str, ...] = (),
    ledger: LaunchLedger | None = None,
) -> list[tuple[NodeClaim, Launch | None, set[tuple[str, str, str]]]]:
    """Launch identical claims with one Fleet request: each claim gets one of the instances, in order;
    claims left without one get the offerings that failed with a capacity error."""
    first = claims[0]
    pool = world.nodepools.get(first.nodepool)
    node_class = world.nodeclasses.get(pool.node_class) if pool is not None else None
    if pool is None or node_class is None or not options:
        outcome.count_error("NoUsableOptions", f"nodepool {first.nodepool}: nothing left to launch")
        return [(c, None, set()) for c in claims]
    started = time.perf_counter()
    keys = [launch_key(c) for c in claims]
    key = keys[0] if len(keys) == 1 and not replaced else hashlib.sha256(
        "\0".join([*keys, *replaced]).encode()
    ).hexdigest()[:32]
    names = nodeclaims.created(rt, pool, claims, options)
    try:
        result = _fleet(rt, pool, node_class, options, key, claims, outcome, fence)
    except BaseException:
        nodeclaims.discard(rt, names)  # the launch ended before EC2 answered: no instance for any of them
        raise
    if result is None:
        nodeclaims.discard(rt, names)
        return [(c, None, set()) for c in claims]
    _count_launch_errors(result, outcome, pool.name)
    ledger = LaunchLedger() if ledger is None else ledger
    if result.instances:
        _launching(rt, world, outcome, pool.name, ledger)
    else:
        hard = [(e.code, e.message) for e in result.offering_errors if not e.is_capacity_error]
        hard += list(result.request_errors)
        if hard:
            _failing(rt, outcome, pool.name, *hard[0])
    for inst in result.instances:
        if inst.reservation_id:  # later passes of this run plan with one instance fewer free there
            ledger.reserved[inst.reservation_id] = ledger.reserved.get(inst.reservation_id, 0) + 1
    failed = {e.offering for e in result.offering_errors if e.is_capacity_error}
    out: list[tuple[NodeClaim, Launch | None, set[tuple[str, str, str]]]] = []
    now = clock.now()
    images = _image_ids(rt, pool, node_class, options) if result.instances and any(names) else {}
    by_type = {it.name: it for it in options}
    writes = []
    for claim, name, inst in zip(claims, names, [*result.instances, *([None] * len(claims))], strict=False):
        if inst is None:
            nodeclaims.discard(rt, [name])
            out.append((claim, None, failed))
            continue
        writes.append((name, inst, by_type.get(inst.instance_type), images.get(inst.instance_type, "")))
        launch = Launch(pool.name, inst.instance_id, inst.instance_type, inst.zone, inst.capacity_type, inst.price,
                        [p.key for p in claim.pods], list(claim.instance_types), inst.launch_template, name)
        telemetry.count(telemetry.LAUNCHES, **{telemetry.NODEPOOL_DIMENSION: pool.name,
                                              telemetry.CAPACITY_TYPE_DIMENSION: inst.capacity_type})
        telemetry.gauge(telemetry.PRICE_LAUNCHED, inst.price)
        for p in claim.pods:
            since = pending_since(p)
            if since is not None:
                telemetry.seconds(telemetry.PENDING_TO_LAUNCH, max(0.0, (now - since).total_seconds()))
        log.info(
            "launched",
            extra={**launch.to_dict(), "reason": reason, "seconds": round(time.perf_counter() - started, 3)},
        )
        out.append((claim, launch, failed))
    nodeclaims.launched_all(rt, writes)
    return out


def _fleet(
    rt: Runtime, pool: NodePool, node_class: NodeClass, options: list[InstanceType], key: str,
    claims: list[NodeClaim], outcome: LaunchOutcome, fence: Callable[[], None] | None,
) -> LaunchResult | None:
    """The Fleet call; None (the failure counted and recorded) when it was refused as a whole."""
    try:
        return rt.launcher.launch(pool, node_class, options, key, len(claims), claims[0].requirements, fence=fence)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Unknown"
        outcome.count_error(code, f"nodepool {pool.name}: {error.get('Message', '')}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})
        _failing(rt, outcome, pool.name, code, error.get("Message", ""))
        return None
    except (ValueError, SettingsError, BotoCoreError) as exc:
        # Configuration the account cannot satisfy (no AMI, no subnet, bad user data...): say which. An
        # error that wraps AWS's (the node role's instance profiles could not be listed) carries AWS's code.
        code = getattr(exc, "code", "") or type(exc).__name__
        outcome.count_error(code, f"nodepool {pool.name}: {exc}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})
        _failing(rt, outcome, pool.name, code, str(exc))
        return None


def _image_ids(rt: Runtime, pool: NodePool, node_class: NodeClass, options: list[InstanceType]) -> dict[str, str]:
    """The image each offered instance type launches with (the launch templates the launcher chose from)."""
    try:
        planned = rt.launcher.templates(pool, node_class, options)
    except (ClientError, BotoCoreError, ValueError, SettingsError) as exc:
        log.warning("could not tell the launched image", extra={"nodepool": pool.name, "error": str(exc)})
        return {}
    return {it.name: t.ami.image_id for t in planned for it in t.instance_types}


def _failing(rt: Runtime, outcome: LaunchOutcome, pool: str, code: str, message: str) -> None:
    """The pool's launch failed for a reason that will not pass by itself: kept in the outcome (the CLI's exit
    code), recorded for status and explain (another process), counted for the alarm."""
    failure = LaunchFailure(pool, code, message, clock.epoch())
    outcome.failing[pool] = failure
    telemetry.count(telemetry.LAUNCH_FAILING)
    log.error("launch failing", extra={"nodepool": pool, "code": code, "error": message})
    try:
        launchfailures.record(rt.aws.dynamodb, rt.settings.table_name, failure)
    except (ClientError, BotoCoreError) as exc:  # the record is for the reader; the pass goes on
        log.warning("could not record the launch failure", extra={"nodepool": pool, "error": str(exc)})


def _launching(rt: Runtime, world: World, outcome: LaunchOutcome, pool: str, ledger: LaunchLedger) -> None:
    """The pool launched: a failure recorded before (this pass or an earlier one) is history, unless its last
    instance died as it started (EC2 accepted that launch too: only an instance that lives ends it)."""
    known = None if pool in ledger.cleared else world.launch_failures.get(pool)
    if known is not None and known.code in ec2_instances.DIED_AT_LAUNCH:
        outcome.failing[pool] = known
        telemetry.count(telemetry.LAUNCH_FAILING)
        log.error("launch failing", extra={"nodepool": pool, "code": known.code, "error": known.message})
        return
    if outcome.failing.pop(pool, None) is None and known is None:
        return
    ledger.cleared.add(pool)
    try:
        launchfailures.clear(rt.aws.dynamodb, rt.settings.table_name, pool)
    except (ClientError, BotoCoreError) as exc:
        log.warning("could not clear the launch failure", extra={"nodepool": pool, "error": str(exc)})


def _count_launch_errors(result: LaunchResult, outcome: LaunchOutcome, pool: str) -> None:
    for e in result.offering_errors:
        outcome.count_error(e.code, f"nodepool {pool}: {e.instance_type} in {e.zone} ({e.capacity_type}): {e.message}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: e.code})
    for code, message in result.request_errors:
        outcome.count_error(code, f"nodepool {pool}: {message}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})


# ----------------------------------------------------------------------------------------------- events


def nomination_message(launch: Launch) -> str:
    """Karpenter's "Pod should schedule on: nodeclaim/NAME" (scheduling/events.go NominatePodEvent) when the
    launch has a NodeClaim, with what nodescale launched after it; without one, nodescale's own words."""
    what = (f"NodePool {launch.nodepool}: instance {launch.instance_id} "
            f"({launch.instance_type}, {launch.zone}, {launch.capacity_type}) launched for it by nodescale")
    if launch.nodeclaim:
        return f"Pod should schedule on: nodeclaim/{launch.nodeclaim} ({what})"
    return f"Pod should schedule on {what}"


def nominate(recorder: k8s_events.EventRecorder, pods: Iterable[Pod], launch: Launch) -> None:
    message = nomination_message(launch)
    related = dataclasses.replace(NOMINATED_INSTANCE, name=launch.instance_id)
    for p in pods:
        _record(recorder, p, NOMINATED, message, k8s_events.NORMAL, related)


def nominated_instance_of(event: Mapping[str, Any], pod: Pod) -> str | None:
    """The instance a Nominated event of ``pod`` names in its ``related`` object, or None.

    Pods' events are writable by whoever may write events in the pod's namespace: anything that is not a
    nomination of this very pod (reason, uid) to a well-formed instance id of our reference kind counts as
    no nomination, and the pod is planned as usual.
    """
    if not isinstance(event, Mapping) or event.get("reason") != NOMINATED:
        return None
    involved = event.get("involvedObject")
    if not isinstance(involved, Mapping) or (pod.uid and involved.get("uid") != pod.uid):
        return None
    related = event.get("related")
    if not isinstance(related, Mapping) or related.get("kind") != NOMINATED_INSTANCE.kind \
            or related.get("apiVersion") != NOMINATED_INSTANCE.api_version:
        return None
    return instance_id(related.get("name"))


def warn_unschedulable(recorder: k8s_events.EventRecorder, items: Iterable[tuple[Pod, str]]) -> None:
    for p, why in items:
        _record(recorder, p, FAILED_SCHEDULING, f"nodescale cannot place the pod: {why}", k8s_events.WARNING)


def _record(
    recorder: k8s_events.EventRecorder, pod: Pod, reason: str, message: str, type_: str,
    related: k8s_events.ObjectRef | None = None,
) -> None:
    try:
        recorder.pod(pod.namespace, pod.name, reason, message, type_, uid=pod.uid, related=related)
    except (ApiException, OSError, ValueError) as exc:
        # An event is information; failing to write one must not undo a launch.
        log.warning("could not record a pod event", extra={"pod": pod.key, "reason": reason, "error": str(exc)})


def pending_since(pod: Pod) -> datetime | None:
    """When the default scheduler first said the pod cannot be placed (else when it was created)."""
    return pod.unschedulable_since or pod.created
