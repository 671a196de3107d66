"""What to do about one intent, given the instance's Node and NodePool: ``action_for``, pure.

This is the whole interruption policy (the use-case only carries it out):

- an instance going away (spot warning, scheduled change, stopping/terminated) is cordoned,
  replaced and drained; a spot warning also marks its offering unavailable, whether or not a Node
  names the instance, since nothing should launch into capacity EC2 is reclaiming;
- a rebalance recommendation is recorded, unless the NodePool (or the Node itself) opts in with
  ``nodescale.io/rebalance: interrupt``; then it is treated like a spot warning;
- a pending/running state change, or an instance no Node names, needs nothing;
- an ARC zonal shift of an Availability Zone (``zone_shift_ignored``): an autoshift always keeps
  launches out of the zone until it completes; a manual shift does when it names this cluster or nothing.

Also the words of the summary: what was done per instance (``Outcome``) and the fixed reasons.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from enum import StrEnum

from ..model.node import ClusterNode
from ..model.nodelabels import pool_key
from ..model.nodepool import NodePool
from .intents import Intent, IntentAction, Kind, ShiftKind, ZoneShift

REBALANCE_ANNOTATION = "nodescale.io/rebalance"
REBALANCE_INTERRUPT = "interrupt"


class Outcome(StrEnum):
    """What the summary reports was done for an instance."""

    DRAINED = "drained"  # empty: instance terminated, Node deleted
    DRAINING = "draining"  # tainted, replacement started, pods left: a later run carries on
    RECORDED = "recorded"  # rebalance recommendation noted
    NOTHING = "none"  # nothing to do (running/pending, or no Node for the instance)
    IGNORED = "ignored"  # not this cluster's


class Step(StrEnum):
    """What ``action_for`` asks the use-case to do with the Node."""

    DRAIN = "drain"  # taint and cordon, launch a replacement, drain, terminate
    RECORD = "record"  # a Kubernetes event on the Node and a metric
    NOTHING = "nothing"


class Reason(StrEnum):
    """The fixed reasons a summary gives for an instance."""

    NOT_OURS = "not this cluster's instance"
    NO_NODE = "no Node names this instance (not registered yet, or already deleted)"
    REBALANCE_OPTED_IN = f"NodePool opted in ({REBALANCE_ANNOTATION}: {REBALANCE_INTERRUPT})"
    NODE_GONE = "the Node was deleted meanwhile: nothing to drain"
    NODE_DELETED = "the Node was deleted meanwhile"
    OUT_OF_TIME = "pods left when this invocation's time ran out; the taint stays and the next run continues"


@dataclass(frozen=True, slots=True)
class Notice:
    """A Kubernetes event's reason, type and message (Karpenter's words)."""

    reason: str
    type_: str
    message: str


WARNING = "Warning"
NORMAL = "Normal"
# The events aws/karpenter-provider-aws publishes on the Node and its NodeClaim per kind of message
# (pkg/controllers/interruption/events/events.go, chosen in utils.go notifyForMessage).
_NOTICES: dict[str, Notice] = {
    Kind.SPOT_INTERRUPTION: Notice("SpotInterrupted", WARNING, "Spot interruption warning was triggered"),
    Kind.REBALANCE_RECOMMENDATION: Notice("SpotRebalanceRecommendation", NORMAL,
                                          "Spot rebalance recommendation was triggered"),
    Kind.SCHEDULED_CHANGE: Notice("InstanceUnhealthy", WARNING, "An unhealthy warning was triggered for the instance"),
    Kind.CAPACITY_RESERVATION_INTERRUPTION: Notice("CapacityReservationInstanceInterrupted", WARNING,
                                                   "Capacity Reservation interruption warning was triggered"),
}
_STOPPING = Notice("InstanceStopping", WARNING, "Instance is stopping")
_TERMINATING = Notice("InstanceTerminating", WARNING, "Instance is terminating")
# Karpenter's event when the interruption starts the NodeClaim's termination (utils.go deleteNodeClaim).
TERMINATING_ON_INTERRUPTION = "TerminatingOnInterruption"


def notice(intent: Intent) -> Notice:
    """The event Karpenter publishes for the message this intent came from. A state change is "stopping"
    for stopping/stopped and "terminating" otherwise (shutting-down, terminated), as Karpenter's
    InstanceStoppedKind and InstanceTerminatedKind split it."""
    if intent.kind == Kind.INSTANCE_STATE_CHANGE:
        return _STOPPING if intent.detail in ("stopping", "stopped") else _TERMINATING
    return _NOTICES.get(intent.kind) or Notice(str(intent.kind), WARNING, f"{intent.kind} was triggered")


def terminating_message(kind: str) -> str:
    """Karpenter's TerminatingOnInterruption message for an object of ``kind`` (Node or NodeClaim)."""
    return f"Interruption triggered termination for the {kind}"


@dataclass(frozen=True, slots=True)
class Action:
    step: Step
    mark_offering: bool = False  # the (type, zone, spot) offering is unavailable for the offering TTL
    reason: str = ""  # what the summary says, where the step alone does not


def action_for(intent: Intent, node: ClusterNode | None, pool: NodePool | None) -> Action:
    """The action for one instance of this cluster: ``node`` is its Node (None when no Node names
    it), ``pool`` its NodePool (None when unknown; only a rebalance recommendation reads it)."""
    if intent.action == IntentAction.NO_ACTION:
        return Action(Step.NOTHING, reason=f"instance {intent.detail or 'state'}: no disruption, "
                                           "its node is expected to register")
    mark = intent.kind == Kind.SPOT_INTERRUPTION
    if node is None:
        return Action(Step.NOTHING, mark, Reason.NO_NODE)
    if intent.action == IntentAction.INTERRUPT:
        return Action(Step.DRAIN, mark)
    if rebalance_opted_in(node, pool):
        return Action(Step.DRAIN, mark, Reason.REBALANCE_OPTED_IN)
    return Action(Step.RECORD, mark)


def rebalance_opted_in(node: ClusterNode, pool: NodePool | None) -> bool:
    """Whether the Node or its NodePool asks for a rebalance recommendation to be acted on."""
    if node.annotations.get(REBALANCE_ANNOTATION) == REBALANCE_INTERRUPT:
        return True
    return pool is not None and pool.annotations.get(REBALANCE_ANNOTATION) == REBALANCE_INTERRUPT


def nodepool_name(node: ClusterNode, instance_pool: str | None, keys: Container[str] = ()) -> str:
    """The key of the pool an instance belongs to among ``keys``: its own tags first, else the Node's labels."""
    return instance_pool or pool_key(node.labels, keys)


def zone_shift_ignored(shift: ZoneShift, cluster: str) -> str | None:
    """None when ``shift`` keeps capacity out of (or lets it back into) its zone; else why it is not ours.

    An autoshift (AWS's, or an FIS experiment's) says the zone is impaired, whatever resources it
    names, so it always applies. A manual shift is an operator's choice for the resources it names: it
    applies when it names this EKS cluster (EKS zonal shift: ``arn:...:eks:<region>:<account>:cluster/<name>``)
    or names nothing; a manual shift of, say, one load balancer is that load balancer's business.
    """
    if shift.kind != ShiftKind.MANUAL or not shift.resources:
        return None
    if any(_names_cluster(r, cluster) for r in shift.resources):
        return None
    return (f"manual zonal shift of {', '.join(shift.resources)}, not of this EKS cluster ({cluster}): "
            "its zone stays open to launches")


def _names_cluster(resource: str, cluster: str) -> bool:
    parts = resource.split(":", 5)
    return len(parts) == 6 and parts[0] == "arn" and parts[2] == "eks" and parts[5] == f"cluster/{cluster}"
