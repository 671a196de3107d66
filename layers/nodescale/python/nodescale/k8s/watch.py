"""Watching for pods the provisioner should act on, delivered in batches.

A batch opens when a pod becomes provisionable and closes after 1 s with no further new pod or
10 s after it opened, whichever comes first, so a burst of pods is planned together while a single
pod still waits only about a second.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from .client import CONNECT_TIMEOUT_SECONDS
from .http import ApiClient
from .listing import PENDING_FIELD_SELECTOR, collection_path, is_provisionable, list_pods
from .raw import WatchStream

QUIET_SECONDS = 1.0
MAX_BATCH_SECONDS = 10.0
# Server-side watch timeout; the watch is reopened from the last resourceVersion after it.
WATCH_SECONDS = 60
FATAL_STATUSES = frozenset({400, 401, 403, 404})


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


class PendingWatchReader(threading.Thread):
    """Keeps a watch open from a resourceVersion, relisting on 410 Gone, until stopped or the deadline."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str | None,
        resource_version: str,
        deadline: float,
        out: queue.Queue,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(name="nodescale-pending-watch", daemon=True)
        self.api = api
        self.namespace = namespace
        self.path = collection_path("", "v1", "pods", namespace)
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
                    listed = list_pods(self.api, self.namespace, field_selector=PENDING_FIELD_SELECTOR)
                    self.resource_version = listed.resource_version
                    self.out.put(("list", listed.items))
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

    def _watch_once(self) -> None:
        remaining = self.deadline - self.clock()
        seconds = max(1, min(WATCH_SECONDS, int(remaining) + 1))
        query = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "fieldSelector": PENDING_FIELD_SELECTOR,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": seconds,
        }
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
                self.out.put(("event", kind, obj))


def watch_pending_pods(
    api: ApiClient,
    deadline: float,
    *,
    namespace: str | None = None,
    quiet: float = QUIET_SECONDS,
    max_wait: float = MAX_BATCH_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[PendingBatch]:
    """Batches of provisionable pods until `deadline` (a `clock()` time, monotonic by default).

    Pods already pending when the watch starts form the first batch. A batch still open at the
    deadline is delivered rather than dropped. Errors that retrying cannot fix (401/403/404...)
    raise; connection drops and 5xx answers are retried with backoff behind the scenes.
    """
    batcher = PendingBatcher(quiet=quiet, max_wait=max_wait)
    listed = list_pods(api, namespace, field_selector=PENDING_FIELD_SELECTOR)
    batcher.replace_all(listed.items, clock())
    messages: queue.Queue = queue.Queue()
    reader = PendingWatchReader(api, namespace, listed.resource_version, deadline, messages, clock)
    reader.start()
    try:
        while True:
            now = clock()
            due = batcher.due_at()
            if due is not None and now >= due:
                yield batcher.take(now)
                continue
            if now >= deadline:
                break
            wait = min(deadline, due if due is not None else deadline) - now
            try:
                message = messages.get(timeout=max(wait, 0.001))
            except queue.Empty:
                continue
            _apply(batcher, message, clock())
        if batcher.due_at() is not None:
            yield batcher.take(clock())
    finally:
        reader.halt()
        reader.join(timeout=2.0)


def _apply(batcher: PendingBatcher, message: tuple, now: float) -> None:
    if message[0] == "event":
        batcher.observe(message[1], message[2], now)
    elif message[0] == "list":
        batcher.replace_all(message[1], now)
    else:
        raise message[1]
