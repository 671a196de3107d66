"""Kubernetes events (core/v1) on nodes and pods, so `kubectl describe` tells what nodescale did.

Repeats are folded the way the kubelet's recorder folds them, but without memory in the process:
the event's name is derived from the object and the reason, so a later invocation finds the same
Event and bumps its count (or leaves it alone inside the de-duplication window) instead of adding
another one.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import clock as clock_module
from ..model.node import ClusterNode
from .http import ApiClient
from .nodes import parse_time
from .raw import MERGE_PATCH, path_segment, request_json

COMPONENT = "nodescale"
NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024
# Events of cluster-scoped objects (nodes) live here, as kubectl and the kubelet put them.
CLUSTER_SCOPED_NAMESPACE = "default"

NODECLAIM_API_VERSION = "karpenter.sh/v1"

CREATED = "created"
COUNTED = "counted"
SKIPPED = "skipped"
DROPPED = "dropped"  # over the recorder's limit for the reason: not written


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @classmethod
    def of(cls, obj: Mapping[str, Any], kind: str | None = None) -> ObjectRef:
        meta = obj.get("metadata") or {}
        kind = kind or obj.get("kind") or ""
        if not kind:
            raise ValueError("event target: the object has no kind; pass kind='Pod' or kind='Node'")
        return cls(kind, meta.get("name") or "", meta.get("namespace") or "", meta.get("uid") or "",
                   obj.get("apiVersion") or "v1")

    @classmethod
    def node(cls, name: str, uid: str = "") -> ObjectRef:
        return cls("Node", name, "", uid)

    @classmethod
    def pod(cls, namespace: str, name: str, uid: str = "") -> ObjectRef:
        return cls("Pod", name, namespace, uid)

    @classmethod
    def nodeclaim(cls, name: str, uid: str = "") -> ObjectRef:
        return cls("NodeClaim", name, "", uid, NODECLAIM_API_VERSION)

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "name": self.name, "apiVersion": self.api_version}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


def claim_of(claims: Iterable[Mapping[str, Any]] | None, node: str, provider_id: str = "") -> ObjectRef | None:
    """The NodeClaim of a node, found as Karpenter links them (status.nodeName, else status.providerID);
    None without one, so the node's event goes alone as Karpenter's does when it has no NodeClaim."""
    for claim in claims or ():
        status = claim.get("status") or {}
        meta = claim.get("metadata") or {}
        if status.get("nodeName") == node or (provider_id and status.get("providerID") == provider_id):
            return ObjectRef.nodeclaim(meta.get("name") or "", meta.get("uid") or "")
    return None


def claim_of_node(claims: Iterable[Mapping[str, Any]] | None, node: ClusterNode) -> ObjectRef | None:
    return claim_of(claims, node.name, str((node.raw.get("spec") or {}).get("providerID") or ""))


def event_name(ref: ObjectRef, reason: str) -> str:
    """Stable per object (by uid when known) and reason; a valid name however long the object's is."""
    digest = hashlib.sha256(f"{ref.kind}/{ref.namespace}/{ref.name}/{ref.uid}/{reason}".encode()).hexdigest()[:16]
    return f"{ref.name[:200]}.{digest}"


class EventRecorder:
    """Writes events for one component; `dedupe_seconds` is the window in which a repeat adds nothing.

    `on_repeat` decides what a repeat inside the window does: "skip" (leave the event as it is) or
    "count" (bump its count and last time). Outside the window a repeat always bumps the count and
    takes the new message.

    `limit_per_reason` caps the events one recorder writes for each reason; the rest are dropped (counted in
    `dropped`), as client-go's recorder drops what does not fit its queue of 1,000 events: a launch for
    100,000 pods must not cost the API server 100,000 writes in one invocation.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        component: str = COMPONENT,
        dedupe_seconds: float = 60.0,
        on_repeat: str = "skip",
        instance: str | None = None,
        clock: Callable[[], float] = clock_module.epoch,
        limit_per_reason: int | None = None,
    ) -> None:
        if on_repeat not in ("skip", "count"):
            raise ValueError(f"on_repeat={on_repeat!r}: allowed are 'skip' and 'count'")
        if limit_per_reason is not None and limit_per_reason < 0:
            raise ValueError(f"limit_per_reason={limit_per_reason}: allowed is 0 or more, or None for no limit")
        self.limit_per_reason = limit_per_reason
        self.written: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.api = api
        self.component = component
        self.dedupe_seconds = dedupe_seconds
        self.on_repeat = on_repeat
        self.instance = instance or os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or socket.gethostname()
        self.clock = clock

    def record(
        self, ref: ObjectRef, reason: str, message: str, type_: str = NORMAL, action: str = "",
        related: ObjectRef | None = None,
    ) -> str:
        """Create or fold the event; returns "created", "counted", "skipped" or "dropped" (over the limit).

        ``related`` is the event's secondary object (core/v1 ``related``): what a reader takes the event to
        be about, so none has to parse it out of the message."""
        if type_ not in (NORMAL, WARNING):
            raise ValueError(f"event type {type_!r}: allowed are {NORMAL!r} and {WARNING!r}")
        if self.limit_per_reason is not None and self.written.get(reason, 0) >= self.limit_per_reason:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            return DROPPED
        self.written[reason] = self.written.get(reason, 0) + 1
        namespace = ref.namespace or CLUSTER_SCOPED_NAMESPACE
        name = event_name(ref, reason)
        now = self._timestamp()
        message = message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref.to_dict(),
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance[:128],
            "action": action or reason,
        }
        if related is not None:
            body["related"] = related.to_dict()
        base = f"/api/v1/namespaces/{path_segment(namespace)}/events"
        try:
            request_json(self.api, "POST", base, body=body)
            return CREATED
        except ApiException as exc:
            if exc.status != 409:
                raise
        return self._fold(f"{base}/{path_segment(name)}", body, now)

    def _fold(self, path: str, body: dict[str, Any], now: str) -> str:
        try:
            existing = request_json(self.api, "GET", path)
        except ApiException as exc:
            if exc.status == 404:
                # Expired between our create and get: the next call creates it afresh.
                request_json(self.api, "POST", path.rsplit("/", 1)[0], body=body)
                return CREATED
            raise
        last = parse_time(existing.get("lastTimestamp") or existing.get("firstTimestamp"))
        recent = last is not None and self.clock() - last.timestamp() < self.dedupe_seconds
        if recent and self.on_repeat == "skip":
            return SKIPPED
        patch: dict[str, Any] = {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": now}
        if not recent:
            patch["message"] = body["message"]
            patch["type"] = body["type"]
            # The secondary object goes with the message it explains (null clears one no longer meant).
            if "related" in body or existing.get("related"):
                patch["related"] = body.get("related")
        request_json(self.api, "PATCH", path, body=patch, content_type=MERGE_PATCH)
        return COUNTED

    def node(self, name: str, reason: str, message: str, type_: str = NORMAL, uid: str = "") -> str:
        return self.record(ObjectRef.node(name, uid), reason, message, type_)

    def node_and_claim(
        self, name: str, claim: ObjectRef | None, reason: str, message: str, type_: str = NORMAL, uid: str = "",
        claim_message: str | None = None,
    ) -> str:
        """The event on the Node and, when it has one, on its NodeClaim too, as Karpenter publishes both;
        ``claim_message`` where Karpenter words the NodeClaim's differently. Returns the Node's outcome."""
        out = self.node(name, reason, message, type_, uid)
        if claim is not None:
            self.record(claim, reason, message if claim_message is None else claim_message, type_)
        return out

    def pod(
        self, namespace: str, name: str, reason: str, message: str, type_: str = NORMAL, uid: str = "",
        related: ObjectRef | None = None,
    ) -> str:
        return self.record(ObjectRef.pod(namespace, name, uid), reason, message, type_, related=related)

    def _timestamp(self) -> str:
        return datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
