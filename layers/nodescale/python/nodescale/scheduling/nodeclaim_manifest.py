"""The karpenter.sh/v1 NodeClaim object of a planned node, as Karpenter writes it, and its status conditions.

    nodeclaim_object(claim, pool, offered, name=..., owner_uid=...)   the object created before the Fleet call
    launched_labels(it, zone, capacity_type)                           labels the launched instance adds
    launched_status(...)                                               status after the launch (providerID...)
    set_condition(conditions, type, status, ...)                       one condition set, Karpenter's shape
    with_ready(conditions, ...)                                        the root Ready condition from the others
    registration_expired(claim, cluster, now=..., ...)                ours, unregistered past the TTL (#30.1)

Pure: the caller gives the name suffix, the time and the object's generation. Karpenter's NodeClaim (its
pkg/apis/v1/nodeclaim.go, nodeclaim_status.go) narrows the pool template's requirements to the instance
types it offers, adds the zones and capacity types the plan allows, and carries the pool's taints, startup
taints, node class reference, expireAfter and terminationGracePeriod.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType
from ..model.node import parse_provider_id
from ..model.nodepool import NodePool
from ..model.nodepool_hash import hash_annotations
from ..model.requirements import Requirement, Requirements
from ..model.taints import Taint
from ..model.timestamps import parse_timestamp
from .plan import NodeClaim

GROUP = "karpenter.sh"
VERSION = "v1"
PLURAL = "nodeclaims"
KIND = "NodeClaim"
API_VERSION = f"{GROUP}/{VERSION}"
NODECLASS_GROUP = "karpenter.k8s.aws"

LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
# Ready is the root condition: True once every one of these is (operatorpkg's living conditions).
DEPENDENTS = (LAUNCHED, REGISTERED, INITIALIZED)
TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
AWAITING = ("AwaitingReconciliation", "object is awaiting reconciliation")

# Requirement keys the NodeClaim CRD refuses (its x-kubernetes-validations): a claim never carries them.
_ALLOWED_KARPENTER_KEYS = frozenset({wk.CAPACITY_TYPE, wk.NODEPOOL})
MAX_REQUIREMENTS = 100
# Marks the NodeClaims nodescale created, with the cluster's name (the EC2 ownership tag's key and value): only
# those are ever deleted by it. Karpenter's own NodeClaims, during a migration, carry no such annotation.
OWNER_ANNOTATION = "nodescale.io/cluster"


# kube-apiserver's generateName keeps at most this much of the prefix (63 less the 5 random characters), so a
# NodePool named up to 253 characters still gets a NodeClaim name the API server takes.
MAX_GENERATED_PREFIX = 58


def claim_name(pool: str, suffix: str) -> str:
    """``<nodepool>-<suffix>``: Karpenter's generateName of a pool's NodeClaims (5 random characters), the
    prefix cut as kube-apiserver cuts it."""
    return f"{pool}-"[:MAX_GENERATED_PREFIX] + suffix


def go_duration(seconds: float) -> str:
    """A duration as Go prints it without zero units ("720h", "1h30m", "45s"): the CRD's pattern."""
    total = max(0, int(round(seconds)))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def _taints(taints: Iterable[Taint]) -> list[dict[str, str]]:
    out = []
    for t in taints:
        item = {"key": t.key, "effect": t.effect}
        if t.value:
            item["value"] = t.value
        out.append(item)
    return out


def _allowed_key(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    if key == wk.HOSTNAME:
        return False
    return not domain.endswith("karpenter.sh") or key in _ALLOWED_KARPENTER_KEYS


def claim_requirements(claim: NodeClaim, pool: NodePool, offered: Sequence[str]) -> Requirements:
    """The claim's requirements narrowed to the instance types offered to the Fleet call, its zones and
    capacity types, and its pool (Karpenter's NodeClaimTemplate adds the pool as a requirement)."""
    reqs = claim.requirements
    pins = [Requirement.exactly(wk.INSTANCE_TYPE, *offered), Requirement.exactly(pool.label_key, pool.real_name)]
    if claim.zones:
        pins.append(Requirement.exactly(wk.ZONE, *claim.zones))
    if claim.capacity_types:
        pins.append(Requirement.exactly(wk.CAPACITY_TYPE, *claim.capacity_types))
    for pin in pins:
        known = reqs.get(pin.key)
        reqs = reqs.with_requirement(pin if known is None else known.intersect(pin))
    return reqs


def _requirement_list(reqs: Requirements) -> list[dict[str, Any]]:
    return [r for r in reqs.to_list() if _allowed_key(r["key"])][:MAX_REQUIREMENTS]


def _requests(claim: NodeClaim) -> dict[str, str]:
    requests = dict(claim.requests)
    requests.setdefault(res.PODS, len(claim.pods))
    return res.format_resources({k: v for k, v in requests.items() if v})


def nodeclaim_object(
    claim: NodeClaim, pool: NodePool, offered: Sequence[str], *, name: str, owner_uid: str = "", cluster: str = "",
) -> dict[str, Any]:
    """The NodeClaim created before the launch: labels, annotations, spec and the termination finalizer;
    owned by its NodePool when the pool is a cluster object (``owner_uid``); marked as this ``cluster``'s."""
    labels = {**pool.labels, **{k: v for k, v in claim.labels.items() if isinstance(v, str)},
              pool.label_key: pool.real_name, wk.NODECLASS: pool.node_class}
    metadata: dict[str, Any] = {"name": name, "labels": labels, "finalizers": [wk.TERMINATION_FINALIZER]}
    # The template digest records what the claim was launched from: drift compares the pool with it (#31.5).
    annotations = {**pool.annotations, **hash_annotations(pool), **({OWNER_ANNOTATION: cluster} if cluster else {})}
    if annotations:
        metadata["annotations"] = annotations
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": "NodePool", "name": pool.real_name,
                                        "uid": owner_uid, "blockOwnerDeletion": True}]
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": pool.node_class_kind, "name": pool.node_class},
        "requirements": _requirement_list(claim_requirements(claim, pool, offered)),
        "resources": {"requests": _requests(claim)},
    }
    if claim.taints:
        spec["taints"] = _taints(claim.taints)
    if claim.startup_taints:
        spec["startupTaints"] = _taints(claim.startup_taints)
    expire = pool.disruption.expire_after_seconds
    spec["expireAfter"] = "Never" if expire is None else go_duration(expire)
    grace = pool.disruption.termination_grace_period_seconds
    if grace is not None:
        spec["terminationGracePeriod"] = go_duration(grace)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def launched_labels(it: InstanceType, zone: str, capacity_type: str) -> dict[str, str]:
    """What the launched instance tells about the node: its type's labels, zone and capacity type."""
    labels = {k: v for k, v in it.requirements.labels().items() if k not in (wk.ZONE, wk.CAPACITY_TYPE)}
    labels.update({wk.INSTANCE_TYPE: it.name, wk.ZONE: zone, wk.CAPACITY_TYPE: capacity_type})
    return labels


def provider_id(zone: str, instance_id: str) -> str:
    """The providerID of an EC2 instance's node (the AWS cloud provider's form)."""
    return f"aws:///{zone}/{instance_id}"


def condition(type_: str, status: str, reason: str, message: str, now: str, generation: int) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now, "observedGeneration": generation}


def set_condition(
    conditions: Sequence[Mapping[str, Any]], type_: str, status: str, *, now: str, generation: int,
    reason: str = "", message: str = "",
) -> list[dict[str, Any]]:
    """``conditions`` with ``type_`` set; its lastTransitionTime moves only when its status changes. A True
    condition's reason is its type, an Unknown one's Karpenter's AwaitingReconciliation."""
    if not reason:
        reason, message = (type_, message) if status == TRUE else (AWAITING if status == UNKNOWN else (type_, message))
    out = [dict(c) for c in conditions if c.get("type") != type_]
    old = next((c for c in conditions if c.get("type") == type_), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else now
    out.append(condition(type_, status, reason, message, since or now, generation))
    return out


def with_ready(conditions: Sequence[Mapping[str, Any]], *, now: str, generation: int) -> list[dict[str, Any]]:
    """``conditions`` with the root Ready condition: True when every dependent is, False when one is False."""
    status = {c.get("type"): c.get("status") for c in conditions}
    found = [status.get(t, UNKNOWN) for t in DEPENDENTS]
    if all(s == TRUE for s in found):
        return set_condition(conditions, READY, TRUE, now=now, generation=generation)
    if FALSE in found:
        failing = ", ".join(t for t, s in zip(DEPENDENTS, found, strict=True) if s == FALSE)
        return set_condition(conditions, READY, FALSE, now=now, generation=generation,
                             reason="UnhealthyDependents", message=f"{failing} is not True")
    return set_condition(conditions, READY, UNKNOWN, now=now, generation=generation)


def launched_status(
    it: InstanceType, zone: str, instance_id: str, image_id: str, *, now: str, generation: int,
) -> dict[str, Any]:
    """The status after the Fleet call: providerID, imageID, capacity, allocatable; Launched=True and the
    conditions still to come Unknown."""
    conditions: list[dict[str, Any]] = []
    for type_ in DEPENDENTS:
        conditions = set_condition(conditions, type_, TRUE if type_ == LAUNCHED else UNKNOWN,
                                   now=now, generation=generation)
    status: dict[str, Any] = {
        "providerID": provider_id(zone, instance_id),
        "capacity": res.format_resources(it.capacity),
        "allocatable": res.format_resources(it.allocatable),
        "conditions": with_ready(conditions, now=now, generation=generation),
    }
    if image_id:
        status["imageID"] = image_id
    return status


# ---------------------------------------------------------------------------------- registration TTL (#30.1)


def created_by(claim: Mapping[str, Any], cluster: str) -> bool:
    """The NodeClaim is one nodescale created for ``cluster`` (its annotation), so nodescale may delete it."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return bool(cluster) and annotations.get(OWNER_ANNOTATION) == cluster


def registered(claim: Mapping[str, Any]) -> bool:
    """Its node has joined: status.nodeName written, or Registered=True."""
    status = claim.get("status") or {}
    conditions = status.get("conditions") or []
    return bool(status.get("nodeName")) or any(
        c.get("type") == REGISTERED and c.get("status") == TRUE for c in conditions if isinstance(c, Mapping))


def registration_since(claim: Mapping[str, Any]) -> datetime | None:
    """When the wait for registration began: its Registered condition's last transition (written at the launch),
    else its creation (a NodeClaim never launched). None when neither is readable."""
    for c in (claim.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == REGISTERED:
            since = parse_timestamp(c.get("lastTransitionTime"))
            if since is not None:
                return since
    return parse_timestamp((claim.get("metadata") or {}).get("creationTimestamp"))


def instance_of(claim: Mapping[str, Any]) -> str:
    """The EC2 instance its providerID names ("" before the launch)."""
    parsed = parse_provider_id(str((claim.get("status") or {}).get("providerID") or ""))
    return parsed[1] if parsed else ""


def registration_expired(
    claim: Mapping[str, Any], cluster: str, *, now: datetime, ttl_seconds: float, stale: Collection[str] = (),
) -> bool:
    """Karpenter's liveness: a NodeClaim of ours whose node has not registered within the TTL since launch (or,
    never launched, since creation) is to be deleted; so is one whose instance is in ``stale`` (the instances
    the same TTL, read from EC2's launch time, is terminating). One being deleted is the finalizer's business."""
    if not created_by(claim, cluster) or registered(claim):
        return False
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if instance_of(claim) in stale:
        return True
    since = registration_since(claim)
    return since is not None and (now - since).total_seconds() > ttl_seconds
