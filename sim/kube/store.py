"""The in-memory object store behind the local Kubernetes API.

Objects live as plain dicts indexed by storage key ("<group>/<plural>"), namespace and name.
A stored dict is never mutated: every write stores a new dict, so readers inside this package
may hold references (`peek`, `snapshot`) without copying, and the JSON text of an object is
computed once and reused by every list that includes it. Public methods return copies.

One counter gives every write its resourceVersion; watchers and change listeners see the
writes in that order.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import json
import queue
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from ..clock import Clock, format_time
from . import errors, structural
from .defaults import apply_create_defaults
from .errors import ApiError
from .objects import clone, meta, valid_name, valid_path_segment_name
from .patches import apply_patch
from .resources import CRD_KEY, Registry, ResourceType, validate_crd
from .selectors import LabelMatcher, ObjectMatcher, field_equals, parse_field_selector, parse_label_selector
from .validation import Errors, invalid_error, validate

Listener = Callable[[str, str, dict[str, Any], dict[str, Any] | None], None]
"""Called under the store lock with (event type, resource key, object, previous object)."""

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Resources whose objects carry metadata.generation (those with a desired-state spec).
_NO_GENERATION = frozenset({"v1/pods", "v1/nodes", "v1/namespaces", "v1/events", "events.k8s.io/v1/events"})
_WATCH_HISTORY = 200_000


class _Entry:
    __slots__ = ("obj", "text")

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.text: str | None = None

    def json(self) -> str:
        if self.text is None:
            self.text = json.dumps(self.obj, separators=(",", ":"))
        return self.text


def _storage_key(rt: ResourceType) -> str:
    # All versions of one group/resource share storage, as they do in etcd.
    return f"{rt.group}/{rt.plural}"


def _as_version(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("apiVersion") == rt.api_version:
        return obj
    return {**obj, "apiVersion": rt.api_version}


class Watch:
    """One watch stream: events pushed by the store, taken with `next()` or by iterating."""

    def __init__(
        self,
        store: Store,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelMatcher,
        fields: ObjectMatcher,
    ) -> None:
        self._store = store
        self.rt = rt
        self.namespace = namespace
        self._labels = labels
        self._fields = fields
        self._queue: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self.closed = False

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        metadata = meta(obj)
        if self.namespace and metadata.get("namespace") != self.namespace:
            return False
        return self._labels(metadata.get("labels") or {}) and self._fields(obj)

    def offer(self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        """Translate a store write into this watcher's view (selectors turn updates into add/delete)."""
        now_matches = self.matches(obj)
        if event_type == "MODIFIED":
            before = self.matches(old)
            if before and not now_matches:
                self._queue.put(("DELETED", obj))
            elif now_matches and not before:
                self._queue.put(("ADDED", obj))
            elif now_matches:
                self._queue.put(("MODIFIED", obj))
        elif now_matches:
            self._queue.put((event_type, obj))

    def idle(self) -> bool:
        """No event waits to be taken (call under the store lock to keep it so)."""
        return self._queue.empty()

    def push(self, event_type: str, obj: dict[str, Any]) -> None:
        self._queue.put((event_type, obj))

    def next_raw(self, timeout: float | None = None) -> tuple[str, dict[str, Any]] | None:
        """The next (type, stored object) pair; None on timeout or when closed. Do not mutate it."""
        if self.closed:
            return None
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is None:
            self.closed = True
            return None
        return item[0], _as_version(self.rt, item[1])

    def next(self, timeout: float | None = None) -> tuple[str, dict[str, Any]] | None:
        item = self.next_raw(timeout)
        return None if item is None else (item[0], clone(item[1]))

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        while True:
            item = self.next()
            if item is None:
                return
            yield item

    def close(self) -> None:
        self._store._remove_watch(self)
        self._queue.put(None)


def _go_seconds(seconds: int) -> timedelta:
    """``time.Second * time.Duration(seconds)`` as kube-apiserver computes a deletion's grace: int64
    nanoseconds, wrapping on overflow (the API takes any int64 grace). Python's timedelta would raise instead."""
    nanoseconds = (seconds * 1_000_000_000 + 2**63) % 2**64 - 2**63
    return timedelta(microseconds=nanoseconds // 1000)


class Store:
    """Thread-safe in-memory Kubernetes objects with resourceVersions, selectors and watches."""

    def __init__(self, clock: Clock | None = None, watch_history: int = _WATCH_HISTORY) -> None:
        self.clock = clock or Clock()
        self.registry = Registry()
        self._lock = threading.RLock()
        self._data: dict[str, dict[str, dict[str, _Entry]]] = {}
        self._key_order: dict[str, list[tuple[str, str]]] = {}
        self._rv = 0
        self._history: deque[tuple[int, str, str, dict[str, Any], dict[str, Any] | None]] = deque()
        self._history_limit = watch_history
        self._compacted_rv = 0
        self._watches: dict[str, set[Watch]] = {}
        self._listeners: list[Listener] = []
        self._pods_by_node: dict[str, set[tuple[str, str]]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}
        for ns in DEFAULT_NAMESPACES:
            self.create("v1/namespaces", {"metadata": {"name": ns}})

    # ----------------------------------------------------------------- lookups

    def resource(self, resource: str) -> ResourceType:
        rt = self.registry.get(resource)
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return rt

    @property
    def lock(self) -> threading.RLock:
        """The store's lock, for callers that need several reads and writes to be atomic."""
        return self._lock

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def _ns(self, rt: ResourceType, namespace: str | None, obj: dict[str, Any] | None = None) -> str:
        if not rt.namespaced:
            return ""
        if namespace:
            return namespace
        from_obj = meta(obj).get("namespace") if obj else None
        return from_obj or "default"

    def _entry(self, rt: ResourceType, name: str, ns: str) -> _Entry:
        entry = self._data.get(_storage_key(rt), {}).get(ns, {}).get(name)
        if entry is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return entry

    def peek(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The stored object itself (read-only), or None. For code inside `sim.kube`."""
        rt = self.resource(resource)
        entry = self._data.get(_storage_key(rt), {}).get(self._ns(rt, namespace), {}).get(name)
        return None if entry is None else entry.obj

    def snapshot(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects themselves (read-only), without copying. For code inside `sim.kube`."""
        rt = self.resource(resource)
        with self._lock:
            by_ns = self._data.get(_storage_key(rt), {})
            if rt.namespaced and namespace:
                return [e.obj for e in by_ns.get(namespace, {}).values()]
            return [e.obj for entries in by_ns.values() for e in entries.values()]

    def pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        """Stored pods bound to a node (read-only)."""
        with self._lock:
            pods = self._data.get("/pods", {})
            keys = self._pods_by_node.get(node_name, ())
            return [pods[ns][name].obj for ns, name in keys if name in pods.get(ns, {})]

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(resource key, namespace, name) of objects whose ownerReferences name `owner_uid`."""
        with self._lock:
            return sorted(self._dependents.get(owner_uid, ()))

    # ----------------------------------------------------------------- reads

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        rt = self.resource(resource)
        with self._lock:
            entry = self._entry(rt, name, self._ns(rt, namespace))
            text = entry.json()
        obj = json.loads(text)
        obj["apiVersion"] = rt.api_version
        return obj

    def _sorted_keys(self, skey: str) -> list[tuple[str, str]]:
        """(namespace, name) of every stored object of a resource in list order, cached until the
        next create or delete of that resource."""
        keys = self._key_order.get(skey)
        if keys is None:
            keys = sorted((ns, name) for ns, entries in self._data.get(skey, {}).items() for name in entries)
            self._key_order[skey] = keys
        return keys

    def _select(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        after: tuple[str, str] | None = None,
        limit: int = 0,
    ) -> tuple[list[tuple[tuple[str, str], _Entry]], bool]:
        """Matching objects in list order after `after`, at most `limit` of them (0: all); also
        whether more matches follow."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        skey = _storage_key(rt)
        by_ns = self._data.get(skey, {})
        namespace = namespace if rt.namespaced else None
        node_name = field_equals(field_selector, "spec.nodeName") if rt.key == "v1/pods" else None
        if node_name:
            # An index answers the drain-style "pods on node X" list without a full scan.
            keys = sorted(k for k in self._pods_by_node.get(node_name, ()) if not namespace or k[0] == namespace)
            lo, hi = 0, len(keys)
        else:
            keys = self._sorted_keys(skey)
            lo, hi = 0, len(keys)
            if namespace:
                lo, hi = bisect.bisect_left(keys, (namespace, "")), bisect.bisect_left(keys, (namespace + "\x00", ""))
        if after is not None:
            lo = max(lo, bisect.bisect_right(keys, after))
        selected: list[tuple[tuple[str, str], _Entry]] = []
        for index in range(lo, hi):
            key = keys[index]
            entry = by_ns.get(key[0], {}).get(key[1])
            if entry is None:
                continue
            obj = entry.obj
            if labels((obj.get("metadata") or {}).get("labels") or {}) and fields(obj):
                if limit and len(selected) == limit:
                    return selected, True
                selected.append((key, entry))
        return selected, False

    def _count_after(self, rt: ResourceType, namespace: str | None, after: tuple[str, str]) -> int:
        keys = self._sorted_keys(_storage_key(rt))
        hi = len(keys)
        if rt.namespaced and namespace:
            hi = bisect.bisect_left(keys, (namespace + "\x00", ""))
        return max(0, hi - bisect.bisect_right(keys, after))

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> list[dict[str, Any]]:
        rt = self.resource(resource)
        with self._lock:
            selected, _ = self._select(rt, namespace, label_selector, field_selector)
            texts = [entry.json() for _, entry in selected]
        items = json.loads("[" + ",".join(texts) + "]")
        for item in items:
            item["apiVersion"] = rt.api_version
        return items

    def list_page(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> tuple[list[str], str, str, int | None]:
        """JSON texts of one page of items, the list resourceVersion, the next continue token and,
        when no selector filters the list, how many items follow this page (as the real server)."""
        rt = self.resource(resource)
        after = _decode_continue(continue_token) if continue_token else None
        with self._lock:
            selected, more = self._select(rt, namespace, label_selector, field_selector, after, limit)
            list_rv = str(self._rv)
            token = ""
            remaining: int | None = None
            if more:
                token = _encode_continue(selected[-1][0], list_rv)
                if not label_selector and not field_selector:
                    remaining = self._count_after(rt, namespace, selected[-1][0])
            texts = [
                entry.json()
                if entry.obj.get("apiVersion") == rt.api_version
                else json.dumps(_as_version(rt, entry.obj), separators=(",", ":"))
                for _, entry in selected
            ]
        return texts, list_rv, token, remaining

    # ----------------------------------------------------------------- writes

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _commit(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        event_type: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        """Store (or drop, for DELETED) an object that already carries its new resourceVersion."""
        skey = _storage_key(rt)
        if event_type == "DELETED":
            self._data.get(skey, {}).get(ns, {}).pop(name, None)
            self._key_order.pop(skey, None)
        else:
            if event_type == "ADDED":
                self._key_order.pop(skey, None)
            self._data.setdefault(skey, {}).setdefault(ns, {})[name] = _Entry(obj)
        self._reindex(rt, ns, name, obj if event_type != "DELETED" else None, old)
        self._history.append((self._rv, skey, event_type, obj, old))
        while len(self._history) > self._history_limit:
            self._compacted_rv = self._history.popleft()[0]
        for watch in list(self._watches.get(skey, ())):
            watch.offer(event_type, obj, old)
        for listener in self._listeners:
            listener(event_type, rt.key, obj, old)

    def _reindex(
        self, rt: ResourceType, ns: str, name: str, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> None:
        if rt.key == "v1/pods":
            old_node = (old or {}).get("spec", {}).get("nodeName") if old else None
            new_node = (obj or {}).get("spec", {}).get("nodeName") if obj else None
            if old_node != new_node or obj is None:
                if old_node:
                    self._pods_by_node.get(old_node, set()).discard((ns, name))
                if new_node:
                    self._pods_by_node.setdefault(new_node, set()).add((ns, name))
        old_owners = {r.get("uid") for r in meta(old).get("ownerReferences") or []} if old else set()
        new_owners = {r.get("uid") for r in meta(obj).get("ownerReferences") or []} if obj else set()
        if old_owners != new_owners:
            key = (rt.key, ns, name)
            for uid in old_owners - new_owners:
                self._dependents.get(uid, set()).discard(key)
            for uid in new_owners - old_owners:
                self._dependents.setdefault(uid, set()).add(key)

    def _prepare_body(self, rt: ResourceType, obj: Any) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of the request must be a {rt.kind} object")
        try:
            body = clone(obj)
        except (TypeError, ValueError) as exc:
            raise errors.bad_request(f"the {rt.kind} object is not valid JSON data: {exc}") from exc
        if not isinstance(body.get("metadata"), dict):
            body["metadata"] = {}
        if body.get("kind") not in (None, rt.kind):
            raise errors.bad_request(
                f"the kind of the provided object ({body['kind']}) does not match the resource ({rt.kind})"
            )
        body["kind"] = rt.kind
        body["apiVersion"] = rt.api_version
        return body

    def create(
        self, resource: str, obj: dict[str, Any], namespace: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        rt = self.resource(resource)
        body = self._prepare_body(rt, obj)
        metadata = body["metadata"]
        with self._lock:
            ns = self._ns(rt, namespace, body)
            if rt.namespaced:
                if metadata.get("namespace") not in (None, "", ns):
                    raise errors.bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request"
                    )
                metadata["namespace"] = ns
                if self.peek("v1/namespaces", ns) is None:
                    raise errors.not_found("namespaces", "", ns)
            else:
                metadata.pop("namespace", None)
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = self._generate_name(rt, ns, metadata["generateName"])
            name = metadata.get("name")
            if not name:
                raise errors.invalid(
                    rt.kind, rt.group, "", "metadata.name", "Required value: name or generateName is required"
                )
            # Event names carry a hex suffix clients generate freely; the real server accepts them too.
            if rt.plural == "events":
                problem = None
            elif rt.group == "rbac.authorization.k8s.io":  # kube validates these as path segments
                problem = valid_path_segment_name(name)
            else:
                problem = valid_name(name)
            if problem:
                raise errors.invalid(rt.kind, rt.group, name, "metadata.name", f'Invalid value: "{name}": {problem}')
            if name in self._data.get(_storage_key(rt), {}).get(ns, {}):
                raise errors.already_exists(rt.plural, rt.group, name)
            if rt.key == CRD_KEY:
                problem = validate_crd(body)
                if problem:
                    raise errors.invalid(rt.kind, rt.group, name, problem.split(":", 1)[0], problem.split(":", 1)[1].strip())
            uid = str(uuid.uuid4())
            for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                metadata.pop(key, None)
            metadata["uid"] = uid
            metadata["creationTimestamp"] = self.clock.timestamp()
            if rt.key not in _NO_GENERATION:
                metadata["generation"] = 1
            if rt.has_status and rt.key != "v1/nodes":
                # Status is the controllers' to write; only nodes register with theirs (kubelets do).
                body.pop("status", None)
            apply_create_defaults(rt.key, body, uid)
            validate(rt, body)
            self._structural(rt, body)
            if rt.key == CRD_KEY:
                self._crd_status(body)
            if dry_run:
                metadata["resourceVersion"] = str(self._rv)
                return body
            metadata["resourceVersion"] = self._next_rv()
            self._commit(rt, ns, name, "ADDED", body, None)
            if rt.key == CRD_KEY:
                self.registry.register_crd(body)
            # The stored JSON text is needed by every later list anyway: make it now and copy from it.
            return json.loads(self._data[_storage_key(rt)][ns][name].json())

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        existing = self._data.get(_storage_key(rt), {}).get(ns, {})
        alphabet = "bcdfghjklmnpqrstvwxz2456789"
        for _ in range(100):
            candidate = prefix[:58] + "".join(random.choices(alphabet, k=5))
            if candidate not in existing:
                return candidate
        raise ApiError(500, "InternalError", f"could not generate a unique name for prefix {prefix!r}")

    def _structural(self, rt: ResourceType, body: dict[str, Any]) -> None:
        """A custom resource pruned and checked against its CRD's schema (structural.py), as kube-apiserver
        does on create and update; a 422 with every type error."""
        if rt.builtin:
            return
        schema = structural.schema_of(self.peek(CRD_KEY, f"{rt.plural}.{rt.group}"), rt.version)
        if schema is None:
            return
        structural.prune(body, schema)
        errs = Errors()
        structural.check(body, schema, errs)
        if errs.causes:
            raise invalid_error(rt, (body.get("metadata") or {}).get("name") or "", errs.causes)

    @staticmethod
    def _crd_status(crd: dict[str, Any]) -> None:
        now = crd["metadata"]["creationTimestamp"]
        names = (crd.get("spec") or {}).get("names") or {}
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage", True)][:1],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
        }

    def _replace(
        self,
        rt: ResourceType,
        ns: str,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        check_rv: bool,
        dry_run: bool,
    ) -> dict[str, Any]:
        """Shared tail of update/update_status/patch: keep what the request may not change, bump
        resourceVersion/generation, finish deletions whose finalizers are gone."""
        name = meta(old)["name"]
        new_meta = new.setdefault("metadata", {})
        if not isinstance(new_meta, dict):
            raise errors.bad_request("metadata must be an object")
        if new_meta.get("name", name) != name:
            raise errors.bad_request(
                f'the name of the object ({new_meta.get("name")}) does not match the name on the URL ({name})'
            )
        sent_rv = new_meta.get("resourceVersion")
        if check_rv and sent_rv not in (None, "") and sent_rv != meta(old).get("resourceVersion"):
            raise errors.conflict(rt.plural, rt.group, name)
        old_meta = meta(old)
        if subresource == "status":
            # A status write changes status only.
            result = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                result["status"] = new["status"]
            result["metadata"] = dict(old_meta)
        else:
            result = dict(new)
            if rt.has_status and "status" in old:
                result["status"] = old["status"]
            elif rt.has_status:
                result.pop("status", None)
            merged = dict(new_meta)
            for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if key in old_meta:
                    merged[key] = old_meta[key]
                else:
                    merged.pop(key, None)
            merged["name"] = name
            if rt.namespaced:
                merged["namespace"] = ns
            else:
                merged.pop("namespace", None)
            result["metadata"] = merged
            if "generation" in old_meta:
                spec_changed = {k: v for k, v in result.items() if k not in ("metadata", "status")} != {
                    k: v for k, v in old.items() if k not in ("metadata", "status")
                }
                if spec_changed:
                    merged["generation"] = old_meta["generation"] + 1
        result["kind"] = rt.kind
        result["apiVersion"] = old.get("apiVersion", rt.api_version)
        old_node = (old.get("spec") or {}).get("nodeName")
        if (
            rt.key == "v1/pods"
            and old_node
            and subresource != "status"
            and (result.get("spec") or {}).get("nodeName") != old_node
        ):
            raise errors.invalid(
                rt.kind, rt.group, name, "spec", "Forbidden: pod updates may not change fields other than "
                "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                "`spec.tolerations` (only additions to existing tolerations), "
                "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
            )
        if check_rv and subresource is None:
            # A client's update or patch (not a controller's `modify`) is validated as kube-apiserver does.
            validate(rt, result)
            self._structural(rt, result)
        if dry_run:
            return result
        result["metadata"]["resourceVersion"] = self._next_rv()
        rmeta = result["metadata"]
        if (
            rmeta.get("deletionTimestamp")
            and not rmeta.get("finalizers")
            and not rmeta.get("deletionGracePeriodSeconds")
        ):
            self._commit(rt, ns, name, "DELETED", result, old)
            self._after_delete(rt, result)
        else:
            self._commit(rt, ns, name, "MODIFIED", result, old)
        return result

    def update(
        self, resource: str, obj: dict[str, Any], namespace: str | None = None, dry_run: bool = False,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        rt = self.resource(resource)
        body = self._prepare_body(rt, obj)
        name = body["metadata"].get("name")
        if not name:
            raise errors.invalid(rt.kind, rt.group, "", "metadata.name", "Required value: name is required")
        with self._lock:
            ns = self._ns(rt, namespace, body)
            if rt.namespaced and body["metadata"].get("namespace") not in (None, "", ns):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            old = self._entry(rt, name, ns).obj
            result = self._replace(rt, ns, body, old, subresource, True, dry_run)
            return clone(_as_version(rt, result))

    def update_status(
        self, resource: str, obj: dict[str, Any], namespace: str | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        return self.update(resource, obj, namespace, dry_run=dry_run, subresource="status")

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        rt = self.resource(resource)
        if patch_type == "strategic" and not rt.builtin:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            )
        with self._lock:
            ns = self._ns(rt, namespace)
            old = self._entry(rt, name, ns).obj
            patched = apply_patch(_as_version(rt, old), patch, patch_type)
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch did not produce an object")
            result = self._replace(rt, ns, patched, old, subresource, True, dry_run)
            return clone(_as_version(rt, result))

    def modify(
        self,
        resource: str,
        name: str,
        namespace: str | None,
        change: Callable[[dict[str, Any]], bool | None],
        subresource: str | None = None,
    ) -> dict[str, Any] | None:
        """Atomically apply `change` to a copy of the current object and store it.

        `change` returns False to skip the write. Returns the stored object (read-only), or None
        when the object does not exist. For controllers, which must not lose races to clients.
        """
        rt = self.resource(resource)
        with self._lock:
            ns = self._ns(rt, namespace)
            entry = self._data.get(_storage_key(rt), {}).get(ns, {}).get(name)
            if entry is None:
                return None
            current = json.loads(entry.json())
            if change(current) is False:
                return entry.obj
            current.setdefault("metadata", {})["resourceVersion"] = entry.obj["metadata"]["resourceVersion"]
            return self._replace(rt, ns, current, entry.obj, subresource, False, False)

    def bind(self, name: str, namespace: str, node_name: str) -> dict[str, Any]:
        """Assign a pending pod to a node, as the `binding` subresource does; the pod as bound (read-only)."""
        rt = self.resource("v1/pods")
        with self._lock:
            entry = self._entry(rt, name, namespace)
            old = entry.obj
            current = (old.get("spec") or {}).get("nodeName")
            if current:
                raise ApiError(
                    409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                    f"already assigned to node \"{current}\"", {"name": name, "kind": "pods/binding"},
                )
            if meta(old).get("deletionTimestamp"):
                raise ApiError(
                    409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                    "being deleted, cannot be assigned to a host", {"name": name, "kind": "pods/binding"},
                )
            pod = json.loads(entry.json())
            pod["spec"]["nodeName"] = node_name
            now = self.clock.timestamp()
            conditions = [c for c in pod.setdefault("status", {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
            pod["status"]["conditions"] = conditions
            pod["metadata"]["resourceVersion"] = self._next_rv()
            self._commit(rt, namespace, name, "MODIFIED", pod, old)
            return pod

    def delete(
        self,
        resource: str,
        name: str,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete or start deleting an object; returns the object as the deletion left it."""
        rt = self.resource(resource)
        if propagation_policy not in (None, "Background", "Foreground", "Orphan"):
            raise errors.bad_request(
                f'Unsupported value: "{propagation_policy}": supported values: "Foreground", "Background", "Orphan"'
            )
        with self._lock:
            ns = self._ns(rt, namespace)
            old = self._entry(rt, name, ns).obj
            old_meta = meta(old)
            if preconditions:
                if preconditions.get("uid") and preconditions["uid"] != old_meta.get("uid"):
                    raise ApiError(
                        409, "Conflict", f"Operation cannot be fulfilled on {errors.qualified(rt.plural, rt.group)} "
                        f'"{name}": Precondition failed: UID in precondition: {preconditions["uid"]}, UID in object '
                        f"meta: {old_meta.get('uid')}", {"name": name, "kind": rt.plural},
                    )
                if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != old_meta.get(
                    "resourceVersion"
                ):
                    raise errors.conflict(rt.plural, rt.group, name)
            if dry_run:
                return clone(_as_version(rt, old))
            if propagation_policy == "Orphan":
                self._orphan_dependents(old_meta.get("uid", ""))
            obj = json.loads(json.dumps(old))
            obj_meta = obj["metadata"]
            now = self.clock.now()
            finalizers = list(obj_meta.get("finalizers") or [])
            if (
                propagation_policy == "Foreground"
                and self._dependents.get(old_meta.get("uid", ""))
                and "foregroundDeletion" not in finalizers
            ):
                finalizers.append("foregroundDeletion")
                obj_meta["finalizers"] = finalizers
            if rt.key == "v1/pods":
                grace = self._pod_grace(old, grace_period_seconds)
                if grace > 0:
                    current_grace = old_meta.get("deletionGracePeriodSeconds")
                    if current_grace is not None and current_grace <= grace:
                        return clone(old)
                    obj_meta["deletionTimestamp"] = format_time(now + _go_seconds(grace))
                    obj_meta["deletionGracePeriodSeconds"] = grace
                    obj_meta["resourceVersion"] = self._next_rv()
                    self._commit(rt, ns, name, "MODIFIED", obj, old)
                    return clone(obj)
            if finalizers:
                if old_meta.get("deletionTimestamp") and old_meta.get("deletionGracePeriodSeconds") in (0, None) and (
                    finalizers == (old_meta.get("finalizers") or [])
                ):
                    return clone(_as_version(rt, old))
                obj_meta.setdefault("deletionTimestamp", format_time(now))
                obj_meta["deletionGracePeriodSeconds"] = 0
                obj_meta["resourceVersion"] = self._next_rv()
                self._commit(rt, ns, name, "MODIFIED", obj, old)
                return clone(_as_version(rt, obj))
            obj_meta["resourceVersion"] = self._next_rv()
            obj_meta.setdefault("deletionTimestamp", format_time(now))
            obj_meta["deletionGracePeriodSeconds"] = 0
            self._commit(rt, ns, name, "DELETED", obj, old)
            self._after_delete(rt, obj)
            return clone(_as_version(rt, obj))

    @staticmethod
    def _pod_grace(pod: dict[str, Any], requested: int | None) -> int:
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
        return max(0, int(grace or 0))

    def _orphan_dependents(self, uid: str) -> None:
        for resource, ns, name in sorted(self._dependents.get(uid, ())):
            def drop_owner(obj: dict[str, Any], uid: str = uid) -> None:
                refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
                obj["metadata"]["ownerReferences"] = refs
            self.modify(resource, name, ns or None, drop_owner)

    def _after_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Cascades the real server runs synchronously enough for clients not to notice."""
        name = meta(obj).get("name", "")
        if rt.key == "v1/namespaces":
            for other in self.registry.all():
                if other.namespaced:
                    entries = self._data.get(_storage_key(other), {}).get(name, {})
                    for child in list(entries):
                        self._drop(other, name, child)
        elif rt.key == CRD_KEY:
            spec = obj.get("spec") or {}
            plural = (spec.get("names") or {}).get("plural")
            served = [r for r in self.registry.all() if not r.builtin and r.group == spec.get("group") and r.plural == plural]
            if served:
                skey = _storage_key(served[0])
                for ns, entries in list(self._data.get(skey, {}).items()):
                    for child in list(entries):
                        self._drop(served[0], ns, child)
                self._data.pop(skey, None)
            self.registry.unregister_crd(obj)

    def _drop(self, rt: ResourceType, ns: str, name: str) -> None:
        old = self._data[_storage_key(rt)][ns][name].obj
        obj = {**old, "metadata": {**meta(old)}}
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._commit(rt, ns, name, "DELETED", obj, old)

    # ----------------------------------------------------------------- watches

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str | None = None,
    ) -> Watch:
        """Start a watch. Without a resourceVersion (or with "0") it opens with ADDED events for the
        current objects; with one, it replays every later change still in the history (410 Gone if not)."""
        rt = self.resource(resource)
        watch = Watch(
            self, rt, namespace if rt.namespaced else None,
            parse_label_selector(label_selector), parse_field_selector(field_selector),
        )
        skey = _storage_key(rt)
        with self._lock:
            if resource_version in (None, "", "0"):
                for _, entry in self._select(rt, watch.namespace, "", "")[0]:
                    if watch.matches(entry.obj):
                        watch.push("ADDED", entry.obj)
            else:
                try:
                    since = int(resource_version)
                except ValueError as exc:
                    raise errors.bad_request(f'invalid resource version "{resource_version}"') from exc
                if since < self._compacted_rv:
                    raise errors.gone(f"too old resource version: {since} ({self._compacted_rv + 1})")
                for rv, key, event_type, obj, old in self._replay_after(since):
                    if key == skey and rv > since:
                        watch.offer(event_type, obj, old)
            self._watches.setdefault(skey, set()).add(watch)
        return watch

    def _replay_after(self, since: int) -> list[tuple[int, str, str, dict[str, Any], dict[str, Any] | None]]:
        history = self._history
        if not history or history[-1][0] <= since:
            return []
        # History is ordered by resourceVersion: find the first entry after `since` from the end.
        start = len(history)
        for index in range(len(history) - 1, -1, -1):
            if history[index][0] <= since:
                break
            start = index
        return list(itertools.islice(history, start, None))

    def _remove_watch(self, watch: Watch) -> None:
        with self._lock:
            self._watches.get(_storage_key(watch.rt), set()).discard(watch)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` (under the store lock: keep it quick) after every write; returns an unsubscribe."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe


def _encode_continue(last: tuple[str, str], rv: str) -> str:
    raw = json.dumps({"v": 1, "rv": rv, "start": list(last)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        ns, name = data["start"]
        return str(ns), str(name)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise errors.bad_request(f"continue key is not valid: {token!r}") from exc

