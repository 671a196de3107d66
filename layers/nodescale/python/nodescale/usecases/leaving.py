"""Pods that need a new home although they are bound: those on the nodes nodescale is taking out.

    leaving_nodes(world) -> [node name]             nodescale's nodes being deleted or carrying the disruption taint
    reschedulable(pods) -> [Pod]                    the pods a drain moves, as pending pods for the bin-packer
    leaving_pods(world, exclude=...) -> [Pod]       the reschedulable pods of every leaving node

Karpenter's provisioner plans the pods of nodes marked for deletion with the pending ones, so the capacity
launched for them is counted by every later pass and a drain does not launch twice for the same pods
(upstream ``provisioning/suite_test.go``, "should schedule all pods on one inflight node when node is in
deleting state"). Here both the provisioner's passes and the interruption function's replacement plan them:
whichever takes the launch lease second finds the other's launch in flight, with room for these pods. A
node counts only when it is one of this cluster's (its instance is trusted); a node another system is
deleting is left to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable

from ..disruption import drain_policy
from ..disruption.nodes import DISRUPTED_TAINT_KEY
from ..model.pod import Pod
from .world import World


def leaving_nodes(world: World) -> list[str]:
    """This cluster's Nodes on their way out: deleted (a finalizer holds them) or tainted by a drain."""
    return [view.name for view in world.node_views()
            if (view.deleting or view.has_taint(DISRUPTED_TAINT_KEY, "NoSchedule"))
            and world.trusted_instance_id(view) is not None]


def reschedulable(pods: Iterable[Pod]) -> list[Pod]:
    """The pods a drain evicts and something recreates elsewhere, unbound: not DaemonSet pods (their DaemonSet
    runs one on every node), not mirror or static pods, not pods already terminating or finished, not pods
    that tolerate the disruption taint (they stay)."""
    return [dataclasses.replace(pod, node_name="", phase="Pending") for pod in pods
            if not pod.deleting and drain_policy.pod_skip(pod) is None and "DaemonSet" not in pod.owner_kinds]


def leaving_pods(world: World, exclude: Collection[str] = ()) -> list[Pod]:
    """The reschedulable pods of every leaving node but those named in ``exclude``."""
    return [pod for name in leaving_nodes(world) if name not in exclude
            for pod in reschedulable(world.pods_by_node.get(name, ()))]
