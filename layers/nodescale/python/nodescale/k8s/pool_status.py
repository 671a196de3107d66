"""Status of NodePools and EC2NodeClasses kept in the cluster (#30.2): read the v1 objects, write their status
through the status subresource (PATCH .../status, merge), as Karpenter's controllers do."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from .http import ApiClient
from .listing import collection_path, list_objects
from .raw import MERGE_PATCH, path_segment, request_json

NODEPOOLS = collection_path("karpenter.sh", "v1", "nodepools")
EC2NODECLASSES = collection_path("karpenter.k8s.aws", "v1", "ec2nodeclasses")


def list_v1(api: ApiClient, collection: str) -> list[dict[str, Any]]:
    """Every object of ``collection`` (NODEPOOLS or EC2NODECLASSES); none when its CRD is not installed."""
    try:
        return list_objects(api, collection).items
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise


def patch_status(api: ApiClient, collection: str, name: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``status`` through the status subresource (a list, like conditions, is replaced whole)."""
    return request_json(api, "PATCH", f"{collection}/{path_segment(name)}/status", body={"status": dict(status)},
                        content_type=MERGE_PATCH)
