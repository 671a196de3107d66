"""Watching for pods the provisioner should act on, delivered in batches, and for Nodes joining.

A batch opens when a pod becomes provisionable and closes after 1 s with no further new pod or
10 s after it opened, whichever comes first, so a burst of pods is planned together while a single
pod still waits only about a second. The one-pass provisioner waits for the first batch the same way
(:func:`settled_pending_pods`) before it plans.

Nodes joining (added, or still carrying ``karpenter.sh/unregistered``) are delivered as they come
(:class:`JoinedNodes`), at most ``JOIN_SECONDS`` after the event, so the provisioner registers them
within about a second, as Karpenter's registration controller does (#30.4), not at its next pass.
"""

from __future__ import annotations

import abc
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from ..model.taints import UNREGISTERED_TAINT
from .client import CONNECT_TIMEOUT_SECONDS
from .http import ApiClient
from .listing import (
    PENDING_FIELD_SELECTOR,
    ListResult,
    collection_path,
    is_provisionable,
    list_nodes,
    list_pods,
)
from .raw import WatchStream

QUIET_SECONDS = 1.0
MAX_BATCH_SECONDS = 10.0
# Server-side watch timeout; the watch is reopened from the last resourceVersion after it.
WATCH_SECONDS = 60
FATAL_STATUSES = frozenset({400, 401, 403, 404})
# How long joined Nodes gather before they are delivered: the kubelet's first writes come in a burst.
JOIN_SECONDS = 0.2
# How often a watch that can be stopped looks at its stop flag while nothing arrives.
STOP_CHECK_SECONDS = 0.5


@dataclass
class PendingBatch:
    new: list[dict[str, Any]]  # pods that became provisionable while this batch was open
    pending: list[dict[str, Any]]  # every provisionable pod known when it closed (new ones included)
    opened_at: float
    closed_at: float


def _uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"


@dataclass
class PendingBatcher:
    """The batching rule, apart from any I/O so it can be driven by a fake clock."""

    quiet: float = QUIET_SECONDS
    max_wait: float = MAX_BATCH_SECONDS
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    _new: dict[str, dict[str, Any]] = field(default_factory=dict)
    _opened: float | None = None
    _last_new: float = 0.0

    def observe(self, event_type: str, pod: dict[str, Any], now: float) -> None:
        uid = _uid(pod)
        if event_type != "DELETED" and is_provisionable(pod):
            if uid not in self.pending:
                self._new[uid] = pod
                self._last_new = now
                if self._opened is None:
                    self._opened = now
            elif uid in self._new:
                self._new[uid] = pod
            self.pending[uid] = pod
        else:
            self.pending.pop(uid, None)
            self._new.pop(uid, None)

    def replace_all(self, pods: Iterable[dict[str, Any]], now: float) -> None:
        """A fresh list: pods not in it are gone, pods not seen before are new."""
        fresh = {_uid(p): p for p in pods if is_provisionable(p)}
        for uid in list(self.pending):
            if uid not in fresh:
                self.observe("DELETED", self.pending[uid], now)
        for pod in fresh.values():
            self.observe("MODIFIED", pod, now)

    def due_at(self) -> float | None:
        """When the open batch closes, or None when no batch is open."""
        if self._opened is None:
            return None
        if not self._new:
            # Every new pod of the batch was placed or deleted meanwhile: nothing left to report.
            self._opened = None
            return None
        return min(self._last_new + self.quiet, self._opened + self.max_wait)

    def take(self, now: float) -> PendingBatch:
        batch = PendingBatch(list(self._new.values()), list(self.pending.values()), self._opened or now, now)
        self._new = {}
        self._opened = None
        return batch


@dataclass
class FirstBatch(PendingBatcher):
    """The batching rule for one batch only: once every pod of it was placed or deleted, it is due at
    once (nothing is left to wait for), not left open for pods that might come later."""

    def due_at(self) -> float | None:
        if self._opened is not None and not self._new:
            return self._opened
        return super().due_at()


@dataclass(frozen=True)
class JoinedNodes:
    """Nodes that joined (or still wait for registration) since the last delivery, by name."""

    names: tuple[str, ...]


def joining(event_type: str, node: Mapping[str, Any]) -> bool:
    """Whether a Node event is one registration acts on: a Node added, or one still carrying
    ``karpenter.sh/unregistered`` (its kubelet's later writes, until registration removes it)."""
    if event_type == "ADDED":
        return True
    if event_type != "MODIFIED":
        return False
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") == UNREGISTERED_TAINT.key for t in taints)


def _node_name(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


class WatchReader(threading.Thread, abc.ABC):
    """Keeps a watch open from a resourceVersion, relisting on 410 Gone, until stopped or the deadline.

    Puts ``(tag, kind, object)`` for each event and ``(list_tag, items)`` for each relist on ``out``."""

    tag = "event"
    list_tag = "list"

    def __init__(
        self,
        api: ApiClient,
        path: str,
        field_selector: str | None,
        resource_version: str,
        deadline: float,
        out: queue.Queue,
        clock: Callable[[], float],
        name: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.api = api
        self.path = path
        self.field_selector = field_selector
        self.resource_version = resource_version
        self.deadline = deadline
        self.out = out
        self.clock = clock
        self.stop = threading.Event()
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()

    def halt(self) -> None:
        self.stop.set()
        with self._lock:
            if self._stream is not None:
                self._stream.close()

    def run(self) -> None:
        failures = 0
        while not self.stop.is_set() and self.clock() < self.deadline:
            try:
                if not self.resource_version:
                    listed = self.relist()
                    self.resource_version = listed.resource_version
                    self.out.put((self.list_tag, listed.items))
                self._watch_once()
                failures = 0
            except ApiException as exc:
                if exc.status == 410:
                    self.resource_version = ""
                    continue
                if exc.status in FATAL_STATUSES:
                    self.out.put(("error", exc))
                    return
                failures += 1
            except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
                # halt() closes the stream under a blocked read; urllib3 then fails in several ways.
                if self.stop.is_set():
                    return
                failures += 1
                if failures > 20:
                    self.out.put(("error", exc))
                    return
            if failures:
                self.stop.wait(min(5.0, 0.2 * 2 ** min(failures, 5)) * random.uniform(0.5, 1.0))

    @abc.abstractmethod
    def relist(self) -> ListResult:
        """The full list a watch starts from (and restarts from after 410 Gone): what each watch lists."""

    def _watch_once(self) -> None:
        remaining = self.deadline - self.clock()
        seconds = max(1, min(WATCH_SECONDS, int(remaining) + 1))
        query: dict[str, Any] = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": seconds,
        }
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        stream = WatchStream(self.api, self.path, query, timeout=(CONNECT_TIMEOUT_SECONDS, seconds + 10))
        with self._lock:
            self._stream = stream
        if self.stop.is_set():
            stream.close()
            return
        for event in stream.events():
            if self.stop.is_set():
                return
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                raise ApiException(status=int(obj.get("code") or 500), reason=obj.get("message") or "watch error")
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self.resource_version = version
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.out.put((self.tag, kind, obj))


class PendingWatchReader(WatchReader):
    """The watch of provisionable pods (``namespace`` None: every namespace)."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str | None,
        resource_version: str,
        deadline: float,
        out: queue.Queue,
        clock: Callable[[], float],
    ) -> None:
        path = collection_path("", "v1", "pods", namespace)
        super().__init__(api, path, PENDING_FIELD_SELECTOR, resource_version, deadline, out, clock,
                         "nodescale-pending-watch")
        self.namespace = namespace

    def relist(self) -> ListResult:
        return list_pods(self.api, self.namespace, field_selector=PENDING_FIELD_SELECTOR)


class NodeWatchReader(WatchReader):
    """The watch of Nodes, for registration."""

    tag = "node"
    list_tag = "nodes"

    def __init__(
        self, api: ApiClient, resource_version: str, deadline: float, out: queue.Queue, clock: Callable[[], float]
    ) -> None:
        super().__init__(api, collection_path("", "v1", "nodes"), None, resource_version, deadline, out, clock,
                         "nodescale-node-watch")

    def relist(self) -> ListResult:
        return list_nodes(self.api)


@dataclass
class NodeJoins:
    """Nodes to register, gathered for ``JOIN_SECONDS`` from the first one (apart from I/O, like the batcher)."""

    gather: float = JOIN_SECONDS
    names: dict[str, None] = field(default_factory=dict)
    opened: float | None = None

    def observe(self, event_type: str, node: Mapping[str, Any], now: float) -> None:
        name = _node_name(node)
        if event_type == "DELETED":
            self.names.pop(name, None)
            if not self.names:
                self.opened = None  # nothing left to deliver
        elif name and joining(event_type, node):
            self.names[name] = None
            self.opened = now if self.opened is None else self.opened

    def listed(self, nodes: Iterable[Mapping[str, Any]], now: float) -> None:
        """A (re)list: the Nodes in it still waiting for registration join (an ADDED missed meanwhile)."""
        for node in nodes:
            self.observe("MODIFIED", node, now)

    def due_at(self) -> float | None:
        return None if self.opened is None else self.opened + self.gather

    def take(self) -> JoinedNodes:
        joined = JoinedNodes(tuple(self.names))
        self.names, self.opened = {}, None
        return joined


def watch_pending_pods(
    api: ApiClient,
    deadline: float,
    *,
    namespace: str | None = None,
    quiet: float = QUIET_SECONDS,
    max_wait: float = MAX_BATCH_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    nodes: bool = False,
) -> Iterator[PendingBatch | JoinedNodes]:
    """Batches of provisionable pods until `deadline` (a `clock()` time, monotonic by default); with
    ``nodes``, the Nodes joining too, as :class:`JoinedNodes` between the batches.

    Pods already pending when the watch starts form the first batch (and Nodes still carrying
    ``karpenter.sh/unregistered`` the first joins). A batch still open at the deadline is delivered
    rather than dropped. Errors that retrying cannot fix (401/403/404...) raise; connection drops and
    5xx answers are retried with backoff behind the scenes.
    """
    batcher, version = _listed_batcher(api, namespace, PendingBatcher(quiet=quiet, max_wait=max_wait), clock)
    messages: queue.Queue = queue.Queue()
    readers: list[WatchReader] = [PendingWatchReader(api, namespace, version, deadline, messages, clock)]
    joins = NodeJoins()
    if nodes:
        readers.append(_node_reader(api, joins, deadline, messages, clock))
    yield from _deliver(batcher, joins, messages, readers, deadline, clock)


def settled_pending_pods(
    api: ApiClient,
    deadline: float | None = None,
    *,
    namespace: str | None = None,
    quiet: float = QUIET_SECONDS,
    max_wait: float = MAX_BATCH_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> PendingBatch | None:
    """The first batch :func:`watch_pending_pods` would deliver: the provisionable pods once none has
    become provisionable for ``quiet`` seconds (``max_wait`` after the listing at most, never past
    ``deadline``, a ``clock()`` time), so a one-pass run plans a burst the scheduler is still marking as
    a whole, as the watch does. None at once when no pod is pending: there is no burst to wait for."""
    # From the API server's watch cache ("0"), as the world's read of the pending pods: no etcd read per
    # run, and the watch from its version brings whatever came after it.
    batcher, version = _listed_batcher(api, namespace, FirstBatch(quiet=quiet, max_wait=max_wait), clock, "0")
    if batcher.due_at() is None:
        return None
    deadline = clock() + max_wait if deadline is None else min(deadline, clock() + max_wait)
    messages: queue.Queue = queue.Queue()
    reader = PendingWatchReader(api, namespace, version, deadline, messages, clock)
    batches = _deliver(batcher, NodeJoins(), messages, [reader], deadline, clock)
    try:
        first = next(batches, None)
    finally:
        batches.close()  # stops the watch
    return first if isinstance(first, PendingBatch) else None


def _listed_batcher(
    api: ApiClient, namespace: str | None, batcher: PendingBatcher, clock: Callable[[], float],
    resource_version: str | None = None,
) -> tuple[PendingBatcher, str]:
    """``batcher`` opened on the pods pending now (they form its first batch), and the list's resourceVersion."""
    listed = list_pods(api, namespace, field_selector=PENDING_FIELD_SELECTOR, resource_version=resource_version)
    batcher.replace_all(listed.items, clock())
    return batcher, listed.resource_version


def watch_joining_nodes(
    api: ApiClient, deadline: float, *, clock: Callable[[], float] = time.monotonic,
    stop: threading.Event | None = None,
) -> Iterator[JoinedNodes]:
    """The Nodes joining until `deadline` (or `stop` is set), as :func:`watch_pending_pods` delivers them,
    without the pods."""
    messages: queue.Queue = queue.Queue()
    joins = NodeJoins()
    reader = _node_reader(api, joins, deadline, messages, clock)
    for item in _deliver(None, joins, messages, [reader], deadline, clock, stop):
        if isinstance(item, JoinedNodes):
            yield item


def _node_reader(
    api: ApiClient, joins: NodeJoins, deadline: float, messages: queue.Queue, clock: Callable[[], float]
) -> NodeWatchReader:
    listed = list_nodes(api)
    joins.listed(listed.items, clock())
    return NodeWatchReader(api, listed.resource_version, deadline, messages, clock)


def _deliver(
    batcher: PendingBatcher | None,
    joins: NodeJoins,
    messages: queue.Queue,
    readers: list[WatchReader],
    deadline: float,
    clock: Callable[[], float],
    stop: threading.Event | None = None,
) -> Iterator[PendingBatch | JoinedNodes]:
    for reader in readers:
        reader.start()
    try:
        while stop is None or not stop.is_set():
            now = clock()
            joined_due = joins.due_at()
            if joined_due is not None and now >= joined_due:
                yield joins.take()
                continue
            due = batcher.due_at() if batcher is not None else None
            if batcher is not None and due is not None and now >= due:
                yield batcher.take(now)
                continue
            if now >= deadline:
                break
            wake = min(t for t in (deadline, due, joined_due, now + STOP_CHECK_SECONDS if stop else None)
                       if t is not None)
            try:
                message = messages.get(timeout=max(wake - now, 0.001))
            except queue.Empty:
                continue
            _apply(batcher, joins, message, clock())
        if joins.names:
            yield joins.take()
        if batcher is not None and batcher.due_at() is not None:
            yield batcher.take(clock())
    finally:
        for reader in readers:
            reader.halt()
        for reader in readers:
            reader.join(timeout=2.0)


def _apply(batcher: PendingBatcher | None, joins: NodeJoins, message: tuple, now: float) -> None:
    tag = message[0]
    if tag == "node":
        joins.observe(message[1], message[2], now)
    elif tag == "nodes":
        joins.listed(message[1], now)
    elif tag == "event" and batcher is not None:
        batcher.observe(message[1], message[2], now)
    elif tag == "list" and batcher is not None:
        batcher.replace_all(message[1], now)
    elif tag == "error":
        raise message[1]
