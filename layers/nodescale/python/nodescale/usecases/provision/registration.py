"""Karpenter's registration and initialization, for the nodes of this cluster's instances.

    sync_nodes(rt, world) -> World   label newly registered nodes; returns the snapshot with their labels

When a Node of an instance nodescale launched appears, it carries only what its kubelet may set
(``--node-labels``, see ``aws/userdata.node_labels``). Karpenter copies its NodeClaim's labels onto the
Node and marks it ``karpenter.sh/registered=true``; later, once the node is Ready, its startup taints are
gone and its extended resources are advertised, ``karpenter.sh/initialized=true``. This does the same
from the instance (pool, type, zone, capacity type), with the labels the solver planned the node with
(``World.expected_labels``, ``model/nodelabels``), so a pod planned onto it finds what it selects.

Labels are synced once, at registration (as Karpenter's registration controller does): a label changed
on the node afterwards is the operator's business. The provisioner runs it on every pass, before planning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException

from ...k8s import nodes as k8s_nodes
from ...model import labels as wk
from ...model.instancetype import InstanceType
from ...model.node import ClusterNode
from ...model.nodepool import NodePool
from ...scheduling.inflight import startup_keys
from ..world import World

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)

TRUE = "true"
# Extended resources a device plugin advertises after the node is Ready; Karpenter waits for them.
_DEVICE_PREFIXES = ("nvidia.com/", "amd.com/", "aws.amazon.com/", "habana.ai/")


def labels_to_sync(world: World, view: ClusterNode) -> dict[str, str]:
    """The labels to set on ``view`` now ({} when it is not ours or has nothing missing)."""
    iid = world.trusted_instance_id(view)
    inst = world.instance(iid) if iid else None
    if inst is None:
        return {}  # not launched by nodescale for this cluster: never touched
    pool = world.nodepools.get(inst.nodepool or "")
    it = world.instance_type(inst.instance_type, inst.nodepool) if pool is not None else None
    if pool is None or it is None:
        return {}
    current = view.labels
    want: dict[str, str] = {}
    if current.get(wk.REGISTERED) != TRUE:
        expected = world.expected_labels(inst, pool, it)
        want = {k: v for k, v in expected.items() if current.get(k) != v}
        want[wk.REGISTERED] = TRUE
    if current.get(wk.INITIALIZED) != TRUE and initialized(view, pool, it):
        want[wk.INITIALIZED] = TRUE
    return want


def initialized(view: ClusterNode, pool: NodePool, it: InstanceType) -> bool:
    """Karpenter's test: Ready, no startup (or coming-up) taint left, every device resource advertised.

    A device counts as advertised when its allocatable quantity is above zero, compared parsed: "0m" or
    "0Mi" is none, as "0" is (an unreadable allocatable advertises nothing)."""
    if not view.ready:
        return False
    waiting = startup_keys(pool)
    if any(t.get("key") in waiting for t in view.taints):
        return False
    allocatable = view.resources.allocatable
    return all(
        allocatable.get(name, 0) > 0
        for name, amount in it.capacity.items()
        if amount and name.startswith(_DEVICE_PREFIXES)
    )


def sync_nodes(rt: Runtime, world: World, *, dry_run: bool = False) -> World:
    """Label this cluster's newly registered (and newly initialized) nodes, and return the snapshot with the
    labels they now carry (``world`` itself is left as read), which the pass that called this plans with."""
    changed: dict[str, dict[str, str]] = {}
    for view in world.nodes:
        want = labels_to_sync(world, view)
        if not want:
            continue
        name = view.name
        # A dry run changes nothing, but plans as the next pass will: with the labels synced.
        if not dry_run:
            try:
                k8s_nodes.patch_metadata(rt.api, name, labels=want)
            except (ApiException, k8s_nodes.NodeGoneError) as exc:
                # The next pass tries again; planning goes on with the node as it is.
                log.warning("could not label a registered node", extra={"node": name, "error": str(exc)})
                continue
        changed[name] = want
        log.info("node labels synced", extra={"node": name, "labels": sorted(want)})
    return world.with_node_labels(changed) if changed else world
