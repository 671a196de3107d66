"""The NodeClaim of each launch (#30.1): created before the Fleet call, its status written after it, deleted
when the launch gave it no instance.

    created(rt, pool, claims, options) -> names      one NodeClaim per planned node ("" where none was made)
    launched(rt, name, inst, it, image_id)           providerID, imageID, capacity, allocatable, Launched=True;
                                                     the instance tagged karpenter.sh/nodeclaim=<name>
    launched_all(rt, [(name, inst, it, image_id)])   the same for a Fleet's instances, side by side
    discard(rt, names)                               a launch that got no instance leaves no NodeClaim
    past_registration_ttl(claims, cluster, stale, ...)  ours whose node never registered (Karpenter's liveness)
    remove(rt, claims)                               their finalizer released and deleted, once instances went

Bookkeeping never holds capacity back: without the NodeClaim CRD (a 404 on the collection) or when a write
fails, the launch goes on, and a warning says so (once per invocation for the missing CRD). The NodeClaims
are listed once a pass, with the world (``world_sources.read_nodeclaims``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ... import clock
from ...aws import instances as ec2_instances
from ...aws.fleet import LaunchedInstance
from ...k8s import client as k8s_client
from ...k8s import nodeclaims as k8s_nodeclaims
from ...k8s.raw import path_segment, request_json
from ...model.instancetype import InstanceType
from ...model.nodepool import NodePool
from ...model.timestamps import format_timestamp
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling.plan import NodeClaim
from ..side_by_side import side_by_side

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)

CLUSTER_NODEPOOL_SOURCE = "cluster:NodePool/"
WRITE_WORKERS = k8s_client.POOL_MAXSIZE  # NodeClaim writes at once: the Kubernetes client's connections


def state(rt: Runtime) -> k8s_nodeclaims.State:
    """What this invocation learned about NodeClaims (kept on the runtime until the next one begins)."""
    return rt.nodeclaims


def now_text() -> str:
    return format_timestamp(clock.now())


def owner_uid(rt: Runtime, pool: NodePool) -> str:
    """The uid of the pool's NodePool object when the pool is one (the NodeClaims' owner), else ""."""
    if not pool.source.startswith(CLUSTER_NODEPOOL_SOURCE) or pool.kind != "NodePool":
        return ""
    known = state(rt).owners
    if pool.real_name not in known:
        try:
            obj = request_json(rt.api, "GET", f"/apis/karpenter.sh/v1/nodepools/{path_segment(pool.real_name)}")
            known[pool.real_name] = str((obj.get("metadata") or {}).get("uid") or "")
        except ApiException as exc:
            log.warning("could not read the NodePool's uid", extra={"nodepool": pool.real_name, "error": str(exc)})
            known[pool.real_name] = ""
    return known[pool.real_name]


def created(rt: Runtime, pool: NodePool, claims: Sequence[NodeClaim], options: Sequence[InstanceType]) -> list[str]:
    """One NodeClaim per claim, before the launch; "" for each one not made (no CRD, or the write failed).
    The first is written alone (a cluster without the CRD answers it with a 404, and no more are tried), the
    others side by side: a Fleet of 100 nodes waited on 100 writes one after another (#32, 10,000 nodes)."""
    book = state(rt)
    if book.missing or not claims:
        return [""] * len(claims)
    offered = [it.name for it in options]
    uid = owner_uid(rt, pool)

    def create(claim: NodeClaim) -> str:
        if book.missing:
            return ""
        name = ncm.claim_name(pool.real_name, k8s_nodeclaims.random_suffix())
        manifest = ncm.nodeclaim_object(claim, pool, offered, name=name, owner_uid=uid, cluster=rt.cluster)
        try:
            return str(k8s_nodeclaims.create(rt.api, manifest)["metadata"]["name"])
        except k8s_nodeclaims.NodeClaimsMissing:
            if not book.missing:
                book.missing = True
                log.warning("the cluster has no NodeClaim CRD (nodeclaims.karpenter.sh): launching without "
                            "NodeClaims", extra={"nodepool": pool.real_name})
            return ""
        except ApiException as exc:
            log.warning("could not create a NodeClaim", extra={"nodepool": pool.real_name, "error": str(exc)})
            return ""

    first = create(claims[0])
    return [first, *side_by_side(create, claims[1:], WRITE_WORKERS, "nodescale-nodeclaims")]


def launched_all(rt: Runtime, writes: Sequence[tuple[str, LaunchedInstance, InstanceType | None, str]]) -> None:
    """:func:`launched` for each (name, instance, type, image) of one Fleet's instances, side by side."""
    side_by_side(lambda w: launched(rt, *w), [w for w in writes if w[0]], WRITE_WORKERS, "nodescale-nodeclaims")


def launched(rt: Runtime, name: str, inst: LaunchedInstance, it: InstanceType | None, image_id: str) -> None:
    """The launched instance's labels and status on its NodeClaim (Karpenter's lifecycle launch step), and
    the NodeClaim's name as the instance's ``karpenter.sh/nodeclaim`` tag."""
    if not name:
        return
    try:
        ec2_instances.tag_nodeclaim(rt.aws.ec2, inst.instance_id, name)
    except (ClientError, BotoCoreError) as exc:
        log.warning("could not tag an instance with its NodeClaim", extra={
            "nodeclaim": name, "instance": inst.instance_id, "error": str(exc)})
    if it is None:
        return
    try:
        written = k8s_nodeclaims.patch_labels(rt.api, name, ncm.launched_labels(it, inst.zone, inst.capacity_type))
        generation = int((written.get("metadata") or {}).get("generation") or 1)
        status = ncm.launched_status(it, inst.zone, inst.instance_id, image_id, now=now_text(), generation=generation)
        k8s_nodeclaims.patch_status(rt.api, name, status)
    except ApiException as exc:
        log.warning("could not write a NodeClaim's launch", extra={"nodeclaim": name, "instance": inst.instance_id,
                                                                   "error": str(exc)})


def discard(rt: Runtime, names: Iterable[str]) -> None:
    """Delete the NodeClaims of planned nodes that got no instance (their finalizer first: ours)."""
    for name in names:
        if not name:
            continue
        try:
            k8s_nodeclaims.delete(rt.api, name)
        except ApiException as exc:
            log.warning("could not delete the NodeClaim of a failed launch", extra={"nodeclaim": name,
                                                                                     "error": str(exc)})


def past_registration_ttl(
    claims: Iterable[dict[str, Any]], cluster: str, stale: Collection[str], *, now: datetime, ttl_seconds: float,
) -> list[dict[str, Any]]:
    """Of ``claims`` (the snapshot's), those nodescale created for ``cluster`` whose node has not registered
    within the TTL (Karpenter's liveness), with those of the instances in ``stale``; never one it did not create."""
    return [c for c in claims
            if ncm.registration_expired(c, cluster, now=now, ttl_seconds=ttl_seconds, stale=stale)]


def remove(rt: Runtime, claims: Iterable[dict[str, Any]]) -> list[str]:
    """Release the termination finalizer of these NodeClaims (their instances are gone: the caller terminated
    them) and delete them. Returns the names removed; one that fails is left for the next pass."""
    removed = []
    for claim in claims:
        name = str((claim.get("metadata") or {}).get("name") or "")
        try:
            k8s_nodeclaims.delete(rt.api, name)
        except ApiException as exc:
            log.warning("could not delete an unregistered NodeClaim", extra={"nodeclaim": name, "error": str(exc)})
            continue
        removed.append(name)
        log.warning("nodeclaim did not register in time; deleted",
                    extra={"nodeclaim": name, "instance_id": ncm.instance_of(claim) or None})
    return removed
