"""A Kubernetes Node as the use-cases read it: name, identity, labels, taints, readiness and the EC2 instance
behind it, parsed once per snapshot instead of dug out of the raw object at every use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .nodelabels import pool_key
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
        )
