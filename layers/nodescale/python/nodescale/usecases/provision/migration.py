"""Migration to NodeClaims (#30.6), once a pass before the NodeClaims' registration is synced.

    backfill(rt, world)   a NodeClaim for each registered node nodescale launched that has none
    adopt(rt, world)      the NodeClaims a previous Karpenter left for a NodePool nodescale manages, when compatible

Nodes nodescale launched before it wrote NodeClaims get theirs once: the name comes from the instance id, so a
later pass finds it (and writes its status if an earlier one stopped before that). A Karpenter NodeClaim of a
pool nodescale manages, compatible with the pool (``nodeclaim_migration.adoption``) and whose instance Karpenter
launched for this cluster, is adopted: its instance tagged ``nodescale.io/cluster`` and the NodeClaim annotated,
name and spec kept, so nodescale counts, drains, expires and terminates it as its own, and does not drift it
for having been Karpenter's. An incompatible one is left alone (never deleted), with a warning.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError
from kubernetes.client.exceptions import ApiException

from ...aws import adoption as ec2_adoption
from ...aws import tags as tagging
from ...k8s import nodeclaims as k8s_nodeclaims
from ...model import labels as wk
from ...model.node import ClusterNode
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling import nodeclaim_migration as mig
from ..world import World
from . import nodeclaims
from .registration import initialized

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)


def backfill(rt: Runtime, world: World, *, dry_run: bool = False) -> list[str]:
    """Create the missing NodeClaims of this cluster's registered nodes; returns the names written."""
    if dry_run or world.nodeclaims is None:  # no CRD (or the list failed): nothing to compare with
        return []
    written = []
    for view in world.nodes:
        try:
            name = _backfill_one(rt, world, view)
        except k8s_nodeclaims.NodeClaimsMissing:
            return written
        except ApiException as exc:  # the next pass tries again
            log.warning("could not write a node's NodeClaim", extra={"node": view.name, "error": str(exc)})
            continue
        if name:
            written.append(name)
            log.info("nodeclaim backfilled", extra={"nodeclaim": name, "node": view.name})
    return written


def _backfill_one(rt: Runtime, world: World, view: ClusterNode) -> str:
    """The NodeClaim written for ``view`` ("" when it needs none, or cannot have one)."""
    iid = world.trusted_instance_id(view)
    inst = world.instance(iid) if iid else None
    pool = world.nodepools.get(inst.nodepool or "") if inst is not None else None
    if inst is None or pool is None or view.deleting:
        return ""  # not nodescale's, or its pool is gone: nothing to write it from
    name = mig.backfill_name(pool.real_name, inst.instance_id)
    action = mig.backfill_action(name, inst.instance_id, world.nodeclaims or (), rt.cluster)
    if action is mig.Backfill.NONE:
        return ""
    if action is mig.Backfill.CONFLICT:
        log.warning("a node's NodeClaim name is taken by another NodeClaim; none written",
                    extra={"node": view.name, "nodeclaim": name})
        return ""
    if action is mig.Backfill.CREATE:
        manifest = mig.backfill_object(pool, view, inst.instance_type, inst.zone, inst.capacity_type, name=name,
                                       cluster=rt.cluster, owner_uid=nodeclaims.owner_uid(rt, pool))
        if not k8s_nodeclaims.create_named(rt.api, manifest):
            return ""  # made since the list was read: the next pass sees it
    it = world.instance_type(inst.instance_type, inst.nodepool)
    ready = view.labels.get(wk.INITIALIZED) == "true" or (it is not None and initialized(view, pool, it))
    status = mig.backfill_status(view, it, inst.zone, inst.instance_id, initialized=ready, now=nodeclaims.now_text())
    k8s_nodeclaims.patch_status(rt.api, name, status)
    return name


def adopt(rt: Runtime, world: World, *, dry_run: bool = False) -> list[str]:
    """Adopt the compatible NodeClaims Karpenter left for the NodePools nodescale manages; returns their names."""
    pools = {p.real_name: p for p in world.nodepools.values() if p.kind == "NodePool"}
    verdicts = [(c, v) for c in world.nodeclaims or ()
                if (v := mig.adoption(c, pools, world.nodeclasses, rt.cluster)) is not None]
    for _, verdict in verdicts:
        if not verdict.adopt:
            log.warning("a Karpenter NodeClaim is not compatible with its NodePool: left alone",
                        extra={"nodeclaim": verdict.name, "nodepool": verdict.pool, "reason": verdict.reason})
    compatible = [(ncm.instance_of(c), v) for c, v in verdicts if v.adopt]
    if dry_run or not compatible:
        return []
    try:
        tags = ec2_adoption.instance_tags(rt.aws.ec2, [iid for iid, _ in compatible])
    except ClientError as exc:
        log.warning("could not read the instances of Karpenter's NodeClaims", extra={"error": str(exc)})
        return []
    return [v.name for iid, v in compatible if _adopt_one(rt, v, iid, tags.get(iid))]


def _adopt_one(rt: Runtime, verdict: mig.Verdict, iid: str, tags: dict[str, str] | None) -> bool:
    if tags is None:
        log.warning("a Karpenter NodeClaim's instance is not running: not adopted",
                    extra={"nodeclaim": verdict.name, "instance_id": iid})
        return False
    owned = tagging.is_managed(tags, rt.cluster)
    why = None if owned else mig.karpenter_instance(tags, rt.cluster, verdict.pool, verdict.name)
    if why is not None:
        log.warning("a Karpenter NodeClaim's instance is not this cluster's: not adopted",
                    extra={"nodeclaim": verdict.name, "instance_id": iid, "reason": why})
        return False
    try:
        if not owned:
            ec2_adoption.tag_owned(rt.aws.ec2, iid, rt.cluster)
        # The annotation last: a pass that stops between the two adopts it again, the tag already there.
        k8s_nodeclaims.patch_annotations(rt.api, verdict.name, {ncm.OWNER_ANNOTATION: rt.cluster})
    except (ClientError, ApiException) as exc:
        log.warning("could not adopt a Karpenter NodeClaim", extra={"nodeclaim": verdict.name, "error": str(exc)})
        return False
    log.info("karpenter nodeclaim adopted", extra={"nodeclaim": verdict.name, "instance_id": iid,
                                                   "nodepool": verdict.pool})
    return True
