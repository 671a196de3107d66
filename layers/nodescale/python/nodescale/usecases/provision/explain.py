"""Why a pod has no node yet, or which NodePool and instance types it would get: `nodescale explain`.

A pod is in one of these states, checked in this order:
- bound to a node (nothing to explain but where), or finished;
- not for nodescale (another scheduler, a DaemonSet's pod, being deleted, nominated for a node by a
  preemption, not yet given up on by the scheduler): the rule that leaves it out;
- provisionable: a dry plan of every pending pod (the pod among them, as the provisioner would see
  it) says whether it fits on a node that exists or is on its way, gets a new node of pool X with
  types [...] in zones [...], or is unschedulable and why (the bin-packer's reason words, including
  NodePool and cluster-wide limits). A new node of a pool whose last launch failed for a reason
  other than capacity (aws/launchfailures: AccessDenied on iam:PassRole...) is "launch failing" with
  that error: the plan is what the next launch will try, and it will fail the same way until fixed.

The same verdicts feed the pending-pods part of `nodescale status`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from ...k8s.raw import path_segment, request_json
from ...model.currency import Message, Money, Priced, render
from ...model.pod import DEFAULT_SCHEDULER, Pod, PodScheduling
from ...model.quantity import QuantityError
from ...model.requirements import RequirementError
from ...model.taints import TaintError
from ...scheduling.inflight import in_flight_instance
from ..world import World, read_world
from ..world_sources import apply_volume_topology
from . import capacity as provision_capacity
from .launch import LaunchOutcome

if TYPE_CHECKING:
    from ...runtime import Runtime

# Verdicts, from "nothing to do" to "nodescale cannot help".
BOUND = "bound"
FINISHED = "finished"
NOT_PROVISIONABLE = "not-provisionable"
EXISTING = "existing-node"  # fits on a Ready node: the scheduler will place it
IN_FLIGHT = "in-flight"  # planned onto capacity already launched
NEW_NODE = "new-node"  # a node would be launched for it
LAUNCH_FAILING = "launch-failing"  # a node would be launched for it, and that pool's last launch failed
UNSCHEDULABLE = "unschedulable"
INVALID = "invalid"  # its spec cannot be read


class PodNotFound(LookupError):
    """The pod named on the command line does not exist."""


@dataclass
class PodFate:
    """Where a pod stands and the one line that says why."""

    pod: str  # namespace/name
    verdict: str
    message: Message  # Priced when it names a price: rendered in the region's currency by ``to_dict``
    nodepool: str = ""
    instance_types: list[str] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    capacity_types: list[str] = field(default_factory=list)
    node: str = ""  # the node it is bound to, or the in-flight node it waits for
    scheduler_message: str = ""  # what kube-scheduler said when it gave up (PodScheduled=False)
    # The CapacityBuffers planned with it (they come after every real pod), and where their room is.
    buffers: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, currency: str) -> dict[str, Any]:
        out: dict[str, Any] = {"pod": self.pod, "verdict": self.verdict, "message": render(self.message, currency)}
        if self.nodepool:
            out.update(nodePool=self.nodepool, instanceTypes=self.instance_types, zones=self.zones,
                       capacityTypes=self.capacity_types)
        if self.node:
            out["node"] = self.node
        if self.scheduler_message:
            out["schedulerMessage"] = self.scheduler_message
        if self.buffers:
            out["buffers"] = self.buffers
        return out


# --------------------------------------------------------------------------------------------- the rules


def why_not_provisionable(pod: PodScheduling) -> str | None:
    """The rule that keeps the provisioner away from this pod, or None when it is provisionable.

    The same rules as :func:`nodescale.k8s.listing.is_provisionable`, each with its reason in words.
    """
    if pod.node_name:
        return f"it is bound to node {pod.node_name}"
    if pod.nominated_node:
        return (f"the scheduler nominated node {pod.nominated_node} for it (it waits for pods to be "
                "preempted there)")
    if pod.deleting:
        return "it is being deleted"
    if pod.phase not in ("", "Pending"):
        return f"its phase is {pod.phase}, not Pending"
    if pod.scheduler_name != DEFAULT_SCHEDULER:
        return f"it is scheduled by {pod.scheduler_name}, not by {DEFAULT_SCHEDULER}"
    if pod.daemon:
        return "it belongs to a DaemonSet: such pods follow nodes and never justify one"
    condition = pod.scheduled
    if condition is None or condition.status != "False":
        return "the scheduler has not tried to place it yet"
    if condition.reason != "Unschedulable":
        return f"the scheduler has not given up on it (PodScheduled reason {condition.reason or 'none'})"
    return None


def _scheduler_message(pod: PodScheduling) -> str:
    """What kube-scheduler said when it gave up on the pod ("" while it has not)."""
    cond = pod.scheduled
    return cond.message if cond is not None and cond.status == "False" else ""


# ------------------------------------------------------------------------------------------ the dry plan


def plan_fates(rt: Runtime, world: World, pods: list[Pod], *, with_buffers: bool = False) -> dict[str, PodFate]:
    """A dry run of the provisioner for ``pods``: each pod's fate by its key (``with_buffers``: each fate also
    lists the CapacityBuffers planned with it, for one pod's explanation)."""
    if not pods:
        return {}
    # As the provisioner plans: the CapacityBuffers' pods after the real ones.
    outcome = provision_capacity.launch_capacity(rt, world, pods + world.buffer_pods, dry_run=True, reason="nodescale explain")
    fates: dict[str, PodFate] = {}
    buffers = buffer_room(world, outcome)
    for launch in outcome.launches:
        types = launch.instance_types or [launch.instance_type]
        zones = [z for z in launch.zone.split(",") if z]
        capacity = [c for c in launch.capacity_type.split(",") if c]
        node = Priced.of(f"a new node of NodePool {launch.nodepool}: {_list(types)} in {_list(zones)} "
                         f"({'/'.join(capacity)}), from ", Money(launch.price),
                         f"/h{_overlay_note(world, launch.nodepool, types)}")
        failure = world.launch_failures.get(launch.nodepool)
        verdict, message = (NEW_NODE, "would get " + node) if failure is None else \
            (LAUNCH_FAILING, Priced.of(failure.describe(), " (the launch it waits for: ", node, ")"))
        for key in launch.pods:
            if key not in buffers.keys_of_buffers:
                fates[key] = PodFate(key, verdict, message, launch.nodepool, list(types), zones, capacity)
    for node, keys in outcome.waiting.items():
        iid = in_flight_instance(node)
        if iid is not None:
            message = f"waits for instance {iid}, launched and not registered yet"
        else:
            message = f"waits for node {node}, registered and not Ready yet"
        for key in keys:
            fates[key] = PodFate(key, IN_FLIGHT, message, node=node)
    preempted = _outranked_at_a_limit(pods, outcome)
    for key, why in outcome.unschedulable:
        fates[key] = PodFate(key, UNSCHEDULABLE, f"unschedulable: {why}{preempted.get(key, '')}")
    for p in pods:
        fates.setdefault(p.key, PodFate(p.key, EXISTING, "fits on a Ready node: the scheduler will place it"))
    if with_buffers:
        for fate in fates.values():
            fate.buffers = buffers.report
    return fates


@dataclass
class BufferRoom:
    keys_of_buffers: set[str]
    report: list[dict[str, Any]]


def buffer_room(world: World, outcome: LaunchOutcome) -> BufferRoom:
    """Each CapacityBuffer of a dry run: its pods on existing or in-flight nodes, on new nodes, or nowhere."""
    keys = {p.key for p in world.buffer_pods}
    launched = {k for launch in outcome.launches for k in launch.pods if k in keys}
    unplaced = dict(outcome.buffer_unplaced)
    report = []
    for r in world.resolved_buffers:
        mine = [p.key for p in r.pods]
        new = sum(k in launched for k in mine)
        missing = [unplaced[k] for k in mine if k in unplaced]
        entry = {**r.to_dict(), "onExistingNodes": len(mine) - new - len(missing), "onNewNodeClaims": new}
        if missing:
            entry.update(unschedulable=len(missing), reason=missing[0])
        report.append(entry)
    return BufferRoom(keys, report)


def _outranked_at_a_limit(pods: list[Pod], outcome: LaunchOutcome) -> dict[str, str]:
    """For each pod held back by a NodePool or cluster-wide limit while a pod of higher priority got a new
    node: a note that the higher priority went first, and that preemption is not nodescale's to do."""
    limited = {entry.reason for entry in outcome.limits}
    priority = {p.key: p.priority for p in pods}
    launched = [priority[key] for launch in outcome.launches for key in launch.pods if key in priority]
    if not limited or not launched:
        return {}
    highest = max(launched)
    return {
        key: (f"; the limit went to pods of higher priority (up to {highest}), planned first; preemption, "
              "if any, is kube-scheduler's")
        for key, why in outcome.unschedulable
        if why in limited and priority.get(key, 0) < highest
    }


def _overlay_note(world: World, pool: str, types: list[str]) -> str:
    """What NodeOverlays changed on the claim's first instance type (its price, its capacity), if anything."""
    first = next((it for it in world.instance_types(pool) if types and it.name == types[0]), None)
    return f" ({'; '.join(first.overlays)})" if first is not None and first.overlays else ""


def pending_fates(rt: Runtime, world: World) -> list[PodFate]:
    """Every unbound, unfinished pod of the snapshot and why it waits, sorted by pod."""
    planned = plan_fates(rt, world, world.pending)
    invalid = dict(world.pod_errors)
    out: list[PodFate] = []
    for waiting in world.waiting:
        key = waiting.key
        if key in world.volume_refusals:
            fate = PodFate(key, UNSCHEDULABLE, _volumes_message(world.volume_refusals[key]))
        elif key in invalid:
            fate = PodFate(key, INVALID, f"its spec cannot be read: {invalid[key]}")
        elif key in planned:
            fate = planned[key]
        else:
            fate = PodFate(key, NOT_PROVISIONABLE, f"not for nodescale: {why_not_provisionable(waiting) or 'unknown'}")
        fate.scheduler_message = _scheduler_message(waiting)
        out.append(fate)
    return sorted(out, key=lambda f: f.pod)


# ----------------------------------------------------------------------------------------------- one pod


def read_pod(rt: Runtime, namespace: str, name: str) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(name)}"
    try:
        return request_json(rt.api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            raise PodNotFound(f"no pod {name!r} in namespace {namespace!r}") from None
        raise


def explain(rt: Runtime, namespace: str, name: str, world: World | None = None) -> PodFate:
    """Why the pod has no node yet, or which NodePool and instance types it would get."""
    raw = read_pod(rt, namespace, name)
    key = f"{namespace}/{name}"
    state = PodScheduling.from_dict(raw)
    phase = state.phase or "Pending"
    if state.node_name:
        return PodFate(key, BOUND, f"bound to node {state.node_name} ({phase})", node=state.node_name)
    if state.finished:
        return PodFate(key, FINISHED, f"finished ({phase}): it needs no node")
    scheduler_message = _scheduler_message(state)
    rule = why_not_provisionable(state)
    try:
        pod = Pod.from_dict(raw)
    except (QuantityError, RequirementError, TaintError, TypeError, ValueError, AttributeError) as exc:
        return PodFate(key, INVALID, f"its spec cannot be read: {exc}", scheduler_message=scheduler_message)
    if rule is not None and not _worth_planning(state, pod):
        return PodFate(key, NOT_PROVISIONABLE, f"not for nodescale: {rule}", scheduler_message=scheduler_message)
    world = world or read_world(rt)
    refused = apply_volume_topology(pod, world.volumes)
    if refused is not None:
        return PodFate(key, UNSCHEDULABLE, _volumes_message(refused), scheduler_message=scheduler_message)
    # The pod is planned with every other pending pod: they compete for the same new nodes.
    others = [p for p in world.pending if p.key != key]
    fate = plan_fates(rt, world, [*others, pod], with_buffers=True)[key]
    if rule is not None:
        # Not provisionable yet (the scheduler has not given up): say so, and what it would get.
        fate = PodFate(key, NOT_PROVISIONABLE, f"not for nodescale yet: {rule}. Were it pending, the plan says: " + fate.message,
                       fate.nodepool, fate.instance_types, fate.zones, fate.capacity_types, fate.node,
                       buffers=fate.buffers)
    fate.scheduler_message = scheduler_message
    return fate


def _volumes_message(why: str) -> str:
    return f"not planned for: its volumes cannot be honoured ({why}), as Karpenter leaves such a pod"


def _worth_planning(state: PodScheduling, pod: Pod) -> bool:
    """A pod left out only because the scheduler has not given up on it yet is still planned, to show
    what it would get; one that nodescale never handles is not."""
    if state.deleting or state.nominated_node or pod.is_daemon:
        return False
    return pod.scheduler_name == DEFAULT_SCHEDULER


def _list(items: list[str], n: int = 4) -> str:
    shown = ", ".join(items[:n])
    return f"[{shown}{f', +{len(items) - n} more' if len(items) > n else ''}]"
