"""Node by node, what a drain did, as the API server saw it: the record behind the spot interruption figure (#33.2).

For each node it is told to watch (the Node of a warned spot instance, ``sim/nodes/spot.py``), on the
simulated clock (``Clock.elapsed()`` seconds):

- when the Node first carried both the ``karpenter.sh/disrupted:NoSchedule`` taint and ``spec.unschedulable``;
- each eviction request for a pod bound to it, with the answer the API server gave (201, 429, ...);
- when each of its pods was gone: marked for deletion or removed, whichever came first.

Written from the store's own writes and the eviction subresource, never from a client's logs. Store
listeners run under the store lock, so recording is a dictionary update and nothing more.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .objects import meta
from .store import Store

DISRUPTED_TAINT = ("karpenter.sh/disrupted", "NoSchedule")


@dataclass
class NodeDrain:
    """One watched node's record."""

    node: str
    cordoned_at: float | None = None
    evictions: list[tuple[float, str, int]] = field(default_factory=list)  # (when, namespace/name, HTTP status)
    gone: dict[str, float] = field(default_factory=dict)  # namespace/name -> when the pod was gone

    @property
    def first_eviction_at(self) -> float | None:
        return min((when for when, _, _ in self.evictions), default=None)


def _cordoned(node: dict[str, Any] | None) -> bool:
    if not node:
        return False
    spec = node.get("spec") or {}
    taints = {(t.get("key"), t.get("effect")) for t in spec.get("taints") or []}
    return bool(spec.get("unschedulable")) and DISRUPTED_TAINT in taints


def pod_key(pod: dict[str, Any]) -> str:
    return f"{meta(pod).get('namespace', '')}/{meta(pod).get('name', '')}"


class DrainAudit:
    """Records the drains of the nodes given to :meth:`watch`; :meth:`drain_of` reads one."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeDrain] = {}
        self._unsubscribe = store.subscribe(self._on_write)

    def close(self) -> None:
        self._unsubscribe()

    def watch(self, node: str) -> None:
        """Start recording ``node`` (a Node already cordoned counts from now)."""
        with self._lock:
            if node in self._nodes:
                return
            record = self._nodes[node] = NodeDrain(node)
        if _cordoned(self.store.peek("v1/nodes", node)):
            record.cordoned_at = self.store.clock.elapsed()

    def drain_of(self, node: str) -> NodeDrain | None:
        with self._lock:
            record = self._nodes.get(node)
            if record is None:
                return None
            return NodeDrain(record.node, record.cordoned_at, list(record.evictions), dict(record.gone))

    def eviction(self, node: str | None, namespace: str, name: str, status: int, when: float) -> None:
        """An eviction request for a pod bound to ``node``, made at ``when``, and the status it was answered with."""
        if not node:
            return
        with self._lock:
            record = self._nodes.get(node)
            if record is not None:
                record.evictions.append((when, f"{namespace}/{name}", status))

    def _on_write(self, event_type: str, key: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if key not in ("v1/nodes", "v1/pods"):
            return
        with self._lock:  # the store's lock is held already: the order is always store, then this one
            if key == "v1/nodes":
                self._node_written(event_type, obj)
            else:
                self._pod_written(event_type, obj, old)

    def _node_written(self, event_type: str, obj: dict[str, Any]) -> None:
        record = self._nodes.get(meta(obj).get("name", ""))
        if record is not None and record.cordoned_at is None and event_type != "DELETED" and _cordoned(obj):
            record.cordoned_at = self.store.clock.elapsed()

    def _pod_written(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        node = (obj.get("spec") or {}).get("nodeName") or ((old or {}).get("spec") or {}).get("nodeName")
        record = self._nodes.get(node or "")
        if record is None:
            return
        key = pod_key(obj)
        if key in record.gone:
            return
        if event_type == "DELETED" or meta(obj).get("deletionTimestamp"):
            record.gone[key] = self.store.clock.elapsed()
