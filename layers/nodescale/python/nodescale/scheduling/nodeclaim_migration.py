"""Migration to NodeClaims (#30.6): the NodeClaim of a node nodescale launched before it wrote them, and the
verdict on a NodeClaim a previous Karpenter left.

    backfill_name(pool, instance_id)                      the node's NodeClaim name, the same on every pass
    backfill_action(name, instance_id, claims, cluster)   create, repair (status), or nothing
    backfill_object(pool, node, instance_type, ...)       the NodeClaim, as nodescale writes them at launch
    backfill_status(node, it, ...)                        its status: Launched, Registered (Initialized)
    adoption(claim, pools, node_classes, cluster)         adopt a Karpenter NodeClaim, or why not
    karpenter_instance(tags, cluster, pool, claim)        the instance is Karpenter's, of this cluster and pool

Pure. A backfilled NodeClaim's name is drawn from its instance id rather than at random: a second pass, or one
after a crash between the create and the status write, finds the one it made instead of making another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.node import ClusterNode
from ..model.nodepool import NodePool
from ..model.nodepool_hash import HASH_ANNOTATION, HASH_VERSION_ANNOTATION
from ..model.requirements import Requirements
from . import nodeclaim_manifest as ncm
from .plan import NodeClaim

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
SUFFIX_LENGTH = 5
# The tags Karpenter's EC2 provider puts on every instance it launches (aws/karpenter-provider-aws,
# pkg/providers/instance): its cluster's ownership tag and the NodeClaim it launched for.
KARPENTER_CLUSTER_TAG = "kubernetes.io/cluster/{cluster}"
KARPENTER_NODECLAIM_TAG = "karpenter.sh/nodeclaim"


def backfill_name(pool: str, instance_id: str) -> str:
    """``<pool>-<5 characters>`` as Karpenter names a pool's NodeClaims, the characters taken from a hash of the
    instance id so that every pass and every invocation names the node's NodeClaim alike."""
    digest = hashlib.sha256(instance_id.encode()).digest()
    return ncm.claim_name(pool, "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:SUFFIX_LENGTH]))


class Backfill(StrEnum):
    NONE = "none"  # the instance has its NodeClaim
    CREATE = "create"
    REPAIR = "repair"  # ours, made by an earlier pass that stopped before writing its status
    CONFLICT = "conflict"  # the name is another instance's or another's NodeClaim: left to a person


def backfill_action(
    name: str, instance_id: str, claims: Sequence[Mapping[str, Any]], cluster: str,
) -> Backfill:
    """What the instance's node needs: nothing when a NodeClaim names the instance (whoever made it), the
    status when ``name`` is ours without a providerID, a new NodeClaim when ``name`` is free."""
    if any(ncm.instance_of(c) == instance_id for c in claims):
        return Backfill.NONE
    same = next((c for c in claims if (c.get("metadata") or {}).get("name") == name), None)
    if same is None:
        return Backfill.CREATE
    if ncm.created_by(same, cluster) and not ncm.instance_of(same):
        return Backfill.REPAIR
    return Backfill.CONFLICT


def _node_labels(node: ClusterNode, pool: NodePool) -> dict[str, str]:
    """The node's labels a NodeClaim of its pool carries: the well-known ones and those the pool requires."""
    keep = wk.WELL_KNOWN | set(pool.requirements)
    return {k: v for k, v in node.labels.items() if k in keep and k != wk.HOSTNAME and isinstance(v, str)}


def backfill_object(
    pool: NodePool, node: ClusterNode, instance_type: str, zone: str, capacity_type: str, *,
    name: str, cluster: str, owner_uid: str = "",
) -> dict[str, Any]:
    """The NodeClaim nodescale would have written when it launched ``node``: the pool's template narrowed to the
    instance's type, zone and capacity type, with the node's labels."""
    claim = NodeClaim(
        nodepool=pool.name, instance_types=[instance_type], capacity_types=[capacity_type] if capacity_type else [],
        zones=[zone] if zone else [], labels=_node_labels(node, pool), taints=pool.taints,
        startup_taints=pool.startup_taints, requirements=pool.requirements, pods=[], price=0.0, requests={},
    )
    obj = ncm.nodeclaim_object(claim, pool, [instance_type], name=name, owner_uid=owner_uid, cluster=cluster)
    # The node was launched before this claim, from a template nobody recorded: no digest (#31.5), so it is never
    # drifted for a template it may not have been launched from.
    for key in (HASH_ANNOTATION, HASH_VERSION_ANNOTATION):
        obj["metadata"]["annotations"].pop(key, None)
    return obj


def backfill_status(
    node: ClusterNode, it: InstanceType | None, zone: str, instance_id: str, *, initialized: bool, now: str,
    generation: int = 1,
) -> dict[str, Any]:
    """Its status: the providerID and node, the type's capacity, Launched and Registered True (the node is
    there), Initialized True when the node is."""
    conditions: list[dict[str, Any]] = []
    for type_, done in ((ncm.LAUNCHED, True), (ncm.REGISTERED, True), (ncm.INITIALIZED, initialized)):
        conditions = ncm.set_condition(conditions, type_, ncm.TRUE if done else ncm.UNKNOWN, now=now,
                                       generation=generation)
    status: dict[str, Any] = {"providerID": ncm.provider_id(zone, instance_id), "nodeName": node.name,
                              "conditions": ncm.with_ready(conditions, now=now, generation=generation)}
    if it is not None:
        status["capacity"] = res.format_resources(it.capacity)
        status["allocatable"] = res.format_resources(it.allocatable)
    return status


# ----------------------------------------------------------------------------------------------- adoption


@dataclass(frozen=True, slots=True)
class Verdict:
    """A Karpenter NodeClaim of a pool nodescale manages: adopted, or left alone with ``reason``."""

    name: str
    pool: str
    adopt: bool
    reason: str = ""


def _pool_of(claim: Mapping[str, Any]) -> str:
    labels = (claim.get("metadata") or {}).get("labels") or {}
    return str(labels.get(wk.NODEPOOL) or "")


def adoption(
    claim: Mapping[str, Any], pools: Mapping[str, NodePool], node_classes: Collection[str], cluster: str,
) -> Verdict | None:
    """Whether nodescale takes over ``claim``; None when it is not a candidate (already ours, being deleted,
    not launched, or of a NodePool nodescale does not manage: then it is none of nodescale's business).

    Compatible means not drifted by what nodescale's drift compares (``disruption/drift.template_drift``, which
    restates Karpenter's RequirementsDrifted and, for the template's labels and taints, its NodePoolDrifted):
    the NodeClaim names the pool's node class, which nodescale has, its labels meet the pool's requirements, and
    it carries the pool's labels and taints."""
    meta = claim.get("metadata") or {}
    pool = pools.get(_pool_of(claim))
    if ncm.created_by(claim, cluster) or meta.get("deletionTimestamp") or pool is None or not ncm.instance_of(claim):
        return None
    why = incompatibility(claim, pool, node_classes)
    return Verdict(str(meta.get("name") or ""), pool.real_name, why is None, why or "")


def incompatibility(claim: Mapping[str, Any], pool: NodePool, node_classes: Collection[str]) -> str | None:
    """Why ``claim`` would be drifted against ``pool`` today, or None."""
    spec = claim.get("spec") or {}
    ref = spec.get("nodeClassRef") or {}
    wanted = {"group": ncm.NODECLASS_GROUP, "kind": pool.node_class_kind, "name": pool.node_class}
    if {k: ref.get(k) for k in wanted} != wanted:
        return f"nodeClassRef {ref.get('kind')}/{ref.get('name')} is not the NodePool's {wanted['kind']}/{pool.node_class}"
    if pool.node_class not in node_classes:
        return f"node class {pool.node_class} is not one nodescale has"
    labels = {k: str(v) for k, v in ((claim.get("metadata") or {}).get("labels") or {}).items()}
    # Karpenter's RequirementsDrifted: the NodePool's requirements against the NodeClaim's labels, an undefined
    # well-known label allowed.
    why = Requirements.from_labels(labels).incompatibility(pool.requirements)
    if why is not None:
        return f"its labels no longer meet the NodePool's requirements: {why}"
    for key, value in sorted(pool.labels.items()):
        if labels.get(key) != value:
            return f"NodePool label {key}={value!r} is missing"
    present = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in spec.get("taints") or ()
               if isinstance(t, Mapping)}
    for taint in pool.taints:
        if (taint.key, taint.value, taint.effect) not in present:
            return f"NodePool taint {taint} is missing"
    return None


def karpenter_instance(tags: Mapping[str, str], cluster: str, pool: str, claim: str) -> str | None:
    """Why the instance is not the one Karpenter launched for ``claim`` of ``pool`` in ``cluster`` (its tags),
    or None. Only such an instance is tagged for nodescale on adoption."""
    if tags.get(KARPENTER_CLUSTER_TAG.format(cluster=cluster)) != "owned":
        return f"it has no {KARPENTER_CLUSTER_TAG.format(cluster=cluster)}=owned tag"
    if tags.get(wk.NODEPOOL) != pool:
        return f"its {wk.NODEPOOL} tag is not {pool}"
    if tags.get(KARPENTER_NODECLAIM_TAG, claim) != claim:
        return f"its {KARPENTER_NODECLAIM_TAG} tag names another NodeClaim"
    return None
