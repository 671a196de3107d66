"""A Kubernetes Node as the use-cases read it: name, identity, labels, taints, readiness and the EC2 instance
behind it, parsed once per snapshot instead of dug out of the raw object at every use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .nodelabels import pool_key
from .quantity import QuantityError
from .resources import Resources, parse_resource_list
from .taints import Taint, TaintError
from .timestamps import parse_timestamp


def parse_provider_id(provider_id: str) -> tuple[str, str] | None:
    """`aws:///<zone>/<instance-id>` -> (zone, instance id); None for anything that is not an EC2 node."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    parts = [p for p in provider_id[len("aws://") :].split("/") if p]
    if not parts or not parts[-1].startswith("i-"):
        return None
    zone = parts[-2] if len(parts) >= 2 else ""
    return zone, parts[-1]


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    status: str  # "True" | "False" | "Unknown" (no Ready condition reported yet counts as Unknown)
    since: datetime | None  # lastTransitionTime of the Ready condition
    reason: str = ""


def readiness_of(raw: Mapping[str, Any]) -> Readiness:
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            status = cond.get("status") or "Unknown"
            return Readiness(status == "True", status, parse_timestamp(cond.get("lastTransitionTime")),
                             cond.get("reason") or "")
    return Readiness(False, "Unknown", None)


@dataclass(frozen=True, slots=True)
class NodeResources:
    """What the bin-packer reads of a Node, parsed once: capacity, allocatable and taints. ``error`` says why
    they cannot be read ("<field>: <what is wrong>"); such a Node is left out of planning."""

    capacity: Resources
    allocatable: Resources
    taints: tuple[Taint, ...]
    error: str = ""


def _mapping_at(value: object, path: str) -> tuple[Mapping[str, Any], str]:
    if value is None:
        return {}, ""
    if not isinstance(value, Mapping):
        return {}, f"{path}: expected a mapping, got {type(value).__name__}"
    return value, ""


def resources_of(raw: Mapping[str, Any]) -> NodeResources:
    """The Node's capacity, allocatable and taints; the first unreadable field named in ``error``."""
    empty = NodeResources({}, {}, ())
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    if not meta.get("name") or not isinstance(meta.get("name"), str):
        return replace(empty, error="metadata.name: a node needs a name")
    try:
        capacity_raw, why = _mapping_at(status.get("capacity"), "status.capacity")
        if why:
            return replace(empty, error=why)
        capacity = parse_resource_list(capacity_raw, "status.capacity")
        allocatable_raw, why = _mapping_at(status.get("allocatable"), "status.allocatable")
        if why:
            return replace(empty, error=why)
        allocatable = parse_resource_list(allocatable_raw, "status.allocatable")
        taints = tuple(Taint.from_dict(t, f"spec.taints[{i}]") for i, t in enumerate(spec.get("taints") or []))
    except (QuantityError, TaintError) as exc:
        return replace(empty, error=str(exc))
    return NodeResources(capacity, allocatable, taints)


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """One Node of the world snapshot; ``raw`` is the object as listed, for the few fields not lifted here."""

    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    unschedulable: bool
    readiness: Readiness
    created: datetime | None
    instance_id: str | None
    zone: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    deleting: bool = False  # metadata.deletionTimestamp is set: the Node is going away
    resources: NodeResources = NodeResources({}, {}, ())  # capacity, allocatable, typed taints (parsed once)
    finalizers: tuple[str, ...] = ()  # metadata.finalizers (the strings of a list; anything else is none)

    @property
    def nodepool(self) -> str:
        """The NodePool (or v1alpha5 Provisioner) the node's labels name; "" for nodes of no pool."""
        return pool_key(self.labels)

    @property
    def ready(self) -> bool:
        return self.readiness.ready

    def has_taint(self, key: str, effect: str | None = None) -> bool:
        return any(t.get("key") == key and (effect is None or t.get("effect") == effect) for t in self.taints)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusterNode:
        meta = raw.get("metadata") or {}
        spec = raw.get("spec") or {}
        parsed = parse_provider_id(spec.get("providerID") or "")
        return cls(
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            taints=tuple(spec.get("taints") or ()),
            unschedulable=bool(spec.get("unschedulable")),
            readiness=readiness_of(raw),
            created=parse_timestamp(meta.get("creationTimestamp")),
            instance_id=parsed[1] if parsed else None,
            zone=parsed[0] if parsed else None,
            raw=raw,
            deleting=bool(meta.get("deletionTimestamp")),
            resources=resources_of(raw),
            finalizers=finalizers_of(meta),
        )


def finalizers_of(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """metadata.finalizers as names. Only a list counts: a hostile string would otherwise be searched for
    substrings (``"karpenter.sh/termination" in "xkarpenter.sh/termination"``); entries not strings are dropped."""
    value = meta.get("finalizers")
    if not isinstance(value, list):
        return ()
    return tuple(f for f in value if isinstance(f, str))


def name_matches_instance(node_name: str, instance_id: str, private_dns_name: str) -> bool:
    """Whether a Node's name is one EKS gives the instance's node: its PrivateDnsName (kubelet's hostname,
    ``ip-10-0-0-1.ec2.internal``, or ``i-0abc.ec2.internal`` under resource-based hostnames), the instance id
    (EKS Auto Mode), or the instance id in the PrivateDnsName's domain (a resource-name subnet while EC2
    still reports the IP-based name)."""
    name, iid, dns = node_name.lower(), instance_id.lower(), private_dns_name.lower()
    if not name or not iid:
        return False
    if name == iid or (dns and name == dns):
        return True
    domain = dns.partition(".")[2]
    return bool(domain) and name == f"{iid}.{domain}"


@dataclass(frozen=True)
class NodeTrust:
    """Which Node speaks for each instance: ``trusted`` (instance id -> its one Node) and ``untrusted`` (Node
    name -> why it is ignored: another Node, or a name that is not the instance's, claims that instance)."""

    trusted: dict[str, ClusterNode]
    untrusted: dict[str, str]


def trust_nodes(nodes: Iterable[ClusterNode], dns_names: Mapping[str, str]) -> NodeTrust:
    """Match Nodes to the known instances (``dns_names``: instance id -> PrivateDnsName) by ``providerID``.

    Anyone who may write Nodes can name any instance in a providerID (#27.5): a Node is trusted for an
    instance only when its name is the instance's and no other Node with such a name claims it. The
    others naming that instance are untrusted; Nodes naming instances not in ``dns_names`` are neither.
    """
    claims: dict[str, list[ClusterNode]] = {}
    for view in nodes:
        if view.instance_id is not None and view.instance_id in dns_names:
            claims.setdefault(view.instance_id, []).append(view)
    trusted: dict[str, ClusterNode] = {}
    untrusted: dict[str, str] = {}
    for iid, named in claims.items():
        matching = [v for v in named if name_matches_instance(v.name, iid, dns_names[iid])]
        if len(matching) == 1:
            trusted[iid] = matching[0]
        for view in named:
            name = view.name
            if iid in trusted and name == matching[0].name:
                continue
            if all(v.name != name for v in matching):
                why = f"its name is not instance {iid}'s ({dns_names[iid] or iid})"
            else:
                why = f"Node(s) {', '.join(sorted(v.name for v in matching if v.name != name))} with the instance's name too"
            untrusted[name] = f"spec.providerID names instance {iid}, but {why}: ignored for that instance"
    return NodeTrust(trusted, untrusted)
