"""Launching capacity: planned for pods (``launch_capacity``) or as given (``launch_claims``).

    launch_capacity(rt, world, pods, ...) -> LaunchOutcome   plan pods against what exists and launch the rest
    launch_claims(rt, world, claims, ...) -> LaunchOutcome    launch given NodeClaims as they are (disruption)

Capacity on its way counts before anything new is launched: instances this cluster launched whose
Node has not registered and Nodes not yet Ready are handed to the bin-packer as in-flight nodes, so
pods that fit there are planned onto them and nothing is launched for them again. The provisioner's
passes (provisioner.py) and the interruption function call :func:`launch_capacity`; the disruption
function launches the NodeClaims its commands carry with :func:`launch_claims`, planning nothing again.
Apart from the provisioner's passes (watch, registration, migration, status) so a function that only
launches imports only this (#32, cold start).

A pass of :func:`launch_capacity` is four steps: plan (the solver), the cluster budget (claims a
cluster-wide limit holds back), launch (``provision_launch``: one Fleet per group of identical
claims, pod events) and a retry, without the offerings that ran out of capacity.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ... import telemetry
from ...aws import catalog as catalogs
from ...aws import leases
from ...k8s import events as k8s_events
from ...model import resources as res
from ...model.currency import currency_of, render
from ...model.instancetype import InstanceType
from ...model.pod import Pod
from ...runtime import Runtime
from ...scheduling.plan import ExistingNode, NodeClaim, Plan
from ...scheduling.scheduler import solve
from ..world import World, refresh_instances
from .cluster_budget import ClusterBudget
from .launch import (
    LaunchLedger,
    LaunchOutcome,
    LimitHit,
    LimitScope,
    Retry,
    launch_admitted,
    merge,
    planned_launch,
    warn_unschedulable,
)
from .unmet import report_unmet, unmet_pods

log = logging.getLogger(__name__)


# An event is not repeated for the same pod and reason within this window (also across invocations).
EVENT_WINDOW_SECONDS = 60.0
# Pod events (Nominated, FailedScheduling, ...) one pass writes per reason; past it they are dropped and
# logged, so a launch for 100,000 pods costs the API server 1,000 event writes, not 100,000.
EVENTS_PER_REASON = 1000
# Offerings the caller excludes are marked unavailable until far beyond any invocation.
_FOREVER = 1e12
# How long a launch waits for another invocation's launch to finish before leaving it to the next run.
LEASE_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class _Ask:
    """What one planning pass is asked; a retry asks again for fewer pods, with fewer offerings."""

    pods: list[Pod]
    exclude_nodes: Iterable[str]  # node names or instance ids that take no pods
    unavailable: set[tuple[str, str, str]]  # offerings the caller (or a failed launch) rules out
    reason: str
    retries: int
    prior_usage: dict[str, res.Resources]  # launched by earlier passes, not in the world yet
    fence: Callable[[], None] | None = None  # the launch lease's check, before each CreateFleet
    # What this call's launches changed that the world does not know yet: shared with its retries.
    ledger: LaunchLedger = dataclasses.field(default_factory=LaunchLedger)


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
    deadline: float | None = None,
) -> LaunchOutcome:
    """Plan ``pods`` against the existing and in-flight nodes (minus ``exclude_nodes``, node names or
    instance ids) and launch the NodeClaims the plan needs, one EC2 Fleet each.

    Pods get events: the NodePool, type, zone, capacity type and instance launched for them, or why
    they cannot be placed. ``dry_run`` plans and reports only. A NodeClaim whose every offering fails
    with a capacity error is planned again without those offerings, at most ``retries`` times.
    ``outcome.world`` is the snapshot to go on with (instances re-read, what was launched counted).
    No Fleet request starts past ``deadline`` (a ``time.monotonic()`` value): the pods not launched for by
    then are left to the next run, as when the launch lease is lost.
    """
    outcome = LaunchOutcome(dry_run=dry_run, world=world)
    if not pods:
        return outcome
    ask = _Ask(pods, exclude_nodes, set(extra_unavailable), reason, retries, {})
    if dry_run:
        return _plan_and_launch(rt, world, ask, outcome)
    try:
        with leases.hold(rt.aws.dynamodb, rt.settings.table_name, "launch", wait_seconds=LEASE_WAIT_SECONDS) as lease:
            # Another invocation may have launched since this one read the world: count its instances too.
            world = refresh_instances(world, rt.aws.ec2)
            return _plan_and_launch(rt, world, dataclasses.replace(ask, fence=_fence(lease.check, deadline)), outcome)
    except leases.LeaseBusy as exc:
        outcome.count_error("LaunchInProgress", str(exc))
        outcome.unschedulable.extend((p.key, "another invocation is launching; planned again next run")
                                     for p in pods if not p.buffer)
        return outcome
    except leases.LeaseLost as exc:
        lease_lost(outcome, exc)
        _left_for_next_run(outcome, "the launch lease was lost before this pass launched for it")
        return outcome
    except OutOfTime as exc:
        log.warning("out of time: launching nothing more in this pass", extra={"reason": str(exc)})
        outcome.count_error("OutOfTime", str(exc))
        _left_for_next_run(outcome, "this invocation ran out of time before it launched for this pod")
        return outcome
    finally:
        outcome.world = ask.ledger.applied(world)


def _left_for_next_run(outcome: LaunchOutcome, why: str) -> None:
    """The pods of the plan's claims that were not launched, each with ``why``: the next run plans them again.
    Pods the plan put on existing or in-flight nodes are not among them (they wait for those nodes)."""
    launched = {key for launch in outcome.launches for key in launch.pods}
    outcome.unschedulable = [(p.key, f"{why}; planned again next run") for claim in outcome.planned
                             for p in claim.pods if not p.buffer and p.key not in launched]


class OutOfTime(Exception):
    """The pass's time for launching ran out before a Fleet request (the launches before it stand)."""


def _fence(check: Callable[[], None], deadline: float | None) -> Callable[[], None]:
    """The check before each CreateFleet: the launch lease still held, and time left to launch."""
    def fence() -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise OutOfTime("no Fleet request starts this close to the invocation's end")
        check()
    return fence


def lease_lost(outcome: LaunchOutcome, exc: leases.LeaseLost) -> None:
    """A pass that lost the launch lease launches nothing more: another invocation holds it and may be
    launching for the same pods (what was launched before the loss stays in ``outcome``)."""
    log.error("launch lease lost: launching nothing more in this pass", extra={"reason": str(exc)})
    outcome.count_error("LeaseLost", str(exc))


def _plan_and_launch(rt: Runtime, base: World, ask: _Ask, outcome: LaunchOutcome) -> LaunchOutcome:
    """One pass: plan, leave out the pods a node launched for them cannot take (``unmet``), hold the
    claims to the cluster budget, launch them (a dry run lists them), then plan again, without the
    offerings that ran out of capacity, what could not launch. ``base`` is the world as read (or re-read);
    what the pass launched so far (``ask.ledger``) is applied to it here."""
    world = ask.ledger.applied(base)
    ask_pods = ask.pods
    everything = world.existing_nodes()
    types_by_pool = world.types_by_pool()
    if ask.unavailable:
        forever = dict.fromkeys(ask.unavailable, _FOREVER)
        types_by_pool = {p: catalogs.mark_unavailable(ts, forever, now=0.0) for p, ts in types_by_pool.items()}
    plan = _plan(world, ask, everything, types_by_pool, outcome)
    recorder = None if outcome.dry_run else event_recorder(rt, world)
    unmet = unmet_pods(rt, world, (p for claim in plan.node_claims for p in claim.pods), ask.exclude_nodes)
    if unmet:
        # Capacity launched for these pods came up and cannot take them: plan the others without them.
        report_unmet(recorder, ask.pods, unmet)
        ask = dataclasses.replace(ask, pods=[p for p in ask.pods if p.key not in unmet])
        plan = _plan(world, ask, everything, types_by_pool, outcome)
    unschedulable = [(u.pod, u.reason) for u in plan.unschedulable]
    unschedulable.extend((p, unmet[p.key].why) for p in ask_pods if p.key in unmet)
    _note_pool_limits(plan, outcome)

    admitted = within_cluster_budget(rt, everything, plan.node_claims, types_by_pool, outcome, unschedulable)
    if outcome.dry_run:
        outcome.launches.extend(planned_launch(claim) for claim, _ in admitted)
        admitted = []
    retry = launch_admitted(rt, world, admitted, outcome, unschedulable, reason=ask.reason, recorder=recorder,
                            may_retry=ask.retries > 0, fence=ask.fence, replacing=ask.exclude_nodes,
                            ledger=ask.ledger)
    # A CapacityBuffer's pods are no one's to tell: their shortfall is the buffer's, noted apart.
    outcome.buffer_unplaced.extend((p.key, why) for p, why in unschedulable if p.buffer)
    unschedulable = [(p, why) for p, why in unschedulable if not p.buffer]
    outcome.unschedulable = [(p.key, why) for p, why in unschedulable]
    if recorder is not None:
        # An unmet pod has its own event (report_unmet) saying the same: one Warning is enough.
        warn_unschedulable(recorder, [(p, why) for p, why in unschedulable if p.key not in unmet])
    if recorder is not None and recorder.dropped:
        log.warning("pod events over the per-pass limit were not written",
                    extra={"limit": EVENTS_PER_REASON, "dropped": dict(recorder.dropped)})
    if retry.pods:
        _retry(rt, base, ask, retry, types_by_pool, outcome)
    return outcome


def _plan(
    world: World,
    ask: _Ask,
    everything: list[ExistingNode],
    types_by_pool: dict[str, list[InstanceType]],
    outcome: LaunchOutcome,
) -> Plan:
    """Solve for the asked pods against the nodes kept; note what lands on existing or in-flight nodes."""
    existing = world.existing_nodes(exclude=ask.exclude_nodes)
    # A node being replaced takes no pods, but until its instance is gone it still counts against its
    # NodePool's limits, limits.nodes included: a replacement must fit beside it.
    kept = {n.name for n in existing}
    limits_usage: dict[str, res.Resources] = dict(ask.prior_usage)
    for node in everything:
        if node.name not in kept and node.nodepool:
            counted = {**(node.capacity or node.allocatable), "nodes": 1}
            limits_usage[node.nodepool] = res.add(limits_usage.get(node.nodepool, {}), counted)
    plan = solve(
        ask.pods,
        # A static pool (spec.replicas) keeps its count of nodes: pending pods launch none of its nodes.
        [p for p in world.nodepools.values() if not p.static],
        types_by_pool,
        existing_nodes=existing,
        daemonset_pods=world.daemonset_pods(),
        unavailable=set(world.unavailable) | ask.unavailable,
        limits_usage=limits_usage,
        node_labels_by_pool=world.labels_by_pool(),
        repack=world.gates.repack,
    )
    outcome.solve_seconds = plan.solve_seconds
    outcome.planned = list(plan.node_claims)
    telemetry.seconds(telemetry.SOLVE_SECONDS, plan.solve_seconds)
    in_flight_names = {n.name for n in existing if n.in_flight}
    for placement in plan.existing:
        real = [p for p in placement.pods if not p.buffer]  # a buffer's pods wait for no one
        if not real:
            continue
        if placement.node in in_flight_names:
            outcome.waiting[placement.node] = [p.key for p in real]
        else:
            outcome.placed_existing += len(real)
    return plan


def within_cluster_budget(
    rt: Runtime,
    everything: list[ExistingNode],
    claims: Iterable[NodeClaim],
    types_by_pool: dict[str, list[InstanceType]],
    outcome: LaunchOutcome,
    unschedulable: list[tuple[Pod, str]],
) -> list[tuple[NodeClaim, list[InstanceType]]]:
    """The claims the cluster-wide limits leave room for, each with its instance-type options; a claim
    held back is noted in ``outcome.limits`` and its pods in ``unschedulable``."""
    budget = ClusterBudget.of(rt.settings.cluster_limits, everything) if rt.settings.cluster_limits else None
    admitted: list[tuple[NodeClaim, list[InstanceType]]] = []
    for claim in claims:
        pool_types = {t.name: t for t in types_by_pool.get(claim.nodepool, [])}
        options = [pool_types[n] for n in claim.instance_types if n in pool_types]
        if budget is not None:
            held = budget.blocked(_largest(options), _dearest(options, claim))
            if held is not None:
                # Shown in pod events, logs, status and explain: in the region's currency from here on.
                blocked = render(held, currency_of(rt.settings.region))
                outcome.limits.append(LimitHit(LimitScope.CLUSTER, claim.nodepool, blocked))
                unschedulable.extend((p, blocked) for p in claim.pods)
                continue
            # Reserved before the launch (its largest, dearest option), so claims launched together
            # cannot overrun a cluster-wide limit whichever types the Fleet picks.
            budget.add(_largest(options), _dearest(options, claim))
        admitted.append((claim, options))
    return admitted


def _retry(
    rt: Runtime,
    base: World,
    ask: _Ask,
    retry: Retry,
    types_by_pool: dict[str, list[InstanceType]],
    outcome: LaunchOutcome,
) -> None:
    """Plan the pods whose launch ran out of capacity again, without the offerings that failed."""
    # Still under the lease. What this pass launched is not in the world yet: it counts against the
    # limits of the retry, but takes none of its pods (it was launched for others).
    launched_usage = dict(ask.prior_usage)
    for launch in outcome.launches:
        it = next((t for t in types_by_pool.get(launch.nodepool, []) if t.name == launch.instance_type), None)
        if it is not None:
            launched_usage[launch.nodepool] = res.add(launched_usage.get(launch.nodepool, {}), it.capacity)
    again = dataclasses.replace(
        ask, pods=retry.pods, unavailable=ask.unavailable | retry.offerings, retries=ask.retries - 1,
        prior_usage=launched_usage,
    )
    merge(outcome, _plan_and_launch(rt, base, again, LaunchOutcome(dry_run=outcome.dry_run)))


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
        outcome.limits.append(LimitHit(LimitScope.NODEPOOL, pool, why))
        telemetry.count(telemetry.LIMIT_REACHED, **{telemetry.NODEPOOL_DIMENSION: pool})


def launch_claims(
    rt: Runtime, world: World, claims: list[NodeClaim], *, reason: str, replacing: Iterable[str] = ()
) -> LaunchOutcome:
    """Launch exactly ``claims`` (a disruption command's replacements), planning nothing again: under the
    launch lease, held to the cluster budget, their pods nominated. ``replacing`` names the nodes they
    replace (part of the Fleet client token). A claim that gets no instance puts its pods in
    ``unschedulable`` with why; there is no retry with other offerings: the next pass decides again.
    ``outcome.world`` is the snapshot to go on with (what was launched counted)."""
    outcome = LaunchOutcome()
    if not claims:
        return outcome
    try:
        with leases.hold(rt.aws.dynamodb, rt.settings.table_name, "launch", wait_seconds=LEASE_WAIT_SECONDS) as lease:
            unschedulable: list[tuple[Pod, str]] = []
            admitted = within_cluster_budget(rt, world.existing_nodes(), claims, world.types_by_pool(), outcome,
                                              unschedulable)
            ledger = LaunchLedger()
            launch_admitted(rt, world, admitted, outcome, unschedulable, reason=reason,
                            recorder=event_recorder(rt, world), may_retry=False, fence=lease.check, replacing=replacing,
                            ledger=ledger)
            outcome.unschedulable = [(p.key, why) for p, why in unschedulable]
            outcome.world = ledger.applied(world)
    except leases.LeaseBusy as exc:
        outcome.count_error("LaunchInProgress", str(exc))
        outcome.unschedulable = [(p.key, "another invocation is launching; decided again next run")
                                 for c in claims for p in c.pods]
    except leases.LeaseLost as exc:
        lease_lost(outcome, exc)
        launched = {key for launch in outcome.launches for key in launch.pods}
        outcome.unschedulable = [(p.key, "the launch lease was lost before this pass launched for it")
                                 for c in claims for p in c.pods if p.key not in launched]
    return outcome



def event_recorder(rt: Runtime, world: World) -> k8s_events.EventRecorder:
    # Decisions follow the world's clock (simulated in sim/), advanced by real time since it was read.
    base = world.now.timestamp()
    started = time.monotonic()
    return k8s_events.EventRecorder(
        rt.api, dedupe_seconds=EVENT_WINDOW_SECONDS, on_repeat="skip", clock=lambda: base + time.monotonic() - started,
        limit_per_reason=EVENTS_PER_REASON,
    )
