"""The functions' RBAC, applied at deploy and removed at destroy by the stack's custom resource.

    load(path) -> documents            the manifest (infra/manifests/rbac.yaml, bundled with the function)
    apply(api, documents) -> names     server-side apply of each object, in the file's order
    remove(api, documents) -> names    delete each object (bindings first), what is gone already is fine

A new access entry takes a few seconds to reach the API server's authorizer, so a 401 or 403 is tried
again until `wait_seconds` have passed; any other refusal, and one that outlasts the wait, raises with
the server's message (the custom resource then fails and CloudFormation rolls back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes.client.exceptions import ApiException

from ..config import boundedyaml
from ..k8s import manifests
from ..k8s.http import ApiClient
from ..k8s.raw import status_message

log = logging.getLogger(__name__)

ACCESS_WAIT_SECONDS = 120.0
RETRY_SECONDS = 5.0
_NOT_YET_ALLOWED = (401, 403)
T = TypeVar("T")


class RbacError(RuntimeError):
    """The RBAC could not be applied or removed; the message names the object and the server's answer."""


def load(path: Path) -> list[dict[str, Any]]:
    """The manifest's documents, each checked to be a kind `nodescale.k8s.manifests` applies."""
    try:
        documents = [d for d in boundedyaml.load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise RbacError(f"cannot read the RBAC manifest {path}: {exc}") from None
    for index, doc in enumerate(documents):
        try:
            manifests.object_path(doc)
        except manifests.ManifestError as exc:
            raise RbacError(f"{path} document {index}: {exc}") from None
    if not documents:
        raise RbacError(f"{path} holds no object")
    return documents


def apply(api: ApiClient, documents: list[dict[str, Any]], wait_seconds: float = ACCESS_WAIT_SECONDS,
          sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Apply every object; returns `Kind/name` of each."""
    deadline = time.monotonic() + wait_seconds
    applied = []
    for doc in documents:
        _until_allowed(lambda d=doc: manifests.apply(api, d), manifests.describe(doc), "apply", deadline, sleep)
        applied.append(manifests.describe(doc))
    log.info("RBAC applied", extra={"objects": applied})
    return applied


def remove(api: ApiClient, documents: list[dict[str, Any]], wait_seconds: float = ACCESS_WAIT_SECONDS,
           sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Delete every object, bindings before the roles they grant; returns `Kind/name` of those deleted."""
    deadline = time.monotonic() + wait_seconds
    removed = []
    for doc in sorted(documents, key=lambda d: 0 if str(d.get("kind", "")).endswith("Binding") else 1):
        if _until_allowed(lambda d=doc: manifests.delete(api, d), manifests.describe(doc), "delete", deadline, sleep):
            removed.append(manifests.describe(doc))
    log.info("RBAC removed", extra={"objects": removed})
    return removed


def _until_allowed(call: Callable[[], T], what: str, verb: str, deadline: float,
                   sleep: Callable[[float], None]) -> T:
    while True:
        try:
            return call()
        except ApiException as exc:
            if exc.status in _NOT_YET_ALLOWED and time.monotonic() < deadline:
                log.warning("not allowed yet; the access entry may still be propagating",
                            extra={"object": what, "status": exc.status})
                sleep(RETRY_SECONDS)
                continue
            raise RbacError(f"{verb} {what}: {exc.status} {status_message(exc)}") from None
