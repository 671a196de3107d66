"""Karpenter's registration and initialization, for the nodes of this cluster's instances.

    sync_nodes(rt, world) -> World   label newly registered nodes; returns the snapshot with their labels
    add_finalizers(rt, world)        put karpenter.sh/termination on the nodes nodescale launched (#30.3)
    sync_nodeclaims(rt, world)       their NodeClaims' nodeName, Registered, Initialized (#30.1)

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
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from ...k8s import finalizers as k8s_finalizers
from ...k8s import nodeclaims as k8s_nodeclaims
from ...k8s import nodes as k8s_nodes
from ...model import labels as wk
from ...model.instancetype import InstanceType
from ...model.node import ClusterNode
from ...model.nodepool import NodePool
from ...model.nodepool_hash import HASH_ANNOTATION, HASH_VERSION_ANNOTATION, hash_annotations
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling.inflight import startup_keys
from ..world import World
from . import nodeclaims

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


def annotations_to_sync(view: ClusterNode, claim: Mapping[str, Any] | None, pool: NodePool | None) -> dict[str, str]:
    """The record of the template the node was launched from, to put on the Node at registration so drift reads
    it (#31.5): its NodeClaim's (Karpenter's registration copies the claim's annotations onto the Node); with no
    NodeClaim (a cluster without the CRD), the digest of the pool the node's labels are synced from now."""
    if view.labels.get(wk.REGISTERED) == TRUE:
        return {}
    if claim is not None:
        have = (claim.get("metadata") or {}).get("annotations") or {}
    else:
        have = hash_annotations(pool) if pool is not None else {}
    return {k: v for k in (HASH_ANNOTATION, HASH_VERSION_ANNOTATION)
            if isinstance(v := have.get(k), str) and view.annotations.get(k) != v}


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
    add_finalizers(rt, world, dry_run=dry_run)
    changed: dict[str, dict[str, str]] = {}
    claims = _claims_by_instance(world)
    for view in world.nodes:
        want = labels_to_sync(world, view)
        if not want:
            continue
        name = view.name
        iid = world.trusted_instance_id(view)
        inst = world.instance(iid) if iid else None
        pool = world.nodepools.get(inst.nodepool or "") if inst is not None else None
        record = annotations_to_sync(view, claims.get(iid) if iid else None, pool)
        # A dry run changes nothing, but plans as the next pass will: with the labels synced.
        if not dry_run:
            try:
                k8s_nodes.patch_metadata(rt.api, name, labels=want, annotations=record)
            except (ApiException, k8s_nodes.NodeGoneError) as exc:
                # The next pass tries again; planning goes on with the node as it is.
                log.warning("could not label a registered node", extra={"node": name, "error": str(exc)})
                continue
        changed[name] = want
        log.info("node labels synced", extra={"node": name, "labels": sorted(want)})
    return world.with_node_labels(changed) if changed else world


def needs_finalizer(world: World, view: ClusterNode) -> bool:
    """A Node of an instance nodescale launched for this cluster, not being deleted, without the termination
    finalizer. A Node nodescale did not launch never gets it: deleting it is not nodescale's business."""
    iid = world.trusted_instance_id(view)
    if not iid or world.instance(iid) is None:
        return False
    return not view.deleting and wk.TERMINATION_FINALIZER not in view.finalizers


def add_finalizers(rt: Runtime, world: World, *, dry_run: bool = False) -> list[str]:
    """Put ``karpenter.sh/termination`` on this cluster's registered Nodes that lack it, as Karpenter's
    registration does, so a ``kubectl delete node`` waits for nodescale to drain the node and terminate its
    instance (``usecases/finalize``). Returns the nodes given it."""
    added = []
    for view in world.nodes:
        if not needs_finalizer(world, view) or dry_run:
            continue
        try:
            # Read again: the snapshot's version is older than the kubelet's latest status update.
            k8s_finalizers.ensure(rt.api, k8s_nodes.node_path(view.name), wk.TERMINATION_FINALIZER)
        except (ApiException, k8s_finalizers.FinalizerConflict) as exc:
            # The node changed since it was read (or went): the next pass reads it again.
            log.warning("termination finalizer not added", extra={"node": view.name, "error": str(exc)})
            continue
        added.append(view.name)
    if added:
        log.info("termination finalizer added", extra={"nodes": added})
    return added
# ------------------------------------------------------------------------------------- NodeClaims (#30.1)


def nodeclaim_status(claim: Mapping[str, Any], node_name: str, ready: bool, now: str) -> dict[str, Any] | None:
    """The status to write on ``claim`` now that its node ``node_name`` registered (and, with ``ready``,
    initialized): nodeName, Registered, Initialized, Ready; None when it already says all that."""
    status = claim.get("status") or {}
    old = status.get("conditions") or []
    generation = int((claim.get("metadata") or {}).get("generation") or 1)
    conditions = ncm.set_condition(old, ncm.REGISTERED, ncm.TRUE, now=now, generation=generation)
    if ready:
        conditions = ncm.set_condition(conditions, ncm.INITIALIZED, ncm.TRUE, now=now, generation=generation)
    conditions = ncm.with_ready(conditions, now=now, generation=generation)
    if status.get("nodeName") == node_name and _statuses(conditions) == _statuses(old):
        return None
    return {"nodeName": node_name, "conditions": conditions}


def _statuses(conditions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {c.get("type"): c.get("status") for c in conditions}


def _claims_by_instance(world: World) -> dict[str, dict[str, Any]]:
    """The snapshot's NodeClaims by the instance their providerID names (none without the CRD)."""
    return {iid: claim for claim in world.nodeclaims or () if (iid := ncm.instance_of(claim))}


def sync_nodeclaims(rt: Runtime, world: World, *, dry_run: bool = False) -> int:
    """Karpenter's registration and initialization on the NodeClaims of this cluster's registered nodes:
    nodeName and Registered=True, then Initialized=True (and Ready) once the node is initialized. Writes
    only what changed, through the status subresource; returns how many NodeClaims it wrote."""
    by_instance = {} if dry_run else _claims_by_instance(world)
    if not by_instance:
        return 0
    written = 0
    now = nodeclaims.now_text()
    for view in world.nodes:
        iid = world.trusted_instance_id(view)
        claim = by_instance.get(iid) if iid else None
        inst = world.instance(iid) if iid else None
        if claim is None or inst is None:
            continue
        pool = world.nodepools.get(inst.nodepool or "")
        it = world.instance_type(inst.instance_type, inst.nodepool) if pool is not None else None
        ready = view.labels.get(wk.INITIALIZED) == TRUE or (
            pool is not None and it is not None and initialized(view, pool, it))
        status = nodeclaim_status(claim, view.name, ready, now)
        if status is None:
            continue
        name = (claim.get("metadata") or {}).get("name", "")
        try:
            k8s_nodeclaims.patch_status(rt.api, name, status)
        except ApiException as exc:  # the next pass tries again
            log.warning("could not write a NodeClaim's registration", extra={"nodeclaim": name, "error": str(exc)})
            continue
        written += 1
        log.info("nodeclaim registered", extra={"nodeclaim": name, "node": view.name, "initialized": ready})
    return written
