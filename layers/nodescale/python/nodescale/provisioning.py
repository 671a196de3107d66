"""The provisioner use-case: from pending pods to EC2 Fleet launches.

    launch_capacity(rt, world, pods, ...) -> LaunchOutcome   plan pods against what exists and launch the rest
    provision_once(rt, dry_run=False) -> summary              one pass over every provisionable pod (poll mode)
    provision_watch(rt, deadline) -> summary                  batches of pending pods until the deadline (watch mode)

Capacity on its way counts before anything new is launched: instances this cluster launched whose
Node has not registered and Nodes not yet Ready are handed to the bin-packer as in-flight nodes, so
pods that fit there are planned onto them and nothing is launched for them again. The interruption
and disruption functions call :func:`launch_capacity` for replacement capacity.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from . import clock, telemetry
from .aws import catalog as catalogs
from .aws import instances as ec2_instances
from .aws import leases
from .aws.fleet import LaunchResult
from .k8s import events as k8s_events
from .k8s.watch import watch_pending_pods
from .model import resources as res
from .model.instancetype import InstanceType
from .model.pod import Pod
from .provisioning_limits import ClusterBudget
from .runtime import Runtime
from .scheduling import NodeClaim, Plan, solve
from .settings import SettingsError
from .world import IN_FLIGHT_PREFIX, World, read_world

log = logging.getLogger(__name__)

NOMINATED = "Nominated"
FAILED_SCHEDULING = "FailedScheduling"
# An event is not repeated for the same pod and reason within this window (also across invocations).
EVENT_WINDOW_SECONDS = 60.0
# Offerings the caller excludes are marked unavailable until far beyond any invocation.
_FOREVER = 1e12
# How long a launch waits for another invocation's launch to finish before leaving it to the next run.
LEASE_WAIT_SECONDS = 20.0


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


@dataclass
class LaunchOutcome:
    launches: list[Launch] = field(default_factory=list)
    planned: list[NodeClaim] = field(default_factory=list)  # node claims of the plan (what a dry run shows)
    waiting: dict[str, list[str]] = field(default_factory=dict)  # in-flight node -> pods planned onto it
    placed_existing: int = 0  # pods that fit on registered, Ready nodes
    unschedulable: list[tuple[str, str]] = field(default_factory=list)  # (pod, reason)
    errors: dict[str, int] = field(default_factory=dict)
    error_messages: list[str] = field(default_factory=list)
    limits: list[dict[str, str]] = field(default_factory=list)  # launches a NodePool/cluster limit held back
    solve_seconds: float = 0.0
    dry_run: bool = False

    def count_error(self, code: str, message: str = "", n: int = 1) -> None:
        self.errors[code] = self.errors.get(code, 0) + n
        if message:
            self.error_messages.append(f"{code}: {message}")


# ------------------------------------------------------------------------------------------- launching


def launch_capacity(
    rt: Runtime,
    world: World,
    pods: list[Pod],
    *,
    exclude_nodes: Iterable[str] = (),
    extra_unavailable: Iterable[tuple[str, str, str]] = (),
    dry_run: bool = False,
    reason: str = "pending pods",
    retries: int = 2,
) -> LaunchOutcome:
    """Plan ``pods`` against the existing and in-flight nodes (minus ``exclude_nodes``, node names or
    instance ids) and launch the NodeClaims the plan needs, one EC2 Fleet each.

    Pods get events: the NodePool, type, zone, capacity type and instance launched for them, or why
    they cannot be placed. ``dry_run`` plans and reports only. A NodeClaim whose every offering fails
    with a capacity error is planned again without those offerings, at most ``retries`` times.
    """
    outcome = LaunchOutcome(dry_run=dry_run)
    if not pods:
        return outcome
    if dry_run:
        return _plan_and_launch(rt, world, pods, outcome, exclude_nodes, extra_unavailable, reason, retries)
    try:
        with leases.hold(rt.aws.dynamodb, rt.settings.table_name, "launch", wait_seconds=LEASE_WAIT_SECONDS):
            # Another invocation may have launched since this one read the world: count its instances too.
            world.refresh_instances(rt.aws.ec2, rt.cluster)
            return _plan_and_launch(rt, world, pods, outcome, exclude_nodes, extra_unavailable, reason, retries)
    except leases.LeaseBusy as exc:
        outcome.count_error("LaunchInProgress", str(exc))
        outcome.unschedulable.extend((p.key, "another invocation is launching; planned again next run") for p in pods)
        return outcome


def _plan_and_launch(
    rt: Runtime,
    world: World,
    pods: list[Pod],
    outcome: LaunchOutcome,
    exclude_nodes: Iterable[str],
    extra_unavailable: Iterable[tuple[str, str, str]],
    reason: str,
    retries: int,
    prior_usage: dict[str, res.Resources] | None = None,
) -> LaunchOutcome:
    dry_run = outcome.dry_run
    extra = set(extra_unavailable)
    everything = world.existing_nodes()
    existing = world.existing_nodes(exclude=exclude_nodes)
    # A node being replaced takes no pods, but until its instance is gone it still counts against its
    # NodePool's limits: a replacement must fit beside it.
    kept = {n.name for n in existing}
    limits_usage: dict[str, res.Resources] = dict(prior_usage or {})
    for node in everything:
        if node.name not in kept and node.nodepool:
            limits_usage[node.nodepool] = res.add(limits_usage.get(node.nodepool, {}), node.capacity or node.allocatable)
    types_by_pool = world.types_by_pool()
    if extra:
        forever = dict.fromkeys(extra, _FOREVER)
        types_by_pool = {p: catalogs.mark_unavailable(ts, forever, now=0.0) for p, ts in types_by_pool.items()}
    plan = solve(
        pods,
        world.nodepools.values(),
        types_by_pool,
        existing_nodes=existing,
        daemonset_pods=world.daemonset_pods(),
        unavailable=set(world.unavailable) | extra,
        limits_usage=limits_usage,
        node_labels_by_pool=world.labels_by_pool(),
    )
    outcome.solve_seconds = plan.solve_seconds
    outcome.planned = list(plan.node_claims)
    telemetry.seconds(telemetry.SOLVE_SECONDS, plan.solve_seconds)
    in_flight_names = {n.name for n in existing if n.in_flight}
    for placement in plan.existing:
        if placement.node in in_flight_names:
            outcome.waiting[placement.node] = [p.key for p in placement.pods]
        else:
            outcome.placed_existing += len(placement.pods)
    unschedulable = [(u.pod, u.reason) for u in plan.unschedulable]
    _note_pool_limits(plan, outcome)

    budget = ClusterBudget.of(rt.settings.cluster_limits, everything) if rt.settings.cluster_limits else None
    recorder = None if dry_run else _recorder(rt, world)
    retry_pods: list[Pod] = []
    failed_offerings: set[tuple[str, str, str]] = set()
    launchable: list[tuple[NodeClaim, list[InstanceType]]] = []
    for claim in plan.node_claims:
        pool_types = {t.name: t for t in types_by_pool.get(claim.nodepool, [])}
        options = [pool_types[n] for n in claim.instance_types if n in pool_types]
        if budget is not None:
            blocked = budget.blocked(_largest(options), _dearest(options, claim))
            if blocked:
                outcome.limits.append({"scope": "cluster", "nodePool": claim.nodepool, "reason": blocked})
                unschedulable.extend((p, blocked) for p in claim.pods)
                continue
            # Reserved before the launch (its largest, dearest option), so claims launched together
            # cannot overrun a cluster-wide limit whichever types the Fleet picks.
            budget.add(_largest(options), _dearest(options, claim))
        if dry_run:
            outcome.launches.append(
                Launch(claim.nodepool, "", claim.instance_types[0] if claim.instance_types else "",
                       ",".join(claim.zones), ",".join(claim.capacity_types), claim.price,
                       [p.key for p in claim.pods], list(claim.instance_types))
            )
            continue
        launchable.append((claim, options))
    for group, options in _identical_claims(launchable):
        for claim, launched, capacity_failures in _launch_claims(rt, world, group, options, outcome, reason):
            if launched is None:
                if capacity_failures and retries > 0:
                    # Every offering the plan chose is out of capacity: plan these pods again without them.
                    retry_pods.extend(claim.pods)
                    failed_offerings |= capacity_failures
                    continue
                why = "the launch failed: " + (
                    outcome.error_messages[-1] if outcome.error_messages else "no capacity"
                )
                unschedulable.extend((p, why) for p in claim.pods)
                continue
            outcome.launches.append(launched)
            if recorder is not None:
                _nominate(recorder, claim.pods, launched)
    outcome.unschedulable = [(p.key, why) for p, why in unschedulable]
    if recorder is not None:
        _warn_unschedulable(recorder, unschedulable)
    if retry_pods:
        # Still under the lease. What this pass launched is not in the world yet: it counts against the
        # limits of the retry, but takes none of its pods (it was launched for others).
        launched_usage = dict(prior_usage or {})
        for launch in outcome.launches:
            it = next((t for t in types_by_pool.get(launch.nodepool, []) if t.name == launch.instance_type), None)
            if it is not None:
                launched_usage[launch.nodepool] = res.add(launched_usage.get(launch.nodepool, {}), it.capacity)
        again = _plan_and_launch(
            rt, world, retry_pods, LaunchOutcome(dry_run=dry_run), exclude_nodes, extra | failed_offerings,
            reason, retries - 1, launched_usage,
        )
        _merge(outcome, again)
    return outcome


def _merge(outcome: LaunchOutcome, again: LaunchOutcome) -> None:
    outcome.launches.extend(again.launches)
    outcome.unschedulable.extend(again.unschedulable)
    outcome.limits.extend(x for x in again.limits if x not in outcome.limits)
    outcome.error_messages.extend(again.error_messages)
    for code, n in again.errors.items():
        outcome.errors[code] = outcome.errors.get(code, 0) + n
    for node, pods in again.waiting.items():
        outcome.waiting.setdefault(node, []).extend(pods)
    outcome.solve_seconds += again.solve_seconds


def launch_key(claim: NodeClaim) -> str:
    """The planned node's identity: the pool and the pods it is for, so a retry of the same launch
    (same pods still waiting) reuses the Fleet client token and EC2 answers with the same instances."""
    ids = sorted(p.uid or p.key for p in claim.pods)
    return hashlib.sha256("\0".join([claim.nodepool, *ids]).encode()).hexdigest()[:32]


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
    key = launch_key(first) if len(claims) == 1 else hashlib.sha256(
        "\0".join(launch_key(c) for c in claims).encode()
    ).hexdigest()[:32]
    try:
        result = rt.launcher.launch(pool, node_class, options, key, len(claims), first.requirements)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Unknown"
        outcome.count_error(code, f"nodepool {pool.name}: {error.get('Message', '')}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})
        return [(c, None, set()) for c in claims]
    except (ValueError, SettingsError, BotoCoreError) as exc:
        # Configuration the account cannot satisfy (no AMI, no subnet, bad user data...): say which.
        code = type(exc).__name__
        outcome.count_error(code, f"nodepool {pool.name}: {exc}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})
        return [(c, None, set()) for c in claims]
    _count_launch_errors(result, outcome, pool.name)
    failed = {e.offering for e in result.offering_errors if e.is_capacity_error}
    out: list[tuple[NodeClaim, Launch | None, set[tuple[str, str, str]]]] = []
    now = clock.now()
    for claim, inst in zip(claims, [*result.instances, *([None] * len(claims))], strict=False):
        if inst is None:
            out.append((claim, None, failed))
            continue
        launch = Launch(pool.name, inst.instance_id, inst.instance_type, inst.zone, inst.capacity_type, inst.price,
                        [p.key for p in claim.pods], list(claim.instance_types), inst.launch_template)
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
    return out


def _count_launch_errors(result: LaunchResult, outcome: LaunchOutcome, pool: str) -> None:
    for e in result.offering_errors:
        outcome.count_error(e.code, f"nodepool {pool}: {e.instance_type} in {e.zone} ({e.capacity_type}): {e.message}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: e.code})
    for code, message in result.request_errors:
        outcome.count_error(code, f"nodepool {pool}: {message}")
        telemetry.count(telemetry.LAUNCH_FAILURES, **{telemetry.ERROR_CODE_DIMENSION: code})


def _largest(options: Sequence[InstanceType]) -> dict[str, int]:
    """The most of each resource any option has: what the node counts against a limit at worst."""
    out: dict[str, int] = {}
    for it in options:
        for k, v in it.capacity.items():
            out[k] = max(out.get(k, 0), v)
    return out


def _dearest(options: Sequence[InstanceType], claim: NodeClaim) -> float:
    prices = [
        o.price
        for it in options
        for o in it.offerings
        if o.available and o.zone in claim.zones and o.capacity_type in claim.capacity_types
    ]
    return max(prices, default=claim.price)


def _note_pool_limits(plan: Plan, outcome: LaunchOutcome) -> None:
    pools: dict[str, str] = {}
    for u in plan.unschedulable:
        for pool in u.limited_pools:
            pools.setdefault(pool, u.reason)
    for pool, why in sorted(pools.items()):
        outcome.limits.append({"scope": "nodepool", "nodePool": pool, "reason": why})
        telemetry.count(telemetry.LIMIT_REACHED, **{telemetry.NODEPOOL_DIMENSION: pool})


# ----------------------------------------------------------------------------------------------- events


def _recorder(rt: Runtime, world: World) -> k8s_events.EventRecorder:
    # Decisions follow the world's clock (simulated in sim/), advanced by real time since it was read.
    base = world.now.timestamp()
    started = time.monotonic()
    return k8s_events.EventRecorder(
        rt.api, dedupe_seconds=EVENT_WINDOW_SECONDS, on_repeat="skip", clock=lambda: base + time.monotonic() - started
    )


def nomination_message(launch: Launch) -> str:
    return (
        f"Pod should schedule on NodePool {launch.nodepool}: instance {launch.instance_id} "
        f"({launch.instance_type}, {launch.zone}, {launch.capacity_type}) launched for it by nodescale"
    )


def _nominate(recorder: k8s_events.EventRecorder, pods: Iterable[Pod], launch: Launch) -> None:
    message = nomination_message(launch)
    for p in pods:
        _record(recorder, p, NOMINATED, message, k8s_events.NORMAL)


def _warn_unschedulable(recorder: k8s_events.EventRecorder, items: Iterable[tuple[Pod, str]]) -> None:
    for p, why in items:
        _record(recorder, p, FAILED_SCHEDULING, f"nodescale cannot place the pod: {why}", k8s_events.WARNING)


def _record(recorder: k8s_events.EventRecorder, pod: Pod, reason: str, message: str, type_: str) -> None:
    try:
        recorder.pod(pod.namespace, pod.name, reason, message, type_, uid=pod.uid)
    except (ApiException, OSError, ValueError) as exc:
        # An event is information; failing to write one must not undo a launch.
        log.warning("could not record a pod event", extra={"pod": pod.key, "reason": reason, "error": str(exc)})


# ---------------------------------------------------------------------------------------------- passes


def pending_since(pod: Pod) -> datetime | None:
    """When the default scheduler first said the pod cannot be placed (else when it was created)."""
    raw = pod.raw or {}
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            found = clock.parse_timestamp(cond.get("lastTransitionTime"))
            if found is not None:
                return found
    return clock.parse_timestamp((raw.get("metadata") or {}).get("creationTimestamp"))


class Summary:
    """What one invocation did, accumulated over its passes."""

    def __init__(self, mode: str, dry_run: bool) -> None:
        self.started = time.monotonic()
        self.data: dict[str, Any] = {
            "mode": mode,
            "dryRun": dry_run,
            "podsSeen": 0,
            "batches": 0,
            "launches": [],
            "waitingForInFlight": 0,
            "placedOnExisting": 0,
            "errors": {},
            "unschedulable": [],
            "limits": [],
            "configErrors": [],
            "podErrors": [],
            "registrationTimeouts": [],
            "solveSeconds": 0.0,
        }
        self._seen: set[str] = set()

    def add_world(self, world: World) -> None:
        errors = self.data["configErrors"]
        for e in world.config_errors:
            text = str(e)
            if text not in errors:
                errors.append(text)
                log.error("configuration error: %s", text)
        for key, why in world.pod_errors:
            entry = {"pod": key, "reason": why}
            if entry not in self.data["podErrors"]:
                self.data["podErrors"].append(entry)

    def add_outcome(self, pods: Sequence[Pod], outcome: LaunchOutcome) -> None:
        self._seen.update(p.uid or p.key for p in pods)
        self.data["podsSeen"] = len(self._seen)
        self.data["batches"] += 1
        self.data["launches"].extend(launch.to_dict() for launch in outcome.launches)
        self.data["waitingForInFlight"] = sum(len(v) for v in outcome.waiting.values())
        self.data["placedOnExisting"] = outcome.placed_existing
        for code, n in outcome.errors.items():
            self.data["errors"][code] = self.data["errors"].get(code, 0) + n
        # The last pass knows best which pods are still left.
        self.data["unschedulable"] = [{"pod": k, "reason": r} for k, r in outcome.unschedulable]
        for entry in outcome.limits:
            if entry not in self.data["limits"]:
                self.data["limits"].append(entry)
        self.data["solveSeconds"] = round(self.data["solveSeconds"] + outcome.solve_seconds, 6)

    def finish(self) -> dict[str, Any]:
        self.data["seconds"] = round(time.monotonic() - self.started, 3)
        self.data["pricePerHourLaunched"] = round(sum(x["price"] for x in self.data["launches"]), 6)
        if self.data["dryRun"]:
            self.data["planned"] = self.data.pop("launches")
            self.data["launches"] = []
        log.info("provisioner summary", extra={"summary": self.data})
        return self.data


def _expire_unregistered(rt: Runtime, world: World, summary: Summary, dry_run: bool) -> list[str]:
    """Instances whose Node never came within the registration timeout: terminated (if ours), their
    pods planned again. Returns the ids to leave out of this pass's planning."""
    stale = ec2_instances.unregistered(
        world.unregistered_instances(), (), rt.settings.registration_timeout_seconds, now=world.now
    )
    if not stale:
        return []
    ids = [i.instance_id for i in stale]
    if not dry_run:
        result = ec2_instances.terminate(rt.aws.ec2, ids, rt.cluster)
        ids = result.terminated + result.missing
        for iid in result.terminated:
            log.warning("instance did not register in time; terminated",
                        extra={"instance_id": iid, "timeout_seconds": rt.settings.registration_timeout_seconds})
    summary.data["registrationTimeouts"].extend(i for i in ids if i not in summary.data["registrationTimeouts"])
    return ids


def _pass(rt: Runtime, summary: Summary, dry_run: bool) -> LaunchOutcome:
    world = read_world(rt)
    summary.add_world(world)
    stale = _expire_unregistered(rt, world, summary, dry_run)
    pods = world.pending
    telemetry.gauge(telemetry.PENDING_PODS, len(pods), telemetry.Unit.Count)
    ages = [(world.now - s).total_seconds() for s in map(pending_since, pods) if s is not None]
    if ages:
        telemetry.seconds(telemetry.PENDING_POD_AGE, max(0.0, max(ages)))
    outcome = launch_capacity(rt, world, pods, exclude_nodes=stale, dry_run=dry_run)
    if outcome.unschedulable:
        telemetry.count(telemetry.UNSCHEDULABLE_PODS, len(outcome.unschedulable))
    summary.add_outcome(pods, outcome)
    return outcome


def provision_once(rt: Runtime, *, dry_run: bool = False) -> dict[str, Any]:
    """One pass over every provisionable pod (the poll mode, and `nodescale provision --once`)."""
    rt.begin_invocation()
    summary = Summary("poll", dry_run)
    _pass(rt, summary, dry_run)
    return summary.finish()


def provision_watch(rt: Runtime, deadline: float, *, dry_run: bool = False) -> dict[str, Any]:
    """Watch for pods the default scheduler gave up on and act on them in batches (1 s quiet, 10 s at
    most) until ``deadline`` (a ``time.monotonic()`` value)."""
    rt.begin_invocation()
    summary = Summary("watch", dry_run)
    for batch in watch_pending_pods(rt.api, deadline):
        if not batch.pending:
            continue
        _pass(rt, summary, dry_run)
    if summary.data["batches"] == 0:
        # A quiet period still checks that what was launched earlier has registered.
        world = read_world(rt, include_pods=False)
        summary.add_world(world)
        _expire_unregistered(rt, world, summary, dry_run)
    return summary.finish()


def in_flight_instance(node_name: str) -> str | None:
    """The instance id behind an in-flight stand-in node's name."""
    return node_name[len(IN_FLIGHT_PREFIX):] if node_name.startswith(IN_FLIGHT_PREFIX) else None


__all__ = [
    "Launch",
    "LaunchOutcome",
    "in_flight_instance",
    "launch_capacity",
    "launch_key",
    "nomination_message",
    "pending_since",
    "provision_once",
    "provision_watch",
]
