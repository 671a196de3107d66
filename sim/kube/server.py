"""HTTP front end: the Kubernetes REST API (as the official clients use it) over a `Store`.

Every Kubernetes request is authenticated (a bearer token per identity, `auth`) and authorized by
kube-apiserver's RBAC rules over the Roles and bindings in the store (`rbac`), so a client holding the
functions' kubeconfig can do exactly what `infra/manifests/rbac.yaml` grants and no more.

Also serves a small control API under `/sim/v1/` for tests and scenarios: the clock, the counters of
what it served (`/sim/v1/stats`, see `stats.py`) and fault
injection. It is the environment's, not Kubernetes': it takes no token (the product reads the
simulated clock from `NODESCALE_CLOCK_URL` as a plain GET).
"""

from __future__ import annotations

import json
import logging
import re
import select
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from nodescale.config import boundedyaml

from . import errors, fieldvalidation, reviews, tables
from .auth import TOKENS, User, authenticate, query_bool, request_attributes
from .disruption import evict
from .drainaudit import DrainAudit
from .errors import ApiError
from .faults import FaultInjector, FaultSpecError, fault_error
from .objects import meta
from .openapi import OpenApiDocuments
from .patches import PATCH_CONTENT_TYPES, apply_patch
from .rbac import RbacAuthorizer, install_bootstrap_policy
from .resources import CRD_KEY, ResourceType
from .stats import ApiStats
from .store import Store, Watch
from .tls import ServingCertificate

SERVER_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-eks-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.22.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
DEFAULT_WATCH_SECONDS = 1800
log = logging.getLogger("sim.kube.server")
_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Sort key putting the version Kubernetes prefers first (GA > beta > alpha, newer first)."""
    match = _VERSION_RE.match(version)
    if not match:
        return (0, 0, 0)
    major, stage, minor = match.groups()
    stage_rank = {"alpha": 1, "beta": 2}.get(stage or "", 3)
    return (-stage_rank, -int(major), -int(minor or 0))


class _Request:
    """A parsed API path: which resource, namespace, name and subresource."""

    def __init__(
        self, rt: ResourceType, namespace: str | None, name: str | None, sub: str | None, legacy_watch: bool
    ) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.sub = sub
        self.legacy_watch = legacy_watch


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without this, Nagle + delayed ACK add 40 ms a call.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature fixed by the base class
        """Quiet: one line per request would drown the logs at scale."""

    # ------------------------------------------------------------ plumbing

    def _send(self, status: int, body: bytes | str, headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if "Cache-Control" not in (headers or {}):
            self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for warning in self._warnings:
            self.send_header("Warning", fieldvalidation.warning_header(warning))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj, separators=(",", ":")))

    def _error(self, error: ApiError) -> None:
        self._send(error.status, json.dumps(error.to_status()), error.headers)

    def _read_body(self) -> bytes:
        """Read the whole request body first, so an early error leaves the connection reusable."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        return self.rfile.read(length) if length > 0 else b""

    def _body(self) -> Any:
        raw = self._raw_body
        if not raw.strip():
            return None
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            if "yaml" in content_type:
                # As the API server's decoder (sigs.k8s.io/yaml): alias bombs, keys given twice and
                # absurd nesting are refused, not expanded.
                return boundedyaml.load(raw.decode("utf-8"))
            return json.loads(raw)
        except (ValueError, ImportError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the request body is not valid {content_type or 'JSON'}: {exc}") from exc

    def _dispatch(self) -> None:
        self._warnings: list[str] = []
        self._raw_body = self._read_body()
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        path = parts.path.rstrip("/") or "/"
        try:
            if path.startswith("/sim/v1"):
                self._control(path, query)
                return
            user = authenticate(self.headers.get("Authorization"), path, self.server.tokens)
            try:
                self.server.authorizer.authorize(user, request_attributes(self.command, parts.path, query))
            except ApiError as denied:
                # In sim.log, so a grant the manifest lacks is found without reading every client's errors.
                log.warning("RBAC denied %s %s: %s", self.command, parts.path, denied.message)
                raise
            if self._discovery(path):
                return
            if self._review(path, user):
                return
            request = self._parse_path(path)
            self._resource(request, query)
        except ApiError as error:
            self._error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # the server must answer, as the real one does, with a Status
            self._error(ApiError(500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}"))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

    # ------------------------------------------------------------ discovery

    def _discovery(self, path: str) -> bool:
        if self.command not in ("GET", "HEAD"):
            return False
        store = self.server.store
        if path in ("/healthz", "/livez", "/readyz"):
            self._send(200, "ok")
        elif path == "/version":
            self._json(200, SERVER_VERSION)
        elif path == "/openapi/v2" or path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            self._openapi(path)
        elif path == "/api":
            self._json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.server.server_address[0]}:{self.server.server_address[1]}"}
            ]})
        elif path == "/api/v1":
            self._json(200, self._resource_list("", "v1"))
        elif path == "/apis":
            served = {**store.registry.group_versions(), **reviews.groups()}
            groups = [self._group(g, vs) for g, vs in sorted(served.items()) if g]
            self._json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif re.fullmatch(r"/apis/[^/]+", path):
            group = path.split("/")[2]
            versions = store.registry.group_versions().get(group) or reviews.groups().get(group)
            if not versions:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self._json(200, {"apiVersion": "v1", **self._group(group, versions)})
        elif re.fullmatch(r"/apis/[^/]+/[^/]+", path):
            _, _, group, version = path.split("/")
            review_resources = reviews.resource_list(group, version)
            if review_resources is not None:
                self._json(200, review_resources)
                return True
            if not store.registry.in_group_version(group, version):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self._json(200, self._resource_list(group, version))
        else:
            return False
        return True

    def _openapi(self, path: str) -> None:
        documents = self.server.openapi
        if path == "/openapi/v2":
            accept = self.headers.get("Accept") or "application/json"
            if not any(m.split(";")[0].strip() in ("application/json", "*/*", "application/*")
                       for m in accept.split(",")):
                # sim has no protobuf encoding; clients that accept JSON (kubectl falls back to v3) get it.
                raise ApiError(406, "NotAcceptable",
                               "only the following media types are accepted: application/json")
            self._send(200, documents.v2_document())
            return
        if path == "/openapi/v3":
            self._send(200, documents.v3_index())
            return
        parts = path.removeprefix("/openapi/v3/").split("/")
        group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
            (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("", ""))
        document = documents.v3_document(group, version) if version else None
        if document is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        # Addressed by hash, the document never changes: clients may cache it (kube-apiserver does the same).
        self._send(200, document, {"Cache-Control": "public, immutable"} if "hash=" in self.path else None)

    def _review(self, path: str, user: User) -> bool:
        """Answer an access or identity review (`reviews`): nothing is stored, only decided."""
        found = reviews.review_path(path)
        if found is None:
            return False
        if self.command != "POST":
            raise errors.method_not_allowed()
        group, version, plural, namespace = found
        self.server.stats.add(plural, "create", requests=1)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = reviews.decode_protobuf(self._raw_body, plural) if content_type == reviews.PROTOBUF else self._body()
        answer = reviews.review(self.server.authorizer, user, self.server.tokens, group, version, plural, namespace,
                                body)
        self._json(201, answer)
        return True

    @staticmethod
    def _group(group: str, versions: list[str]) -> dict[str, Any]:
        ordered = sorted(versions, key=version_priority)
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered]
        return {"kind": "APIGroup", "name": group, "versions": entries, "preferredVersion": entries[0]}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources = []
        all_verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        for rt in sorted(self.server.store.registry.in_group_version(group, version), key=lambda r: r.plural):
            entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced, "kind": rt.kind,
                     "verbs": all_verbs}
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            resources.append(entry)
            if rt.has_status:
                resources.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                                  "kind": rt.kind, "verbs": ["get", "patch", "update"]})
            for sub in rt.extra_subresources:
                kinds = {"binding": ("", "v1", "Binding"), "eviction": ("policy", "v1", "Eviction"),
                         "scale": ("autoscaling", "v1", "Scale")}
                sub_group, sub_version, sub_kind = kinds[sub]
                verbs = ["create"] if sub in ("binding", "eviction") else ["get", "patch", "update"]
                resources.append({"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                                  "group": sub_group, "version": sub_version, "kind": sub_kind, "verbs": verbs})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # ------------------------------------------------------------ resources

    def _parse_path(self, path: str) -> _Request:
        segments = [s for s in path.split("/") if s]
        if segments[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segments[2:]
        elif len(segments) >= 3 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        legacy_watch = bool(rest) and rest[0] == "watch"
        if legacy_watch:
            rest = rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if group == "" and rest[0] == "bindings" and namespace:
            return _Request(self.server.store.resource("v1/pods"), namespace, None, "bindings", False)
        rt = self.server.store.registry.lookup(group, version, rest[0])
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        allowed_subs = (("status",) if rt.has_status else ()) + rt.extra_subresources
        if sub is not None and sub not in allowed_subs:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and namespace is None and name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _Request(rt, namespace if rt.namespaced else None, name, sub, legacy_watch)

    def _verb(self, request: _Request, query: dict[str, str]) -> str:
        method = self.command
        if method in ("GET", "HEAD"):
            if request.legacy_watch or query_bool(query.get("watch")):
                return "watch"
            return "get" if request.name else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        return "delete" if request.name else "deletecollection"

    def _resource(self, request: _Request, query: dict[str, str]) -> None:
        verb = self._verb(request, query)
        resource_name = request.rt.plural + (f"/{request.sub}" if request.sub else "")
        rule = self.server.faults.pick(verb, resource_name)
        if rule is not None:
            if rule.kind == "timeout":
                time.sleep(rule.delay_seconds)
                self.close_connection = True  # no answer at all: the connection just ends
                return
            raise fault_error(rule, request.rt.plural, request.name or "")
        if request.sub in ("binding", "bindings", "eviction") and verb != "create":
            raise errors.method_not_allowed()
        self.server.stats.add(resource_name, verb, requests=1)
        handler = getattr(self, f"_do_{verb}")
        handler(request, query)

    def _dry_run(self, query: dict[str, str], body: Any = None) -> bool:
        if query.get("dryRun") == "All":
            return True
        return isinstance(body, dict) and body.get("dryRun") == ["All"]

    def _do_get(self, request: _Request, query: dict[str, str]) -> None:
        store = self.server.store
        obj = store.get(request.rt.key, request.name or "", request.namespace)
        if request.sub == "scale":
            self._json(200, _scale_of(obj))
            return
        table_version = tables.wants_table(self.headers.get("Accept")) if request.sub is None else None
        if table_version:
            list_meta = {"resourceVersion": meta(obj).get("resourceVersion", "")}
            self._json(200, self._table(request.rt, [obj], list_meta, query, table_version))
            return
        self._json(200, obj)

    def _table(self, rt: ResourceType, objects: list[dict[str, Any]], list_meta: dict[str, Any],
               query: dict[str, str], api_version: str) -> dict[str, Any]:
        return tables.table(rt.group, rt.kind, objects, self.server.store.clock.now(), list_meta,
                            query.get("includeObject") or "Metadata", api_version, rt.printer_columns)

    def _do_list(self, request: _Request, query: dict[str, str]) -> None:
        try:
            limit = int(query.get("limit") or 0)
        except ValueError as exc:
            raise errors.bad_request(f"limit: invalid value {query.get('limit')!r}: must be an integer") from exc
        from_cache = self._list_read(query, limit)
        texts, rv, token, remaining = self.server.store.list_page(
            request.rt.key,
            request.namespace,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            limit=max(0, limit),
            continue_token=query.get("continue", ""),
        )
        list_meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            list_meta["continue"] = token
        if remaining is not None:
            list_meta["remainingItemCount"] = remaining
        table_version = tables.wants_table(self.headers.get("Accept"))
        if table_version:
            objects = [json.loads(text) for text in texts]
            self._json(200, self._table(request.rt, objects, list_meta, query, table_version))
            return
        head = json.dumps(
            {"kind": f"{request.rt.kind}List", "apiVersion": request.rt.api_version, "metadata": list_meta},
            separators=(",", ":"),
        )
        body = head[:-1] + ',"items":[' + ",".join(texts) + "]}"
        self._send(200, body)
        first_page = not query.get("continue")
        selected = bool(query.get("labelSelector") or query.get("fieldSelector"))
        self.server.stats.add(
            request.rt.plural, "list", pages=1, objects=len(texts), bytes=len(body), fromCache=int(from_cache),
            fullLists=int(first_page and not selected and not request.namespace),
        )

    def _list_read(self, query: dict[str, str], limit: int) -> bool:
        """Hold a list's resourceVersion and resourceVersionMatch to kube-apiserver's rules; True when
        the real server would answer from its watch cache ("Any" or "Not older than" reads).

        sim serves every read from its one current state: that is always at least as new as asked. An
        exact read of an older version is answered 410 Gone (sim keeps no past snapshots), as the real
        server does once the version is compacted.
        """
        rv = query.get("resourceVersion", "")
        match = query.get("resourceVersionMatch", "")
        if match not in ("", "Exact", "NotOlderThan"):
            raise errors.bad_request(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"'
            )
        if match and not rv:
            raise errors.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if match and query.get("continue"):
            raise errors.bad_request("resourceVersionMatch is forbidden when continue is provided")
        if match == "Exact" and rv == "0":
            raise errors.bad_request('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        if query.get("continue") and rv not in ("", "0"):
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        if rv in ("", "0"):
            return rv == "0"
        try:
            asked = int(rv)
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version "{rv}"') from exc
        current = int(self.server.store.resource_version)
        if asked > current:
            raise errors.too_large_resource_version(asked, current)
        exact = match == "Exact" or (not match and limit > 0)
        if exact and asked != current:
            raise errors.gone(f"too old resource version: {asked} ({current})")
        return not exact

    def _do_watch(self, request: _Request, query: dict[str, str]) -> None:
        field_selector = query.get("fieldSelector", "")
        if request.name:
            name_selector = f"metadata.name={request.name}"
            field_selector = f"{field_selector},{name_selector}" if field_selector else name_selector
        try:
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        except ValueError as exc:
            raise errors.bad_request("timeoutSeconds: must be a number") from exc
        rv = query.get("resourceVersion") or None
        gone: ApiError | None = None
        watch: Watch | None = None
        try:
            watch = self.server.store.watch(
                request.rt.key, request.namespace, query.get("labelSelector", ""), field_selector, rv
            )
        except ApiError as error:
            if error.status != 410:
                raise
            gone = error
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        if gone is not None or watch is None:
            self._chunk(json.dumps({"type": "ERROR", "object": gone.to_status() if gone else {}}) + "\n")
            self._chunk("")
            return
        self.server.track(watch)
        bookmarks = query_bool(query.get("allowWatchBookmarks"))
        deadline = time.monotonic() + timeout
        last_bookmark = time.monotonic()
        try:
            while not watch.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                item = watch.next_raw(timeout=min(remaining, 1.0))
                if item is None:
                    if watch.closed or self._client_gone():
                        break
                    if bookmarks and time.monotonic() - last_bookmark > 10:
                        last_bookmark = time.monotonic()
                        mark = self._bookmark(request.rt, watch)
                        if mark:
                            self._chunk(mark)
                            self.server.stats.add(request.rt.plural, "watch", bookmarks=1, bytes=len(mark))
                    continue
                event_type, obj = item
                line = '{"type":"' + event_type + '","object":' + json.dumps(obj, separators=(",", ":")) + "}\n"
                self._chunk(line)
                self.server.stats.add(request.rt.plural, "watch", events=1, bytes=len(line))
            self._chunk("")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            watch.close()
            self.server.untrack(watch)

    def _bookmark(self, rt: ResourceType, watch: Watch) -> str:
        """A bookmark at the store's version, or "" when an event is still queued for this watch (the
        bookmark would claim a version whose event the client has not had yet)."""
        with self.server.store.lock:
            if not watch.idle():
                return ""
            version = self.server.store.resource_version
        obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"resourceVersion": version}}
        return json.dumps({"type": "BOOKMARK", "object": obj}) + "\n"

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        if isinstance(self.connection, ssl.SSLSocket):
            # TLS cannot peek; a client says nothing more on a watch's connection but its close.
            return True
        try:
            return self.connection.recv(1, 0x2) == b""  # MSG_PEEK: EOF means the client hung up
        except OSError:
            return True

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _evict(self, name: str, namespace: str, body: Any) -> None:
        """The eviction subresource; a real request (not a dry run) is told to the drain record with its answer."""
        store, audit = self.server.store, self.server.audit
        dry_run = ((body or {}).get("deleteOptions") or {}).get("dryRun") == ["All"]
        pod = store.peek("v1/pods", name, namespace)
        node = ((pod or {}).get("spec") or {}).get("nodeName")
        asked = store.clock.elapsed()  # when the request came, before the pod it removes is gone
        try:
            answer = evict(store, name, namespace, body)
        except ApiError as error:
            if audit is not None and not dry_run:
                audit.eviction(node, namespace, name, error.status, asked)
            raise
        if audit is not None and not dry_run:
            audit.eviction(node, namespace, name, 201, asked)
        self._json(201, answer)

    def _do_create(self, request: _Request, query: dict[str, str]) -> None:
        store = self.server.store
        body = self._body()
        if request.sub == "bindings" or request.sub == "binding":
            self._bind(request, body)
            return
        if request.sub == "eviction":
            if request.name is None:
                raise errors.method_not_allowed()
            if self._dry_run(query):
                body = dict(body or {})
                body["deleteOptions"] = {**(body.get("deleteOptions") or {}), "dryRun": ["All"]}
            self._evict(request.name, request.namespace or "default", body)
            return
        if request.name is not None:
            raise errors.method_not_allowed()
        if body is None:
            raise errors.bad_request(f"the request body must be a {request.rt.kind} object")
        self._validate_fields(request.rt, body, query, "create")
        created = store.create(request.rt.key, body, request.namespace, dry_run=self._dry_run(query))
        self._json(201, created)

    def _validate_fields(self, rt: ResourceType, body: Any, query: dict[str, str], verb: str) -> None:
        """Honour `fieldValidation`: refuse (Strict) or warn about (Warn) fields the kind's schema lacks."""
        validation = fieldvalidation.mode(query)
        if validation in (None, "Ignore") or not isinstance(body, dict):
            return
        found = self.server.openapi.schema_for(rt)
        if found is None:
            return
        schema, components = found
        fields = fieldvalidation.unknown_fields(body, schema, components, patch=verb in ("patch", "apply"))
        self._warnings += fieldvalidation.check(rt.kind, rt.version, fields, validation, verb)

    def _bind(self, request: _Request, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
            raise errors.invalid("Binding", "", request.name or "", "target", "Required value")
        target = body["target"]
        if target.get("kind", "Node") != "Node" or not target.get("name"):
            raise errors.invalid("Binding", "", request.name or "", "target.name", "Required value: must name a Node")
        pod_name = request.name or meta(body).get("name")
        if not pod_name:
            raise errors.invalid("Binding", "", "", "metadata.name", "Required value")
        self.server.store.bind(pod_name, request.namespace or "default", target["name"])
        self._json(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    def _do_update(self, request: _Request, query: dict[str, str]) -> None:
        store = self.server.store
        body = self._body()
        if request.name is None:
            raise errors.method_not_allowed()
        if not isinstance(body, dict):
            raise errors.bad_request(f"the request body must be a {request.rt.kind} object")
        if request.sub == "scale":
            replicas = (body.get("spec") or {}).get("replicas")
            self._json(200, self._set_scale(request, replicas, query))
            return
        if meta(body).get("name") not in (None, request.name):
            raise errors.bad_request(
                f"the name of the object ({meta(body).get('name')}) does not match the name on the URL ({request.name})"
            )
        self._validate_fields(request.rt, body, query, "update")
        body.setdefault("metadata", {})["name"] = request.name
        updated = store.update(
            request.rt.key, body, request.namespace, dry_run=self._dry_run(query), subresource=request.sub
        )
        self._json(200, updated)

    def _set_scale(self, request: _Request, replicas: Any, query: dict[str, str]) -> dict[str, Any]:
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("Scale", "autoscaling", request.name or "", "spec.replicas",
                                 f"Invalid value: {replicas!r}: must be greater than or equal to 0")
        updated = self.server.store.patch(
            request.rt.key, request.name or "", {"spec": {"replicas": replicas}}, request.namespace,
            dry_run=self._dry_run(query),
        )
        return _scale_of(updated)

    def _do_patch(self, request: _Request, query: dict[str, str]) -> None:
        store = self.server.store
        if request.name is None:
            raise errors.method_not_allowed()
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch_type = PATCH_CONTENT_TYPES.get(content_type)
        if patch_type is None:
            raise ApiError(
                415, "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(PATCH_CONTENT_TYPES)}",
            )
        body = self._body()
        if request.sub is None and patch_type != "json":
            self._validate_fields(request.rt, body, query, "apply" if patch_type == "apply" else "patch")
        if request.sub == "scale":
            current = _scale_of(store.get(request.rt.key, request.name, request.namespace))
            patched = apply_patch(current, body, "merge" if patch_type == "strategic" else patch_type)
            self._json(200, self._set_scale(request, (patched.get("spec") or {}).get("replicas"), query))
            return
        if patch_type == "apply" and store.peek(request.rt.key, request.name, request.namespace) is None:
            body = dict(body or {})
            body.setdefault("metadata", {})["name"] = request.name
            self._json(201, store.create(request.rt.key, body, request.namespace, dry_run=self._dry_run(query)))
            return
        patched = store.patch(
            request.rt.key, request.name, body, request.namespace, patch_type,
            subresource=request.sub, dry_run=self._dry_run(query),
        )
        self._json(200, patched)

    def _delete_options(self, query: dict[str, str]) -> dict[str, Any]:
        body = self._body()
        options = body if isinstance(body, dict) else {}
        grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        if grace is not None:
            try:
                grace = int(grace)
            except (TypeError, ValueError) as exc:
                raise errors.bad_request(f"gracePeriodSeconds: invalid value {grace!r}: must be an integer") from exc
        policy = query.get("propagationPolicy") or options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is True:
            policy = "Orphan"
        return {
            "grace_period_seconds": grace,
            "propagation_policy": policy,
            "preconditions": options.get("preconditions"),
            "dry_run": self._dry_run(query, options),
        }

    def _do_delete(self, request: _Request, query: dict[str, str]) -> None:
        options = self._delete_options(query)
        deleted = self.server.store.delete(request.rt.key, request.name or "", request.namespace, **options)
        self._json(200, deleted)

    def _do_deletecollection(self, request: _Request, query: dict[str, str]) -> None:
        options = self._delete_options(query)
        store = self.server.store
        items = store.list(
            request.rt.key, request.namespace, query.get("labelSelector", ""), query.get("fieldSelector", "")
        )
        deleted = []
        for item in items:
            try:
                deleted.append(store.delete(request.rt.key, meta(item)["name"], meta(item).get("namespace"), **options))
            except ApiError as error:
                if error.status != 404:
                    raise
        self._json(200, {"kind": f"{request.rt.kind}List", "apiVersion": request.rt.api_version,
                         "metadata": {"resourceVersion": store.resource_version}, "items": deleted})

    # ------------------------------------------------------------ control API

    def _control(self, path: str, query: dict[str, str]) -> None:
        clock = self.server.store.clock
        faults = self.server.faults
        if path == "/sim/v1/clock" and self.command == "GET":
            self._json(200, {"now": clock.timestamp(), "elapsedSeconds": clock.elapsed(), "speed": clock.speed})
        elif path == "/sim/v1/clock/advance" and self.command == "POST":
            body = self._body()
            seconds = body.get("seconds") if isinstance(body, dict) else None
            if not isinstance(seconds, int | float) or seconds < 0:
                raise errors.bad_request('body must be {"seconds": N} with N a number >= 0')
            clock.advance(float(seconds))
            self._json(200, {"now": clock.timestamp(), "elapsedSeconds": clock.elapsed(), "speed": clock.speed})
        elif path == "/sim/v1/stats":
            if self.command == "GET":
                self._json(200, self.server.stats.report())
            elif self.command == "DELETE":
                self._json(200, self.server.stats.reset())
            else:
                raise errors.method_not_allowed()
        elif path == "/sim/v1/faults":
            if self.command == "GET":
                self._json(200, faults.report())
            elif self.command == "POST":
                try:
                    self._json(201, faults.add(self._body()))
                except FaultSpecError as exc:
                    raise errors.bad_request(f"invalid fault: {exc}") from exc
            elif self.command == "DELETE":
                faults.clear()
                self._json(200, faults.report())
            else:
                raise errors.method_not_allowed()
        elif path in self.server.controls:
            self._json(200, self.server.controls[path](self.command, self._body()))
        else:
            raise ApiError(404, "NotFound", f"no control endpoint {self.command} {path}")


def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = meta(obj)
    selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: metadata[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                     if k in metadata},
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        },
    }


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], store: Store, tokens: dict[str, User],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        if tls is not None:
            # The handshake happens in the request's thread (`finish_request`), not in the accept loop.
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        self.store = store
        self.tokens = tokens
        self.authorizer = RbacAuthorizer(store)
        self.faults = FaultInjector()
        self.stats = ApiStats()
        self.audit: DrainAudit | None = None  # the drain record, once the environment starts one
        # More control endpoints (path -> handler(method, body) -> answer), from the environment's other parts.
        self.controls: dict[str, Callable[[str, Any], Any]] = {}
        self.openapi = OpenApiDocuments(store.registry.all, lambda: store.snapshot(CRD_KEY))
        self._watches: set[Watch] = set()
        self._watch_lock = threading.Lock()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.do_handshake()
            except (OSError, ValueError):
                return  # a client that does not complete the handshake gets nothing
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-request are normal (timeouts, stopped watches): no traceback.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def track(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.add(watch)

    def untrack(self, watch: Watch) -> None:
        with self._watch_lock:
            self._watches.discard(watch)

    def close_watches(self) -> None:
        with self._watch_lock:
            watches = list(self._watches)
        for watch in watches:
            watch.close()


class KubeServer:
    """Serves `store` over HTTP on `host:port` (port 0 picks a free one) from a background thread.

    `tokens` maps each bearer token to its user (default: the admin's and the functions'). Like
    kube-apiserver at start-up, it puts the default ClusterRoles and bindings (cluster-admin,
    system:discovery, system:basic-user, system:public-info-viewer) in the store.

    With `tls` (a serving certificate), the same API is also served over HTTPS on a second port
    (`secure_url`): kubectl sends a kubeconfig's token only over TLS. Both listeners share the store,
    the tokens, the authorizer and the fault injector.
    """

    def __init__(
        self, store: Store, host: str = "127.0.0.1", port: int = 0, tokens: dict[str, User] | None = None,
        tls: ServingCertificate | None = None,
    ) -> None:
        self.store = store
        install_bootstrap_policy(store)
        users = dict(TOKENS if tokens is None else tokens)
        self._httpd = _HTTPServer((host, port), store, users)
        self._secure: _HTTPServer | None = None
        if tls is not None:
            self._secure = _HTTPServer((host, 0), store, users, tls.server_context())
            self._secure.authorizer = self._httpd.authorizer
            self._secure.faults = self._httpd.faults
            self._secure.stats = self._httpd.stats
            self._secure.controls = self._httpd.controls
            self._secure.openapi = self._httpd.openapi
        self._threads: list[threading.Thread] = []

    def record_drains(self, audit: DrainAudit) -> None:
        """Tell ``audit`` every eviction request either listener answers."""
        for httpd in (self._httpd, self._secure):
            if httpd is not None:
                httpd.audit = audit

    def add_control(self, path: str, handler: Callable[[str, Any], Any]) -> None:
        """Serve ``handler(method, body) -> answer`` (JSON, 200) at the control path ``path`` (``/sim/v1/...``);
        it raises ApiError for a request it refuses."""
        self._httpd.controls[path] = handler

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def secure_url(self) -> str | None:
        """The HTTPS listener's URL, when the server has one."""
        if self._secure is None:
            return None
        host, port = self._secure.server_address[:2]
        return f"https://{host}:{port}"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def faults(self) -> FaultInjector:
        return self._httpd.faults

    @property
    def stats(self) -> ApiStats:
        """What the API served (both listeners), as `GET /sim/v1/stats` reports it."""
        return self._httpd.stats

    def _servers(self) -> list[_HTTPServer]:
        return [self._httpd] + ([self._secure] if self._secure is not None else [])

    def start(self) -> KubeServer:
        if not self._threads:
            for n, httpd in enumerate(self._servers()):
                thread = threading.Thread(
                    target=httpd.serve_forever, kwargs={"poll_interval": 0.2},
                    name="sim-kube-api" + ("-tls" if n else ""), daemon=True,
                )
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> None:
        for httpd in self._servers():
            httpd.close_watches()
        if self._threads:
            for httpd in self._servers():
                httpd.shutdown()
            for thread in self._threads:
                thread.join(timeout=5)
            self._threads = []
        for httpd in self._servers():
            httpd.server_close()

    def __enter__(self) -> KubeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

