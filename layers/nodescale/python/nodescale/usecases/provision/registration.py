"""Karpenter's registration and initialization, for the nodes of this cluster's instances.

    sync_nodes(rt, world) -> World   label newly registered nodes; returns the snapshot with their labels
    register_joined(rt, names)       the same for Nodes that just joined, read afresh (the watch calls it)
    add_finalizers(rt, world)        put karpenter.sh/termination on the nodes nodescale launched (#30.3)
    sync_nodeclaims(rt, world)       their NodeClaims' nodeName, Registered, Initialized (#30.1)

When a Node of an instance nodescale launched appears, it carries only what its kubelet may set
(``--node-labels``, see ``aws/userdata.node_labels``). Karpenter copies its NodeClaim's labels onto the
Node and marks it ``karpenter.sh/registered=true``; later, once the node is Ready, its startup taints are
gone and its extended resources are advertised, ``karpenter.sh/initialized=true``. This does the same
from the instance (pool, type, zone, capacity type), with the labels the solver planned the node with
(``World.expected_labels``, ``model/nodelabels``), so a pod planned onto it finds what it selects.

Labels are synced once, at registration (as Karpenter's registration controller does): a label changed
on the node afterwards is the operator's business. The provisioner runs it on every pass, before planning,
and, while its watch runs, as each Node joins (:func:`register_joined`): the node launched with
``karpenter.sh/unregistered:NoExecute`` takes no pod until then, so it must not wait for the next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ...k8s import finalizers as k8s_finalizers
from ...k8s import nodeclaims as k8s_nodeclaims
from ...k8s import nodes as k8s_nodes
from ...k8s.client import POOL_MAXSIZE
from ...model import labels as wk
from ...model.instancetype import InstanceType
from ...model.node import ClusterNode
from ...model.nodepool import NodePool
from ...model.nodepool_hash import HASH_ANNOTATION, HASH_VERSION_ANNOTATION, hash_annotations
from ...model.taints import UNREGISTERED_TAINT
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling.inflight import startup_keys
from ..side_by_side import side_by_side
from ..world import World, read_world
from . import nodeclaims

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)

TRUE = "true"
# Nodes written at once: the client's connection pool (a pass after a burst registers thousands).
WRITE_WORKERS = POOL_MAXSIZE
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


def sync_nodes(rt: Runtime, world: World, *, dry_run: bool = False, only: Collection[str] | None = None) -> World:
    """Label this cluster's newly registered (and newly initialized) nodes (``only``: of those named), and return
    the snapshot with the labels they now carry (``world`` itself is left as read), which the pass that called
    this plans with. A node registered now gets its termination finalizer in the registration's one write; the
    nodes' writes go side by side (a burst registers thousands of nodes in one pass, #33: one at a time, a
    pass at 10,000 nodes spent 800 s writing them)."""
    wants = [(view, want) for view in world.nodes
             if (only is None or view.name in only) and (want := labels_to_sync(world, view))]
    registering = {view.name for view, want in wants if wk.REGISTERED in want}
    add_finalizers(rt, world, dry_run=dry_run, only=only, skip=registering)
    if dry_run:  # A dry run changes nothing, but plans as the next pass will: with the labels synced.
        return world.with_node_labels({view.name: want for view, want in wants}) if wants else world
    claims = _claims_by_instance(world)

    def write(entry: tuple[ClusterNode, dict[str, str]]) -> bool:
        view, want = entry
        iid = world.trusted_instance_id(view)
        inst = world.instance(iid) if iid else None
        pool = world.nodepools.get(inst.nodepool or "") if inst is not None else None
        record = annotations_to_sync(view, claims.get(iid) if iid else None, pool)
        try:
            _write_sync(rt, world, view, want, record)
        except (ApiException, k8s_nodes.NodeGoneError) as exc:
            # The next pass tries again; planning goes on with the node as it is.
            log.warning("could not label a registered node", extra={"node": view.name, "error": str(exc)})
            return False
        log.info("node labels synced", extra={"node": view.name, "labels": sorted(want)})
        return True

    written = side_by_side(write, wants, WRITE_WORKERS, "nodescale-register")
    changed = {view.name: want for (view, want), ok in zip(wants, written, strict=True) if ok}
    return world.with_node_labels(changed) if changed else world


def _write_sync(
    rt: Runtime, world: World, view: ClusterNode, want: Mapping[str, str], record: Mapping[str, str]
) -> None:
    """Write ``want`` on the node; at registration in one write, guarded by the node's resourceVersion, with
    its pool's taints added and ``karpenter.sh/unregistered`` removed (#30.4). Startup taints are not added
    again: this pass may come after their owner removed them (it removes them once), and the user data
    registered the node with them."""
    if wk.REGISTERED not in want:
        k8s_nodes.patch_metadata(rt.api, view.name, labels=want, annotations=record)
        return
    iid = world.trusted_instance_id(view)
    inst = world.instance(iid) if iid else None
    pool = world.nodepools.get(inst.nodepool or "") if inst is not None else None
    if pool is None:  # labels_to_sync wants nothing of a node that is not ours
        raise AssertionError(f"registration of {view.name}, a node of no known pool")
    if not k8s_nodes.has_taint(view.raw, UNREGISTERED_TAINT.key, UNREGISTERED_TAINT.effect):
        # Karpenter logs it and goes on: the node's user data (a Custom family's, or an older launch) lacks it.
        log.warning("node registered without the karpenter.sh/unregistered taint", extra={"node": view.name})
    finalizer = wk.TERMINATION_FINALIZER if needs_finalizer(world, view) else None
    k8s_nodes.register(rt.api, view.name, want, pool.taints, UNREGISTERED_TAINT, record, finalizer)
    if k8s_nodes.has_taint(view.raw, UNREGISTERED_TAINT.key):
        log.info("unregistered taint removed", extra={"node": view.name})


def register_joined(rt: Runtime, names: Collection[str], *, dry_run: bool = False) -> list[str]:
    """Register the Nodes ``names`` that just joined, as the provisioner's pass would (labels, the pool's
    taints, ``karpenter.sh/unregistered`` removed, the finalizer, the NodeClaim's status), without planning.
    Reads the cluster afresh; a Node nodescale did not launch is left alone. Returns the nodes of this
    cluster among ``names``. A read or write that fails is logged: the next event or pass tries again."""
    try:
        waiting = _still_unregistered(rt, names)
        # A delivery that came after the node was registered (its kubelet wrote meanwhile) reads nothing more.
        world = read_world(rt, include_pods=False) if waiting else None
    except (ApiException, BotoCoreError, ClientError) as exc:
        log.warning("could not read the cluster to register nodes", extra={"nodes": sorted(names), "error": str(exc)})
        return []
    if world is None:
        return []
    ours = [v.name for v in world.nodes if v.name in waiting and _launched_here(world, v)]
    if not ours:
        return []
    world = sync_nodes(rt, world, dry_run=dry_run, only=ours)
    sync_nodeclaims(rt, world, dry_run=dry_run, only=ours)
    return ours


def _still_unregistered(rt: Runtime, names: Collection[str]) -> set[str]:
    """Those of ``names`` whose Node is still there and not registered yet (one read each, by name)."""
    waiting = set()
    for name in names:
        try:
            node = k8s_nodes.get_node(rt.api, name)
        except k8s_nodes.NodeGoneError:
            continue
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(wk.REGISTERED) != TRUE or k8s_nodes.has_taint(node, UNREGISTERED_TAINT.key):
            waiting.add(name)
    return waiting


def _launched_here(world: World, view: ClusterNode) -> bool:
    iid = world.trusted_instance_id(view)
    return iid is not None and world.instance(iid) is not None


def needs_finalizer(world: World, view: ClusterNode) -> bool:
    """A Node of an instance nodescale launched for this cluster, not being deleted, without the termination
    finalizer. A Node nodescale did not launch never gets it: deleting it is not nodescale's business."""
    iid = world.trusted_instance_id(view)
    if not iid or world.instance(iid) is None:
        return False
    return not view.deleting and wk.TERMINATION_FINALIZER not in view.finalizers


def add_finalizers(
    rt: Runtime, world: World, *, dry_run: bool = False, only: Collection[str] | None = None,
    skip: Collection[str] = (),
) -> list[str]:
    """Put ``karpenter.sh/termination`` on this cluster's registered Nodes that lack it, as Karpenter's
    registration does, so a ``kubectl delete node`` waits for nodescale to drain the node and terminate its
    instance (``usecases/finalize``). ``skip``: nodes whose registration write adds it. Returns the nodes
    given it."""
    todo = [view for view in world.nodes
            if view.name not in skip and (only is None or view.name in only) and needs_finalizer(world, view)]
    if dry_run or not todo:
        return []

    def add(view: ClusterNode) -> bool:
        try:
            # Read again: the snapshot's version is older than the kubelet's latest status update.
            k8s_finalizers.ensure(rt.api, k8s_nodes.node_path(view.name), wk.TERMINATION_FINALIZER)
        except (ApiException, k8s_finalizers.FinalizerConflict) as exc:
            # The node changed since it was read (or went): the next pass reads it again.
            log.warning("termination finalizer not added", extra={"node": view.name, "error": str(exc)})
            return False
        return True

    added = [view.name for view, ok in zip(todo, side_by_side(add, todo, WRITE_WORKERS, "nodescale-finalize"),
                                           strict=True) if ok]
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


def sync_nodeclaims(rt: Runtime, world: World, *, dry_run: bool = False, only: Collection[str] | None = None) -> int:
    """Karpenter's registration and initialization on the NodeClaims of this cluster's registered nodes:
    nodeName and Registered=True, then Initialized=True (and Ready) once the node is initialized. Writes
    only what changed, through the status subresource; returns how many NodeClaims it wrote."""
    by_instance = {} if dry_run else _claims_by_instance(world)
    if not by_instance:
        return 0
    now = nodeclaims.now_text()
    todo: list[tuple[str, str, dict[str, Any], bool]] = []
    for view in world.nodes:
        iid = world.trusted_instance_id(view) if only is None or view.name in only else None
        claim = by_instance.get(iid) if iid else None
        inst = world.instance(iid) if iid else None
        if claim is None or inst is None:
            continue
        pool = world.nodepools.get(inst.nodepool or "")
        it = world.instance_type(inst.instance_type, inst.nodepool) if pool is not None else None
        ready = view.labels.get(wk.INITIALIZED) == TRUE or (
            pool is not None and it is not None and initialized(view, pool, it))
        status = nodeclaim_status(claim, view.name, ready, now)
        if status is not None:
            todo.append(((claim.get("metadata") or {}).get("name", ""), view.name, status, ready))

    def write(entry: tuple[str, str, dict[str, Any], bool]) -> bool:
        name, node, status, ready = entry
        try:
            k8s_nodeclaims.patch_status(rt.api, name, status)
        except ApiException as exc:  # the next pass tries again
            log.warning("could not write a NodeClaim's registration", extra={"nodeclaim": name, "error": str(exc)})
            return False
        log.info("nodeclaim registered", extra={"nodeclaim": name, "node": node, "initialized": ready})
        return True

    return sum(side_by_side(write, todo, WRITE_WORKERS, "nodescale-nodeclaims"))
