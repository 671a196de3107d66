"""karpenter.sh/v1 NodeClaims on the API server: create, list, patch metadata and status, delete.

Status goes through the status subresource (PATCH .../status), as Karpenter's controllers write it. A
cluster without the NodeClaim CRD answers 404 on the collection: ``NodeClaimsMissing`` says so, and the
caller launches without bookkeeping.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from ..scheduling import nodeclaim_manifest as ncm
from .http import ApiClient
from .listing import collection_path, list_objects
from .raw import MERGE_PATCH, path_segment, request_json

COLLECTION = collection_path(ncm.GROUP, ncm.VERSION, ncm.PLURAL)
_ALPHABET = string.ascii_lowercase + string.digits
SUFFIX_LENGTH = 5
_NAME_ATTEMPTS = 5


@dataclass
class State:
    """What one invocation learned: the CRD is missing (asked once), the owning NodePools' uids."""

    missing: bool = False
    owners: dict[str, str] = field(default_factory=dict)


class NodeClaimsMissing(Exception):
    """The cluster serves no karpenter.sh/v1 NodeClaims (the CRD is not installed)."""


def object_path(name: str) -> str:
    return f"{COLLECTION}/{path_segment(name)}"


def random_suffix() -> str:
    """Five lowercase letters and digits, as the API server's generateName adds."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(SUFFIX_LENGTH))


def create(api: ApiClient, manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Create the NodeClaim; another name is drawn when one is taken. Raises NodeClaimsMissing without the CRD."""
    body = dict(manifest)
    pool = str((manifest.get("metadata") or {}).get("name", "")).rsplit("-", 1)[0]
    for attempt in range(_NAME_ATTEMPTS):
        try:
            return request_json(api, "POST", COLLECTION, body=body)
        except ApiException as exc:
            if _missing(exc):
                raise NodeClaimsMissing(str(exc.reason)) from None
            if exc.status != 409 or attempt == _NAME_ATTEMPTS - 1:
                raise
            body = {**body, "metadata": {**body["metadata"], "name": ncm.claim_name(pool, random_suffix())}}
    raise AssertionError("unreachable")


def create_named(api: ApiClient, manifest: Mapping[str, Any]) -> bool:
    """Create the NodeClaim under its own name (#30.6's backfill); False when that name is taken. Raises
    NodeClaimsMissing without the CRD."""
    try:
        request_json(api, "POST", COLLECTION, body=dict(manifest))
    except ApiException as exc:
        if exc.status == 409:
            return False
        if _missing(exc):
            raise NodeClaimsMissing(str(exc.reason)) from None
        raise
    return True


def list_all(api: ApiClient) -> list[dict[str, Any]]:
    """Every NodeClaim. Raises NodeClaimsMissing without the CRD."""
    try:
        return list_objects(api, COLLECTION).items
    except ApiException as exc:
        if _missing(exc):
            raise NodeClaimsMissing(str(exc.reason)) from None
        raise


def get(api: ApiClient, name: str) -> dict[str, Any] | None:
    """The NodeClaim as it is now; None when it is gone."""
    try:
        return request_json(api, "GET", object_path(name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def patch_labels(api: ApiClient, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return request_json(api, "PATCH", object_path(name), body={"metadata": {"labels": dict(labels)}},
                        content_type=MERGE_PATCH)


def patch_annotations(api: ApiClient, name: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    return request_json(api, "PATCH", object_path(name), body={"metadata": {"annotations": dict(annotations)}},
                        content_type=MERGE_PATCH)


def patch_status(api: ApiClient, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``status`` through the status subresource (a list, like conditions, is replaced whole)."""
    return request_json(api, "PATCH", object_path(name) + "/status", body={"status": dict(status)},
                        content_type=MERGE_PATCH)


def delete(api: ApiClient, name: str) -> bool:
    """Remove the termination finalizer (nodescale owns it) and delete the NodeClaim; False when it is gone."""
    try:
        request_json(api, "PATCH", object_path(name), body={"metadata": {"finalizers": None}},
                     content_type=MERGE_PATCH)
        request_json(api, "DELETE", object_path(name))
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def _missing(exc: ApiException) -> bool:
    """A 404 on the collection: the API server does not serve the resource at all."""
    return exc.status == 404
