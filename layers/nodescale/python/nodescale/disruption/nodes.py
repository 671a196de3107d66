"""Nodes as the disruption logic sees them: a Node, its pods, and its EC2 instance in one view."""

from __future__ import annotations

import hashlib
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..model import labels as wk
from ..model.node import ClusterNode
from ..model.nodelabels import pool_key
from ..model.pod import Pod
from ..model.timestamps import parse_timestamp

DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
# Set by nodescale the first time it sees a node empty; emptiness TTLs count from it.
EMPTY_SINCE = "nodescale.io/empty-since"
# "<RFC 3339 time> <digest of the node's pods>": when the set of pods on the node last changed, as far as
# nodescale has seen; consolidateAfter counts from it (Karpenter's NodeClaim lastPodEventTime).
PODS_CHANGED = "nodescale.io/pods-changed"


@dataclass(slots=True)
class NodeView:
    name: str
    nodepool: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    created: datetime | None
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[dict]
    ready: bool
    ready_since: datetime | None  # when the Ready condition last changed
    unschedulable: bool
    pods: list[Pod] = field(default_factory=list)  # pods that count: not DaemonSet, mirror or finished
    daemon_pods: list[Pod] = field(default_factory=list)
    # CapacityBuffer pods whose room this node keeps (placed there by plan, never bound): a node holding
    # them is not empty, and consolidating it must find them room elsewhere.
    buffer_pods: list[Pod] = field(default_factory=list)
    allocatable: dict[str, int] = field(default_factory=dict)
    price: float = 0.0
    # status.conditions: type -> (status, lastTransitionTime); repair matches them to its policies.
    conditions: dict[str, tuple[str, datetime | None]] = field(default_factory=dict)

    @property
    def disrupting(self) -> bool:
        return any(t.get("key") == DISRUPTED_TAINT_KEY for t in self.taints)

    @property
    def empty(self) -> bool:
        return not self.pods and not self.buffer_pods

    @property
    def empty_since(self) -> datetime | None:
        return parse_timestamp(self.annotations.get(EMPTY_SINCE))

    @property
    def pods_digest(self) -> str:
        """A short fingerprint of the pods that count on the node: it changes when one is added or removed."""
        keys = sorted(p.uid or p.key for p in self.pods)
        return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]

    @property
    def pods_changed(self) -> tuple[datetime, str] | None:
        """(when, digest) as last recorded in the ``PODS_CHANGED`` annotation, or None."""
        when, _, digest = (self.annotations.get(PODS_CHANGED) or "").partition(" ")
        moment = parse_timestamp(when) if when else None
        return (moment, digest) if moment is not None and digest else None

    @classmethod
    def from_node(cls, node: ClusterNode, pods: list[Pod], price: float = 0.0, keys: Container[str] = ()) -> NodeView:
        """The view of a typed Node of the snapshot with its pods; its instance is the providerID's."""
        labels = dict(node.labels)
        counted = [p for p in pods if not (p.is_daemon or p.is_mirror or p.finished)]
        daemons = [p for p in pods if p.is_daemon]
        return cls(
            name=node.name,
            nodepool=pool_key(labels, keys),
            instance_id=node.instance_id or "",
            instance_type=labels.get(wk.INSTANCE_TYPE) or labels.get("beta.kubernetes.io/instance-type") or "",
            zone=labels.get(wk.ZONE) or "",
            capacity_type=labels.get(wk.CAPACITY_TYPE) or "",
            created=node.created,
            labels=labels,
            annotations=dict(node.annotations),
            taints=[dict(t) for t in node.taints],
            ready=node.readiness.ready,
            ready_since=node.readiness.since,
            unschedulable=node.unschedulable,
            pods=counted,
            daemon_pods=daemons,
            allocatable=dict(node.resources.allocatable),
            price=price,
            conditions=conditions_of(node.raw),
        )


def conditions_of(raw: Mapping[str, Any]) -> dict[str, tuple[str, datetime | None]]:
    """A Node's conditions by type (the last of a type wins; entries that are not mappings are skipped)."""
    found: dict[str, tuple[str, datetime | None]] = {}
    for cond in (raw.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and isinstance(kind := cond.get("type"), str):
            found[kind] = (str(cond.get("status") or "Unknown"), parse_timestamp(cond.get("lastTransitionTime")))
    return found
