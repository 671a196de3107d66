"""NodePool and EC2NodeClass status (#30.2), written from the provisioner's pass for the pools kept in the
cluster: a NodePool's resources, node count and conditions; an EC2NodeClass's resolved subnets, security
groups, AMIs and instance profile with their conditions. One status PATCH per object whose status changed.

The facts come from the pass's snapshot (nodes, in-flight instances, configuration errors) and the launcher's
per-invocation lookups (the same subnets, security groups, images and profile a launch uses).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ...aws import ami as amis
from ...aws import instanceprofiles, securitygroups
from ...config.errors import ConfigError
from ...k8s import pool_status as k8s_status
from ...model.instancetype import windows_build
from ...model.nodepool import NodeClass
from ...scheduling import nodeclaim_manifest as ncm
from ...scheduling import pool_status as ps
from ..world import World
from .nodeclaims import now_text

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)

_RESOLVE_ERRORS = (BotoCoreError, ClientError, ValueError)


def write_status(rt: Runtime, world: World) -> int:
    """Write the changed status of every v1 NodePool and EC2NodeClass in the cluster; returns how many were
    written. A failed write is logged and the others go on: status never holds capacity back."""
    if "cluster" not in rt.settings.nodepool_sources:
        return 0
    now = now_text()
    written = 0
    ready: dict[str, tuple[str, str]] = {}
    for obj in k8s_status.list_v1(rt.api, k8s_status.EC2NODECLASSES):
        name = _name(obj)
        status = _nodeclass_status(rt, world, obj, now)
        ready[name] = ps.ready_of(status)
        written += _write(rt, k8s_status.EC2NODECLASSES, obj, status)
    capacities = _capacities(world)
    for obj in k8s_status.list_v1(rt.api, k8s_status.NODEPOOLS):
        name = _name(obj)
        ref = str((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef", {})
                  .get("name") or "")
        nodeclass = ready.get(ref, (ncm.FALSE, f"EC2NodeClass {ref!r} not found"))
        status = ps.nodepool_status(
            capacities.get(name, []), validation_error=_pool_error(world, name),
            nodeclass_ready=nodeclass, old=obj.get("status") or {}, now=now, generation=_generation(obj))
        written += _write(rt, k8s_status.NODEPOOLS, obj, status)
    return written


def _write(rt: Runtime, collection: str, obj: Mapping[str, Any], status: Mapping[str, Any]) -> int:
    if status == (obj.get("status") or {}):
        return 0
    try:
        k8s_status.patch_status(rt.api, collection, _name(obj), status)
    except ApiException as exc:
        log.warning("could not write the status of %s: %s", _name(obj), exc.reason,
                    extra={"collection": collection})
        return 0
    return 1


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 1)


def _capacities(world: World) -> dict[str, list[dict[str, int]]]:
    """Each pool's nodes' capacity by the pool object's name."""
    out: dict[str, list[dict[str, int]]] = {}
    for key, capacities in _capacities_by_key(world).items():
        out.setdefault(world.nodepools[key].real_name, []).extend(capacities)
    return out


def _capacities_by_key(world: World) -> dict[str, list[dict[str, int]]]:
    """Each pool's nodes' capacity, registered or in flight (Karpenter's counter counts both), by the key the
    world knows the pool by (a Provisioner may share its name with a NodePool)."""
    out: dict[str, list[dict[str, int]]] = {}
    for node in world.existing_nodes():
        if (node.nodepool or "") in world.nodepools:
            out.setdefault(node.nodepool, []).append(dict(node.capacity or node.allocatable))
    return out


def pool_statuses(rt: Runtime, world: World, now: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The status Karpenter would write on every NodePool and node class nodescale plans with, whatever its
    source (an SSM parameter or the cluster), for `nodescale status`: (pools, node classes), each entry its
    kind, name, source and status. A pool refused for its node class is listed by its source with
    NodeClassReady False and the reason. Nothing is written; conditions carry ``now`` as their transition
    time, since an SSM pool has no object to keep one on."""
    classes, ready = [], {}
    for key in sorted(world.nodeclasses):
        nc = world.nodeclasses[key]
        status = ps.nodeclass_status(**resolve_parts(rt, nc), validation_error="", old={}, now=now, generation=1)
        ready[key] = ps.ready_of(status)
        classes.append(_entry(nc.kind, nc.real_name, nc.source, status))
    capacities = _capacities_by_key(world)
    pools = []
    for key in sorted(world.nodepools):
        pool = world.nodepools[key]
        nodeclass = ready.get(pool.node_class, (ncm.FALSE, f"{pool.node_class_kind} {pool.node_class!r} not found"))
        status = ps.nodepool_status(capacities.get(key, []), validation_error="", nodeclass_ready=nodeclass, old={},
                                    now=now, generation=1)
        pools.append(_entry(pool.kind, pool.real_name, pool.source, status))
    return pools + _refused_for_nodeclass(world, now), classes


def _refused_for_nodeclass(world: World, now: str) -> list[dict[str, Any]]:
    """Pools the configuration refused because of their node class (missing, invalid or ambiguous): the
    error is on the pool's reference to it, so the pool is named by its source (and by its name when it is a
    cluster object)."""
    out = []
    for error in world.config_errors:
        if not isinstance(error, ConfigError) or error.path not in _REF_PATHS:
            continue
        kind = "Provisioner" if error.path == "spec.providerRef.name" else "NodePool"
        prefix = f"cluster:{kind}/"
        name = error.source[len(prefix):].split("#")[0] if error.source.startswith(prefix) else ""
        status = ps.nodepool_status([], validation_error="", nodeclass_ready=(ncm.FALSE, error.message), old={},
                                    now=now, generation=1)
        out.append(_entry(kind, name, error.source, status))
    return out


_REF_PATHS = ("spec.template.spec.nodeClassRef.name", "spec.providerRef.name")


def _entry(kind: str, name: str, source: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "name": name, "source": source, "status": status}


def _errors_of(world: World, kind: str, name: str) -> list[str]:
    """The configuration errors about the cluster object ``kind/name`` (by their source)."""
    prefix = f"cluster:{kind}/{name}"
    out = []
    for error in world.config_errors:
        text = str(error)
        source = error.source if isinstance(error, ConfigError) else text
        if source.startswith(prefix) and source[len(prefix):len(prefix) + 1] in ("", "#", ":", " "):
            out.append(text)
    return out


def _pool_error(world: World, name: str) -> str:
    """Why nodescale refused the NodePool ("" when it plans with it)."""
    if any(p.real_name == name and p.kind == "NodePool" and p.source.startswith("cluster:")
           for p in world.nodepools.values()):
        return ""
    return "; ".join(_errors_of(world, "NodePool", name)) or "nodescale refused this NodePool (see its events)"


def _nodeclass_status(rt: Runtime, world: World, obj: Mapping[str, Any], now: str) -> dict[str, Any]:
    name = _name(obj)
    nc = next((c for c in world.nodeclasses.values()
               if c.real_name == name and c.kind == "EC2NodeClass" and c.source.startswith("cluster:")), None)
    if nc is None:
        error = "; ".join(_errors_of(world, "EC2NodeClass", name)) or "nodescale refused this EC2NodeClass"
        unresolved = ps.Part(error="not resolved: the EC2NodeClass is not valid")
        parts = dict.fromkeys(("subnets", "security_groups", "amis", "instance_profile"), unresolved)
    else:
        error, parts = "", resolve_parts(rt, nc)
    return ps.nodeclass_status(**parts, validation_error=error, old=obj.get("status") or {}, now=now,
                               generation=_generation(obj))


def resolve_parts(rt: Runtime, nc: NodeClass) -> dict[str, ps.Part]:
    """The node class's subnets, security groups, images and profile as a launch resolves them (the
    launcher's lookups, kept for the invocation); a part that fails carries its error."""
    try:
        found = rt.launcher.resources(nc)
        return {"subnets": _subnets(found.subnets), "security_groups": _groups(found.security_groups),
                "amis": _amis(found.amis.amis), "instance_profile": ps.Part(found.instance_profile)}
    except _RESOLVE_ERRORS:
        pass  # one part failed: each is resolved alone below, so each condition says which
    where = nc.source or f"node class {nc.name}"
    parts: dict[str, ps.Part] = {}
    try:
        parts["subnets"] = _subnets(rt.launcher.subnets(nc))
    except _RESOLVE_ERRORS as exc:
        parts["subnets"] = ps.Part(error=str(exc))
    try:
        parts["security_groups"] = _groups(securitygroups.discover(
            rt.aws.ec2, nc.security_group_selector_terms, f"{where}: securityGroupSelectorTerms"))
    except _RESOLVE_ERRORS as exc:
        parts["security_groups"] = ps.Part(error=str(exc))
    resolved = None
    try:
        resolved = amis.resolve(nc, rt.aws.ssm, rt.aws.ec2, rt.launcher.cluster.version)
        parts["amis"] = _amis(resolved.amis)
    except _RESOLVE_ERRORS as exc:
        parts["amis"] = ps.Part(error=str(exc))
    try:
        parts["instance_profile"] = ps.Part(instanceprofiles.resolve(
            rt.aws.iam, nc, rt.launcher.default_instance_profile, rt.launcher.windows_instance_profile,
            windows=resolved is not None and windows_build(resolved.family) is not None))
    except _RESOLVE_ERRORS as exc:
        parts["instance_profile"] = ps.Part(error=str(exc))
    return parts


def _subnets(found: Iterable[Any]) -> ps.Part:
    return ps.Part(ps.subnet_entries((s.id, s.zone, s.zone_id) for s in found))


def _groups(found: Iterable[Any]) -> ps.Part:
    return ps.Part(ps.security_group_entries((g.id, g.name) for g in found))


def _amis(found: Iterable[amis.Ami]) -> ps.Part:
    return ps.Part(ps.ami_entries((a.image_id, a.name, a.requirements) for a in found))
