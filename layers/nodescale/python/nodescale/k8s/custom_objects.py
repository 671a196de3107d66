"""Cluster-scoped custom objects (NodePools, node classes, overlays) as plain dicts.

The calls `nodepool_objects` and `scale_nodepool` make of the generated ``CustomObjectsApi``, with the
same names and arguments, sent through `raw`: the generated class needs the generated ``ApiClient`` and
pydantic, which a function's cold start leaves out (#32, cold start).
"""

from __future__ import annotations

from typing import Any

from .http import ApiClient
from .listing import collection_path
from .raw import MERGE_PATCH, path_segment, request_json


class CustomObjects:
    """``list``, ``get`` and merge-``patch`` of cluster-scoped custom objects; errors raise `ApiException`."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def list_cluster_custom_object(self, group: str, version: str, plural: str, limit: int | None = None,
                                   _continue: str | None = None) -> dict[str, Any]:
        query = {"limit": limit, "continue": _continue}
        return request_json(self.api, "GET", collection_path(group, version, plural), query)

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
        return request_json(self.api, "GET", f"{collection_path(group, version, plural)}/{path_segment(name)}")

    def patch_cluster_custom_object(self, group: str, version: str, plural: str, name: str,
                                    body: Any) -> dict[str, Any]:
        path = f"{collection_path(group, version, plural)}/{path_segment(name)}"
        return request_json(self.api, "PATCH", path, body=body, content_type=MERGE_PATCH)
