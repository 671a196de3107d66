"""The status Karpenter writes on a NodePool and an EC2NodeClass, built from what nodescale knows (#30.2).

    nodepool_status(nodes, validation_error, nodeclass_ready, old, ...)   resources, nodes, conditions
    nodeclass_status(subnets, security_groups, amis, instance_profile, validation_error, old, ...)

Pure: the caller gives what it resolved, the object's current status, the time and its generation. The shapes
follow Karpenter's pkg/apis/v1/nodepool_status.go (resources counts the pool's nodes' capacity and the node
count under ``nodes``; Ready from ValidationSucceeded and NodeClassReady) and karpenter-provider-aws's
pkg/apis/v1/ec2nodeclass_status.go (resolved subnets, security groups, AMIs and instance profile, each with
its condition; Ready from all of them). A condition keeps its lastTransitionTime while its status holds, so a
status built twice from the same facts is equal and needs no write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import resources as res
from ..model.requirements import Requirements
from . import nodeclaim_manifest as ncm

READY = ncm.READY
VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODECLASS_READY = "NodeClassReady"
SUBNETS_READY = "SubnetsReady"
SECURITY_GROUPS_READY = "SecurityGroupsReady"
AMIS_READY = "AMIsReady"
INSTANCE_PROFILE_READY = "InstanceProfileReady"
NODES = "nodes"

NODEPOOL_DEPENDENTS = (VALIDATION_SUCCEEDED, NODECLASS_READY)
NODECLASS_DEPENDENTS = (SUBNETS_READY, SECURITY_GROUPS_READY, AMIS_READY, INSTANCE_PROFILE_READY,
                        VALIDATION_SUCCEEDED)


@dataclass(frozen=True)
class Part:
    """One resolved part of a node class: its status entries (or the profile's name), or why it failed."""

    value: Any = None
    error: str = ""


def subnet_entries(subnets: Iterable[tuple[str, str, str]]) -> list[dict[str, str]]:
    """``(id, zone, zone_id)`` as status.subnets, zoneID only when known, in id order."""
    out = []
    for subnet_id, zone, zone_id in sorted(set(subnets)):
        entry = {"id": subnet_id, "zone": zone}
        if zone_id:
            entry["zoneID"] = zone_id
        out.append(entry)
    return out


def security_group_entries(groups: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """``(id, name)`` as status.securityGroups, in id order."""
    return [{"id": gid, "name": name} if name else {"id": gid} for gid, name in sorted(set(groups))]


def ami_entries(amis: Iterable[tuple[str, str, Requirements]]) -> list[dict[str, Any]]:
    """``(id, name, requirements)`` as status.amis: each image with the instance requirements it serves."""
    out = []
    for image_id, name, reqs in sorted(amis, key=lambda a: (a[0], a[1])):
        entry: dict[str, Any] = {"id": image_id, "requirements": reqs.to_list()}
        if name:
            entry["name"] = name
        out.append(entry)
    return out


def nodepool_resources(capacities: Iterable[Mapping[str, int]]) -> dict[str, str]:
    """The summed capacity of a pool's nodes and their count (``nodes``), as Karpenter's counter reports it."""
    total: res.Resources = {}
    count = 0
    for capacity in capacities:
        total = res.add(total, capacity)
        count += 1
    out = res.format_resources({k: v for k, v in total.items() if k != NODES})
    out[NODES] = str(count)
    return out


def nodepool_status(
    capacities: Iterable[Mapping[str, int]], *, validation_error: str, nodeclass_ready: tuple[str, str],
    old: Mapping[str, Any], now: str, generation: int,
) -> dict[str, Any]:
    """A NodePool's status: ``nodeclass_ready`` is (status, message) of its node class's Ready condition."""
    conds = _conditions(old)
    conds = _set(conds, VALIDATION_SUCCEEDED, validation_error, now, generation, reason="ValidationFailed")
    status, message = nodeclass_ready
    if status == ncm.TRUE:
        conds = ncm.set_condition(conds, NODECLASS_READY, ncm.TRUE, now=now, generation=generation)
    else:
        reason = "NodeClassNotFound" if status == ncm.FALSE and "not found" in message else "NodeClassNotReady"
        conds = ncm.set_condition(conds, NODECLASS_READY, status, now=now, generation=generation,
                                  reason=reason if status == ncm.FALSE else "", message=message)
    out = dict(old)
    out["resources"] = nodepool_resources(capacities)
    out["conditions"] = _with_ready(conds, NODEPOOL_DEPENDENTS, now, generation)
    return out


def nodeclass_status(
    *, subnets: Part, security_groups: Part, amis: Part, instance_profile: Part, validation_error: str,
    old: Mapping[str, Any], now: str, generation: int,
) -> dict[str, Any]:
    """An EC2NodeClass's status: each resolved part in its field, each failure in its condition."""
    out = {k: v for k, v in old.items() if k not in ("subnets", "securityGroups", "amis", "instanceProfile")}
    conds = _conditions(old)
    parts = ((SUBNETS_READY, "subnets", subnets, "SubnetsNotFound"),
             (SECURITY_GROUPS_READY, "securityGroups", security_groups, "SecurityGroupsNotFound"),
             (AMIS_READY, "amis", amis, "AMINotFound"),
             (INSTANCE_PROFILE_READY, "instanceProfile", instance_profile, "InstanceProfileNotFound"))
    for type_, key, part, reason in parts:
        if part.error or not part.value:
            error = part.error or f"no {key} resolved"
            conds = _set(conds, type_, error, now, generation, reason=reason)
        else:
            out[key] = part.value
            conds = _set(conds, type_, "", now, generation)
    conds = _set(conds, VALIDATION_SUCCEEDED, validation_error, now, generation, reason="ValidationFailed")
    out["conditions"] = _with_ready(conds, NODECLASS_DEPENDENTS, now, generation)
    return out


def ready_of(status: Mapping[str, Any]) -> tuple[str, str]:
    """(status, message) of a status's Ready condition; Unknown when it has none."""
    for cond in status.get("conditions") or []:
        if cond.get("type") == READY:
            return str(cond.get("status", ncm.UNKNOWN)), str(cond.get("message", ""))
    return ncm.UNKNOWN, ""


def _conditions(old: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(c) for c in old.get("conditions") or [] if isinstance(c, Mapping)]


def _set(conds: Sequence[Mapping[str, Any]], type_: str, error: str, now: str, generation: int, *,
         reason: str = "") -> list[dict[str, Any]]:
    """True without an error; False with it as the message and ``reason``."""
    if not error:
        return ncm.set_condition(conds, type_, ncm.TRUE, now=now, generation=generation)
    return ncm.set_condition(conds, type_, ncm.FALSE, now=now, generation=generation, reason=reason, message=error)


def _with_ready(conds: Sequence[Mapping[str, Any]], dependents: Sequence[str], now: str,
                generation: int) -> list[dict[str, Any]]:
    """The root Ready: True when every dependent is, False naming those that are False, else Unknown."""
    found = {c.get("type"): c.get("status") for c in conds}
    failing = [t for t in dependents if found.get(t) == ncm.FALSE]
    if all(found.get(t) == ncm.TRUE for t in dependents):
        out = ncm.set_condition(conds, READY, ncm.TRUE, now=now, generation=generation)
    elif failing:
        out = ncm.set_condition(conds, READY, ncm.FALSE, now=now, generation=generation,
                                reason="UnhealthyDependents", message=f"{', '.join(failing)} is not True")
    else:
        out = ncm.set_condition(conds, READY, ncm.UNKNOWN, now=now, generation=generation)
    return sorted(out, key=lambda c: str(c.get("type")))
