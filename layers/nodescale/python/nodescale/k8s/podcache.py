"""Every pod of the cluster, listed once per warm container and kept current by a watch.

A Lambda container outlives its invocation: the provisioner's next run in it resumes a watch from
the resourceVersion it last saw and takes only what changed, instead of listing every pod again.
A cold container lists once (``resourceVersion=0``: kube-apiserver answers from its watch cache,
paged by ``limit``/``continue``). When the version is too old for the server's watch window (410
Gone), the cache lists again (most recent state); any other failure of the catch-up lists again
"not older than" what the cache had (served from the watch cache), as client-go's reflector does.

A catch-up reads the watch until it has been idle for ``CATCHUP_IDLE_SECONDS`` (the server replays
what it holds at once) or ``CATCHUP_MAX_SECONDS`` passed; what arrives later is taken next time.
Pods are kept as ``compact`` leaves them: a warm container's memory is mostly this cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from .client import CONNECT_TIMEOUT_SECONDS
from .compact import compact_pod
from .http import ApiClient
from .listing import collection_path, list_pods
from .raw import WatchStream

log = logging.getLogger(__name__)

CATCHUP_IDLE_SECONDS = 0.25
CATCHUP_MAX_SECONDS = 10.0
# Server-side bound of a catch-up watch (the client closes it as soon as it has caught up).
CATCHUP_WATCH_SECONDS = 30


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass
class SyncReport:
    """How one sync reached the API server: a full list, or a watch from the last version."""

    how: str  # "list" (cold), "relist" (the version expired or the watch failed), "watch"
    events: int = 0
    seconds: float = 0.0


@dataclass
class PodCache:
    """The pods by "namespace/name", and the resourceVersion they are current at."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    resource_version: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sync(self, api: ApiClient) -> SyncReport:
        """Bring the cache up to date: list when cold, else watch from the last version."""
        started = time.monotonic()
        with self._lock:
            report = self._resume(api) if self.resource_version else self._list(api, "0", None, "list")
        report.seconds = round(time.monotonic() - started, 3)
        log.debug("pod cache synced", extra={"how": report.how, "events": report.events, "pods": len(self.pods),
                                             "seconds": report.seconds})
        return report

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.pods.values())

    def _resume(self, api: ApiClient) -> SyncReport:
        try:
            return SyncReport("watch", self._catch_up(api))
        except ApiException as exc:
            if exc.status == 410:
                log.info("pod cache: resourceVersion %s expired; listing again", self.resource_version)
                return self._list(api, None, None, "relist")
            if exc.status in (401, 403, 404):
                raise
            log.warning("pod cache: watch failed (%s); listing again", exc.status)
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            log.warning("pod cache: watch failed (%s); listing again", type(exc).__name__)
        return self._list(api, self.resource_version, "NotOlderThan", "relist")

    def _list(self, api: ApiClient, version: str | None, match: str | None, how: str) -> SyncReport:
        listed = list_pods(api, resource_version=version, resource_version_match=match)
        self.pods = {_key(p): p for p in listed.items}  # compacted as listed
        self.resource_version = listed.resource_version
        return SyncReport(how)

    def _catch_up(self, api: ApiClient) -> int:
        """Apply the events after the cache's version; returns how many were applied."""
        query = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": CATCHUP_WATCH_SECONDS,
        }
        path = collection_path("", "v1", "pods")
        stream = WatchStream(api, path, query, timeout=(CONNECT_TIMEOUT_SECONDS, CATCHUP_IDLE_SECONDS))
        deadline = time.monotonic() + CATCHUP_MAX_SECONDS
        applied = 0
        try:
            for event in stream.events():
                applied += self._apply(event)
                if time.monotonic() > deadline:
                    break
        except urllib3.exceptions.ReadTimeoutError:
            pass  # idle: caught up with what the server holds
        finally:
            stream.close()
        return applied

    def _apply(self, event: Mapping[str, Any]) -> int:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=int(obj.get("code") or 500), reason=obj.get("message") or "watch error")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "DELETED":
            self.pods.pop(_key(obj), None)
        elif kind in ("ADDED", "MODIFIED"):
            self.pods[_key(obj)] = compact_pod(obj)
        if version:
            self.resource_version = str(version)
        return int(kind in ("ADDED", "MODIFIED", "DELETED"))


_CACHES: dict[str, PodCache] = {}
_CACHES_LOCK = threading.Lock()


def shared(api: ApiClient) -> PodCache:
    """This process's cache for the API server ``api`` talks to (one per cluster endpoint)."""
    host = str(getattr(api.configuration, "host", "") or "")
    with _CACHES_LOCK:
        return _CACHES.setdefault(host, PodCache())


def forget_all() -> None:
    """Drop every cache (tests; a process that switched clusters)."""
    with _CACHES_LOCK:
        _CACHES.clear()
