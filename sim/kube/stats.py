"""What the API server served, counted per verb and resource, for tests and benches to read.

`GET /sim/v1/stats` returns the counters, `DELETE /sim/v1/stats` zeroes them. Per resource (its
plural) and verb: requests, plus for lists the pages, objects and bytes served, the full lists (a
cluster-wide list of the whole collection: no label or field selector, not a continue page) and the
lists served "from the watch cache" (resourceVersion=0 or resourceVersionMatch=NotOlderThan, which
kube-apiserver serves from its cache, against a quorum read from etcd otherwise); for watches the
events, bookmarks and bytes streamed.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class ApiStats:
    """Thread-safe counters: resource -> verb -> counter -> value."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, dict[str, int]]] = {}
        self._since = time.time()

    def add(self, resource: str, verb: str, **counts: int) -> None:
        with self._lock:
            entry = self._data.setdefault(resource, {}).setdefault(verb, {})
            for key, value in counts.items():
                entry[key] = entry.get(key, 0) + value

    def report(self) -> dict[str, Any]:
        with self._lock:
            resources = {r: {v: dict(c) for v, c in verbs.items()} for r, verbs in self._data.items()}
        return {"since": self._since, "resources": resources}

    def reset(self) -> dict[str, Any]:
        with self._lock:
            self._data = {}
            self._since = time.time()
        return self.report()
