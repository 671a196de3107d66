"""Finishing the termination of a node that carries the disruption taint, one step per call.

The taint `karpenter.sh/disrupted:NoSchedule` is the only state a termination has: whichever
function runs next (interruption or disruption) calls :func:`continue_termination`, which drains
one round and, once the node is empty, terminates the instance (if it is not already gone) and
deletes the Node. Nothing is remembered between calls, so a drain outlives any one invocation.

When pods are forced: only by the NodePool's ``terminationGracePeriod``, counted from the taint's
``timeAdded`` (Karpenter v1), whatever started the drain. Until then PodDisruptionBudgets are respected
(every pod leaves through the Eviction API), and so is do-not-disrupt on a voluntary drain; each pod
left is deleted its own terminationGracePeriodSeconds before the end, and once it has run out the
instance is terminated whatever is left on it. A node without a grace period is never forced.

An involuntary termination (the instance goes away regardless: an interruption, a repair) also evicts
do-not-disrupt pods, through the Eviction API. The moment the instance goes away, which the
interruption function writes on the node as ``nodescale.io/interruption-deadline`` (end of the
two-minute spot notice, or an AWS Health scheduled change's startTime), only shortens each pod's own
shutdown time while it is still ahead: a notice that has passed (a stale event, an old file given to
``nodescale replay``) forces nothing, as Karpenter's interruption controller only starts the normal
termination whatever the notice's age (#27.6). What bounds the wait for a really interrupted instance
is the instance itself: once EC2 has stopped it, what could not be evicted goes with the Node. A node
the interruption function marked (annotation ``nodescale.io/interruption``) is involuntary whoever
continues it.

Before the instance goes, the node's VolumeAttachments must be gone (Karpenter's ``awaitVolumeDetachment``),
so a pod's volume can attach to its new node; those of pods a drain leaves on the node are not waited for,
and neither is anything once the grace period is over or the instance no longer runs. A Node carrying the
``karpenter.sh/termination`` finalizer (nodes nodescale launched) loses it last, once the instance is
terminated and the Node deleted.

A node whose instance this cluster cannot prove it owns (no ``nodescale.io/cluster`` tag, e.g. a
node Karpenter itself tainted) is left exactly as it is.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from .. import clock
from ..aws import instances as ec2_instances
from ..aws.ownership import GONE_STATES, NOT_RUNNING_STATES, classify
from ..disruption import drain_policy
from ..disruption import event_words as words
from ..k8s import drain as k8s_drain
from ..k8s import finalizers as k8s_finalizers
from ..k8s import nodes as k8s_nodes
from ..k8s import volumes as k8s_volumes
from ..k8s.events import WARNING, EventRecorder, ObjectRef, claim_of_node
from ..model.labels import TERMINATION_FINALIZER
from ..model.node import ClusterNode, name_matches_instance
from ..model.nodelabels import pool_key
from ..model.nodepool import NodePool
from ..model.pod import DO_NOT_DISRUPT
from ..model.timestamps import shifted

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .world import World

log = logging.getLogger(__name__)

INTERRUPTION_ANNOTATION = "nodescale.io/interruption"  # the event kind that marked the node
DEADLINE_ANNOTATION = "nodescale.io/interruption-deadline"  # RFC 3339: when the instance goes away
# Why the disruption function took the node (Empty, Drifted, ...): the reason its pods' Evicted events give.
DISRUPTION_REASON_ANNOTATION = "nodescale.io/disruption-reason"

DRAINING = "draining"  # pods left; the taint stays and a later call carries on
TERMINATED = "terminated"  # empty: instance terminated (or already gone) and Node deleted
TERMINATING = "terminating"  # empty: its instance waits in a TerminationBatch for the next flush
SKIPPED = "skipped"  # nothing done; `reason` says why
# Events for pods a drain round could not take, on the pod (where its owner looks) and on the node.
DISRUPTION_BLOCKED = "DisruptionBlocked"
# At most this many pod events a round: a node of hundreds of blocked pods says it once on the node.
MAX_BLOCKED_POD_EVENTS = 20


@dataclass
class TerminationStep:
    node: str
    state: str
    instance_id: str | None = None
    reason: str = ""
    drain: drain_policy.DrainResult | None = None
    instance_terminated: bool = False  # this call terminated it
    node_deleted: bool = False  # the Node is gone (this call deleted it, or it already was)
    involuntary: bool = False
    delete_after: datetime | None = None
    blocked_pods: list[str] = field(default_factory=list)
    volume_attachments: list[str] = field(default_factory=list)  # waited for before the instance goes

    @property
    def done(self) -> bool:
        return self.state == TERMINATED

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "state": self.state, "instanceId": self.instance_id}
        if self.reason:
            out["reason"] = self.reason
        if self.drain is not None:
            out["drain"] = self.drain.summary()
        out["instanceTerminated"] = self.instance_terminated
        out["nodeDeleted"] = self.node_deleted
        if self.volume_attachments:
            out["volumeAttachments"] = list(self.volume_attachments)
        if self.delete_after is not None:
            out["forceAfter"] = clock.format_timestamp(self.delete_after)
        return out


def interruption_deadline(node: ClusterNode) -> datetime | None:
    return clock.parse_timestamp(node.annotations.get(DEADLINE_ANNOTATION))


def marked_by_interruption(node: ClusterNode) -> bool:
    return bool(node.annotations.get(INTERRUPTION_ANNOTATION))


def grace_deadline(node: ClusterNode, termination_grace_seconds: float | None) -> datetime | None:
    """When the NodePool's terminationGracePeriod, counted from the drain's start, runs out: the only
    moment past which pods are forced off the node (see the module docstring), or None."""
    started = k8s_drain.drain_started_at(node.raw)
    if started is None or termination_grace_seconds is None:
        return None
    return shifted(started, termination_grace_seconds)


def notice_grace_cap(node: ClusterNode, now: datetime) -> int | None:
    """At most how long a pod evicted now may take to shut down: what is left of the interruption notice
    while it is still ahead; None (the pod's own grace) once it has passed or without one. A passed
    notice says nothing about how much time the pods have: the instance's state does."""
    notice = interruption_deadline(node)
    if notice is None or notice <= now:
        return None
    return max(1, int((notice - now).total_seconds()))


def _pool_of(world: World, node: ClusterNode, pool_name: str | None) -> NodePool | None:
    return world.nodepools.get(pool_name or pool_key(node.labels, world.nodepools))


def continue_termination(
    rt: Runtime,
    world: World,
    node: ClusterNode,
    *,
    involuntary: bool,
    deadline_monotonic: float,
    batch: TerminationBatch | None = None,
) -> TerminationStep:
    """One step of the node's termination: a drain round, then (when empty) instance and Node go.

    ``node`` should be fresh (parsed from a GET, or the world's copy); ``deadline_monotonic`` is a
    ``time.monotonic()`` value past which nothing new is started. With a ``batch``, an empty node's
    instance is only queued (state ``terminating``): the caller flushes the batch.
    """
    name = node.name
    step = TerminationStep(node=name, state=SKIPPED, involuntary=involuntary or marked_by_interruption(node))
    if not node.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY, "NoSchedule"):
        step.reason = f"node has no {k8s_nodes.DISRUPTED_TAINT} taint: not being terminated"
        return step
    iid = node.instance_id
    step.instance_id = iid
    if not iid:
        step.reason = "node names no EC2 instance in spec.providerID"
        return step
    managed = world.instance(iid)
    if managed is not None:
        state, pool_name = managed.state, managed.nodepool
        if world.trusted_instance_id(node) != iid:
            step.reason = world.untrusted.get(name) or f"node is not instance {iid}'s trusted Node"
            return step
    else:
        # Not among the live instances: it may be stopped or terminated, or not ours at all.
        found = classify(rt.aws.ec2, [iid], rt.cluster)
        owned = found.owned.get(iid)
        if owned is None and iid not in found.not_ours and _deleted_without_kubelet(node):
            # Karpenter's rule: no instance and no kubelet keeping the node Ready, so nothing is left to drain.
            _node_gone(rt, step)
            return step
        if owned is None:
            step.reason = found.not_ours[iid].message if iid in found.not_ours else f"instance {iid} not found"
            return step
        state, pool_name = owned.state, owned.nodepool
        # A gone instance's Node is only deleted; a live one is terminated only through a Node named for it.
        if state not in GONE_STATES and not name_matches_instance(name, iid, owned.private_dns_name):
            step.reason = f"the node's name is not instance {iid}'s ({owned.private_dns_name or iid}): left alone"
            return step
    if time.monotonic() >= deadline_monotonic:
        step.state = DRAINING
        step.reason = "out of time in this invocation; the next run carries on"
        return step

    result, grace_over = _drain(rt, world, node, step, pool_name)
    # An instance that no longer runs its pods cannot be waited for: what could be evicted was
    # (so controllers recreate it elsewhere), the rest goes with the Node.
    if not result.empty and state not in NOT_RUNNING_STATES and not grace_over:
        step.state = DRAINING
        return step
    if state not in NOT_RUNNING_STATES and not grace_over:
        step.volume_attachments = pending_volumes(rt, name)
        if step.volume_attachments:
            step.state = DRAINING
            step.reason = f"waiting for {len(step.volume_attachments)} VolumeAttachment(s) to detach"
            return step
    if state in GONE_STATES:
        _node_gone(rt, step)
        return step
    own = batch is None
    batch = batch if batch is not None else TerminationBatch(rt)
    batch.add(step)
    if own:
        batch.flush()
    return step


def _deleted_without_kubelet(node: ClusterNode) -> bool:
    return node.deleting and TERMINATION_FINALIZER in node.finalizers and not node.ready


def pending_volumes(rt: Runtime, name: str) -> list[str]:
    """The node's VolumeAttachments the instance's termination waits for (see the module docstring)."""
    attachments = k8s_volumes.attachments_on_node(rt.api, name)
    if not attachments:
        return []
    kept = {pv for ns, claim in drain_policy.undrainable_claims(k8s_drain.drain_pods(rt.api, name))
            if (pv := k8s_volumes.claim_volume(rt.api, ns, claim))}
    return drain_policy.pending_attachments(attachments, kept)


def _drain(
    rt: Runtime, world: World, node: ClusterNode, step: TerminationStep, pool_name: str | None
) -> tuple[drain_policy.DrainResult, bool]:
    """One drain round for the step's node; also whether the pool's terminationGracePeriod is over, past
    which the node goes whatever is left on it (Karpenter v1)."""
    name = step.node
    now = clock.now()
    pool = _pool_of(world, node, pool_name)
    node_deadline = grace_deadline(node, pool.disruption.termination_grace_period_seconds if pool is not None else None)
    step.delete_after = node_deadline
    result = k8s_drain.drain_round(
        rt.api,
        name,
        involuntary=step.involuntary,
        grace_period_seconds=notice_grace_cap(node, now),
        now=lambda: now,
        grace_deadline=node_deadline,
        legacy=pool is not None and pool.legacy_annotations,
    )
    step.drain = result
    step.blocked_pods = sorted(result.blocked_by_pdb + result.blocked_by_do_not_disrupt)
    say_drained(rt, node, claim_of_node(world.nodeclaims, node), result, node_deadline)
    return result, node_deadline is not None and now >= node_deadline


class TerminationBatch:
    """Empty nodes whose instances are terminated together when :meth:`flush` is called.

    A scale-in of hundreds of nodes costs one ownership check and one TerminateInstances call per
    hundred instances instead of two calls per node (TerminateInstances has one of EC2's tightest
    request-rate limits). Steps added wait in state ``terminating`` until the flush.
    """

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.steps: list[TerminationStep] = []

    def add(self, step: TerminationStep) -> None:
        step.state = TERMINATING
        self.steps.append(step)

    def flush(self) -> list[TerminationStep]:
        """Terminate every instance added since the last flush, then delete their Nodes. Returns the
        steps (each ``terminated``, or ``skipped`` with a reason). EC2 errors propagate; the steps
        then stay ``terminating`` and the next run starts over from the taint."""
        steps, self.steps = self.steps, []
        if not steps:
            return steps
        outcome = ec2_instances.terminate(self.rt.aws.ec2, [s.instance_id for s in steps if s.instance_id], self.rt.cluster)
        for step in steps:
            if step.instance_id in outcome.refused:
                step.state = SKIPPED
                step.reason = f"instance {step.instance_id} lost this cluster's tag: left alone"
                continue
            step.instance_terminated = step.instance_id in outcome.terminated
            try:
                _node_gone(self.rt, step)
            except ApiException as exc:
                # One Node the API would not delete must not hide the others; the taint stays, so
                # the next run finds the instance gone and deletes the Node then.
                step.reason = f"instance terminated, deleting the Node failed ({exc.status} {exc.reason})"
        return steps


def say_drained(
    rt: Runtime, node: ClusterNode, claim: ObjectRef | None, result: drain_policy.DrainResult,
    deadline: datetime | None,
) -> None:
    """The round's events, as Karpenter's terminator publishes them: Evicted on each pod evicted,
    FailedDraining on the node for a PodDisruptionBudget refusal, TerminationGracePeriodExpiring on the node
    and its NodeClaim while pods are left under a grace period. An event never fails the drain."""
    recorder = EventRecorder(rt.api, limit_per_reason=MAX_BLOCKED_POD_EVENTS)
    why = node.annotations.get(DISRUPTION_REASON_ANNOTATION, "")
    try:
        for key in result.evicted:
            namespace, _, pod = key.partition("/")
            recorder.pod(namespace, pod, words.EVICTED, words.evicted(why))
        if result.blocked_by_pdb or result.blocked_by_do_not_disrupt:
            _say_blocked(recorder, node.name, result)
        if deadline is not None and not result.empty:
            recorder.node_and_claim(node.name, claim, words.TERMINATION_GRACE_PERIOD_EXPIRING,
                                    words.grace_period_expiring(deadline), WARNING, uid=node.uid)
    except ApiException as exc:
        log.warning("drain events not recorded", extra={"node": node.name, "status": exc.status})


def _say_blocked(recorder: EventRecorder, node: str, result: drain_policy.DrainResult) -> None:
    """Warning events for the pods this round could not evict and for their node: a PodDisruptionBudget
    refusal is Karpenter's FailedDraining on the node; a do-not-disrupt pod holds it as DisruptionBlocked.
    Each pod says why on itself too, where `kubectl describe pod` shows it (nodescale's own addition)."""
    why = [(key, "eviction refused: its PodDisruptionBudget allows no disruption now; the drain of node "
                 f"{node} retries until it does") for key in result.blocked_by_pdb]
    why += [(key, f"{DO_NOT_DISRUPT}: the pod holds node {node}, which is being drained, until it ends "
                  "or the node's grace period runs out") for key in result.blocked_by_do_not_disrupt]
    for key, message in why:
        namespace, _, pod = key.partition("/")
        recorder.pod(namespace, pod, DISRUPTION_BLOCKED, message, WARNING)
    if result.blocked_by_pdb:
        first, *rest = result.blocked_by_pdb
        recorder.node(node, words.FAILED_DRAINING, words.failed_draining(first, len(rest)), WARNING)
    if result.blocked_by_do_not_disrupt:
        recorder.node(node, DISRUPTION_BLOCKED, f"drain blocked: {len(result.blocked_by_do_not_disrupt)} pod(s) "
                      f"by {DO_NOT_DISRUPT}", WARNING)


def _node_gone(rt: Runtime, step: TerminationStep) -> None:
    """Delete the Node, then (the instance being gone) let it go: remove nodescale's finalizer."""
    k8s_nodes.delete_node(rt.api, step.node)  # False when EC2's node lifecycle already removed it: gone either way
    release(rt, step.node)
    step.node_deleted = True
    step.state = TERMINATED
    log.info(
        "node terminated",
        extra={"node": step.node, "instance_id": step.instance_id,
               "evicted": len(step.drain.evicted) if step.drain is not None else 0},
    )


def release(rt: Runtime, name: str) -> None:
    """Remove the termination finalizer from the Node as it is now (the last step of its termination)."""
    try:
        current = k8s_nodes.get_node(rt.api, name)
        if k8s_finalizers.remove(rt.api, k8s_nodes.node_path(name), current, TERMINATION_FINALIZER):
            log.info("termination finalizer removed", extra={"node": name})
    except k8s_nodes.NodeGoneError:
        return
    except k8s_finalizers.FinalizerConflict as exc:
        # Someone changed the finalizers meanwhile: the next pass finds the instance gone and tries again.
        log.warning("termination finalizer not removed", extra={"node": name, "error": str(exc)})
