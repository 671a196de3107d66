"""The provisioner use-case: from pending pods to EC2 Fleet launches.

    provision_once(rt, dry_run=False) -> Summary              one pass over every provisionable pod (poll mode),
                                                              once a burst of them stops growing
    provision_watch(rt, deadline) -> Summary                  batches of pending pods until the deadline (watch mode),
                                                              registering each Node as it joins

A pass reads the world, registers the Nodes that joined, adopts and backfills NodeClaims, expires
instances that never registered, launches for the pending pods (capacity.launch_capacity), keeps the
static pools at spec.replicas and writes the pools' status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ... import telemetry
from ...aws import instances as ec2_instances
from ...aws import leases
from ...k8s import podcache
from ...k8s.watch import JoinedNodes, settled_pending_pods, watch_pending_pods
from ...model.pod import Pod
from ...runtime import Runtime
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling.plan import NodeClaim
from ...scheduling.static import static_claim
from ..leaving import leaving_pods
from ..world import World, read_world, refresh_instances
from . import migration, nodeclaims, pool_status
from . import registration as node_registration
from .capacity import LEASE_WAIT_SECONDS, launch_capacity, lease_lost, within_cluster_budget
from .launch import LaunchLedger, LaunchOutcome, launch_admitted, pending_since, planned_launch
from .summary import Mode, Summary, Tally

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------- static capacity


def static_shortfall(world: World) -> dict[str, int]:
    """How many nodes each static pool (spec.replicas) lacks: its registered and in-flight nodes not
    being deleted count; only ``limits.nodes`` caps the count, as in Karpenter."""
    have: dict[str, int] = {}
    for node in world.existing_nodes():
        if node.nodepool and not node.unschedulable:
            have[node.nodepool] = have.get(node.nodepool, 0) + 1
    out: dict[str, int] = {}
    for name, pool in world.nodepools.items():
        if pool.replicas is None:
            continue
        missing = pool.replicas - have.get(name, 0)
        if "nodes" in pool.limits:
            missing = min(missing, pool.limits["nodes"] - have.get(name, 0))
        if missing > 0:
            out[name] = missing
    return out


def keep_static_capacity(rt: Runtime, world: World, *, dry_run: bool = False) -> LaunchOutcome:
    """Launch the nodes static pools lack (no pods: the pool keeps spec.replicas nodes regardless);
    ``outcome.world`` is the snapshot to go on with."""
    outcome = LaunchOutcome(dry_run=dry_run, world=world)
    # Karpenter runs its static provisioning only with the StaticCapacity gate on.
    if not world.gates.static_capacity or not any(p.static for p in world.nodepools.values()):
        return outcome
    if dry_run:
        return _launch_static(rt, world, outcome)
    ledger = LaunchLedger()
    try:
        with leases.hold(rt.aws.dynamodb, rt.settings.table_name, "launch", wait_seconds=LEASE_WAIT_SECONDS) as lease:
            world = refresh_instances(world, rt.aws.ec2)
            return _launch_static(rt, world, outcome, lease.check, ledger)
    except leases.LeaseBusy as exc:
        outcome.count_error("LaunchInProgress", str(exc))
        return outcome
    except leases.LeaseLost as exc:
        lease_lost(outcome, exc)
        return outcome
    finally:
        outcome.world = ledger.applied(world)


def _launch_static(
    rt: Runtime, world: World, outcome: LaunchOutcome, fence: Callable[[], None] | None = None,
    ledger: LaunchLedger | None = None,
) -> LaunchOutcome:
    shortfall = static_shortfall(world)
    if not shortfall:
        return outcome
    everything = world.existing_nodes()
    types_by_pool = world.types_by_pool()
    labels_by_pool = world.labels_by_pool()
    admitted_claims: list[NodeClaim] = []
    for name, missing in sorted(shortfall.items()):
        pool = world.nodepools[name]
        # The pool's current instances name the launch: a retry in the same state reuses the Fleet
        # token, a launch after a node went asks for a new one.
        members = sorted(n.name for n in everything if n.nodepool == name)
        for i in range(missing):
            claim = static_claim(pool, types_by_pool.get(name, []), extra_labels=labels_by_pool.get(name),
                                 unavailable=world.unavailable, key=f"static\0{','.join(members)}\0{i}")
            if claim is None:
                outcome.count_error("NoUsableOptions", f"nodepool {name}: no instance type to keep spec.replicas")
                break
            admitted_claims.append(claim)
    unschedulable: list[tuple[Pod, str]] = []
    admitted = within_cluster_budget(rt, everything, admitted_claims, types_by_pool, outcome, unschedulable)
    if outcome.dry_run:
        outcome.launches.extend(planned_launch(claim) for claim, _ in admitted)
        return outcome
    launch_admitted(rt, world, admitted, outcome, unschedulable, reason="static capacity", recorder=None,
                    may_retry=False, fence=fence, ledger=ledger)
    return outcome


# ---------------------------------------------------------------------------------------------- passes


def _expire_unregistered(rt: Runtime, world: World, tally: Tally, dry_run: bool) -> list[str]:
    """Instances whose Node never came within the registration timeout: terminated (if ours), their
    pods planned again; with the NodeClaims nodescale created whose node never registered (Karpenter's
    liveness, #30.1), deleted once their instances are. Returns what to leave out of this pass's planning: the
    instance ids, and the names of the NodeClaims deleted (their stand-ins in flight)."""
    timeout = rt.settings.registration_timeout_seconds
    stale = ec2_instances.unregistered(world.unregistered_instances(), (), timeout, now=world.now)
    ids = [i.instance_id for i in stale]
    claims = [] if dry_run else nodeclaims.past_registration_ttl(world.nodeclaims or (), rt.cluster, ids,
                                                                 now=world.now, ttl_seconds=timeout)
    ids = sorted({*ids, *(iid for c in claims if (iid := ncm.instance_of(c)))})
    if not ids and not claims:
        return []
    removed: list[str] = []
    if not dry_run:
        result = ec2_instances.terminate(rt.aws.ec2, ids, rt.cluster)
        ids = result.terminated + result.missing
        for iid in result.terminated:
            log.warning("instance did not register in time; terminated",
                        extra={"instance_id": iid, "timeout_seconds": timeout})
        # The instances are gone (or were never ours): nothing is left for the finalizer to wait on.
        removed = nodeclaims.remove(rt, claims)
    tally.add_timeouts(ids)
    return ids + removed


def _pass(rt: Runtime, tally: Tally, dry_run: bool, launch_by: float | None = None) -> LaunchOutcome:
    world = read_world(rt, pod_cache=True)
    tally.add_world(world)
    world = node_registration.sync_nodes(rt, world, dry_run=dry_run)
    migration.backfill(rt, world, dry_run=dry_run)
    migration.adopt(rt, world, dry_run=dry_run)
    node_registration.sync_nodeclaims(rt, world, dry_run=dry_run)
    stale = _expire_unregistered(rt, world, tally, dry_run)
    pods = world.pending
    telemetry.gauge(telemetry.PENDING_PODS, len(pods), telemetry.Unit.Count)
    ages = [(world.now - s).total_seconds() for s in map(pending_since, pods) if s is not None]
    if ages:
        telemetry.seconds(telemetry.PENDING_POD_AGE, max(0.0, max(ages)))
    # The pods of nodes being taken out are planned too (leaving.py): the capacity launched for them, by this
    # pass or by the interruption function, is then counted against them, not given to other pods.
    # CapacityBuffers' virtual pods join the real ones (after them: the lowest priority), so the plan
    # keeps their room on existing nodes or launches nodes for it.
    homeless = pods + leaving_pods(world)
    outcome = launch_capacity(rt, world, homeless + world.buffer_pods, exclude_nodes=stale, dry_run=dry_run,
                              deadline=launch_by)
    world = outcome.world or world
    if outcome.unschedulable:
        telemetry.count(telemetry.UNSCHEDULABLE_PODS, len(outcome.unschedulable))
    tally.add_outcome(homeless, outcome)
    tally.add_buffers(world, outcome)
    static = keep_static_capacity(rt, world, dry_run=dry_run)
    tally.add_static(static)
    if not dry_run:  # NodePool and EC2NodeClass status, from what this pass read and launched (#30.2)
        after = static.world or world
        if outcome.launches or static.launches:  # the pools' new nodes count: instances read again, once
            after = refresh_instances(after, rt.aws.ec2)
        pool_status.write_status(rt, after)
    return outcome


# A pass stops starting Fleet requests this long before its invocation's end (or, in a shorter invocation, this
# share of its time): what it launched still needs its status written (NodePools, EC2NodeClasses) and its
# summary returned. 10,000 nodes in one pass took 512 s against the provisioner's 180 s timeout (#32).
LAUNCH_RESERVE_SECONDS = 30.0
LAUNCH_RESERVE_SHARE = 0.2


def launch_cutoff(until: float | None, now: float | None = None) -> float | None:
    """The last moment (``time.monotonic()``) a pass may start a Fleet request, for an invocation that must be
    done by ``until``; None when nothing says when it ends."""
    if until is None:
        return None
    now = time.monotonic() if now is None else now
    return until - min(LAUNCH_RESERVE_SECONDS, LAUNCH_RESERVE_SHARE * max(0.0, until - now))


def provision_once(rt: Runtime, *, dry_run: bool = False, deadline: float | None = None) -> Summary:
    """One pass over every provisionable pod (the poll mode, and `nodescale provision --once`).

    Pods pending when it starts are batched as the watch mode batches them (1 s with no new one, 10 s at
    most, never past ``deadline``, a ``time.monotonic()`` value): a burst the scheduler is still marking
    Unschedulable is planned whole, not in two halves that need more nodes between them (#32 Bursts)."""
    rt.begin_invocation()
    tally = Tally(Mode.POLL, dry_run)
    launch_by = launch_cutoff(deadline)
    _await_burst(rt, deadline)
    _pass(rt, tally, dry_run, launch_by)
    return tally.finish()


def _await_burst(rt: Runtime, deadline: float | None) -> None:
    """Wait while pods keep becoming provisionable: a field-selected list and watch of the pending pods,
    not a read of the cluster, which the pass then makes once."""
    started = time.monotonic()
    batch = settled_pending_pods(rt.api, deadline)
    if batch is not None:
        log.debug("pending pods settled", extra={"pending": len(batch.pending),
                                                 "waited_seconds": round(time.monotonic() - started, 3)})


def provision_watch(rt: Runtime, deadline: float, *, dry_run: bool = False, until: float | None = None) -> Summary:
    """Watch for pods the default scheduler gave up on and act on them in batches (1 s quiet, 10 s at
    most) until ``deadline`` (a ``time.monotonic()`` value). A Node joining meanwhile is registered at once
    (#30.4): it carries ``karpenter.sh/unregistered`` until then, and the pods planned onto it wait for that.
    ``until`` is when the invocation must be done (its time left, less a margin): a pass stops launching
    at :func:`launch_cutoff`, and the pods it did not launch for wait for the next run."""
    rt.begin_invocation()
    tally = Tally(Mode.WATCH, dry_run)
    launch_by = launch_cutoff(until)
    for batch in watch_pending_pods(rt.api, deadline, nodes=True):
        if isinstance(batch, JoinedNodes):
            node_registration.register_joined(rt, batch.names, dry_run=dry_run)
            continue
        if not batch.pending:
            continue
        _pass(rt, tally, dry_run, launch_by)
    if tally.batches == 0:
        # A quiet period still checks that what was launched earlier has registered.
        world = read_world(rt, include_pods=False)
        if world.buffers:
            # CapacityBuffers want their room whether or not a pod is pending: one full pass keeps it.
            _pass(rt, tally, dry_run, launch_by)
            return tally.finish()
        # Keeps the warm container's pod cache within the server's watch window for the next run.
        podcache.shared(rt.api).sync(rt.api)
        tally.add_world(world)
        world = node_registration.sync_nodes(rt, world, dry_run=dry_run)
        migration.backfill(rt, world, dry_run=dry_run)
        migration.adopt(rt, world, dry_run=dry_run)
        node_registration.sync_nodeclaims(rt, world, dry_run=dry_run)
        _expire_unregistered(rt, world, tally, dry_run)
        # Static pools topped up to spec.replicas; what launched joins the summary's launches.
        tally.add_static(keep_static_capacity(rt, world, dry_run=dry_run))
    return tally.finish()

