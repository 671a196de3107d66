"""The objects CapacityBuffers take their pod shape from: PodTemplates (podTemplateRef) and the
Deployments, StatefulSets and ReplicaSets a scalableRef names, read one by one (only those referenced)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes.client.exceptions import ApiException

from ..model.buffers import CapacityBuffer
from .http import ApiClient
from .raw import path_segment, request_json

_PLURALS = {"Deployment": "deployments", "StatefulSet": "statefulsets", "ReplicaSet": "replicasets"}


def read_buffer_sources(
    api: ApiClient, buffers: Iterable[CapacityBuffer]
) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str, str, str], dict[str, Any]]]:
    """(PodTemplates by (namespace, name), scalable objects by (namespace, apiGroup, kind, name)) that the
    active buffers reference. One missing (404) is absent, and the buffer says so; any other API error is
    raised: an unreadable template must not look like a buffer of nothing."""
    templates: dict[tuple[str, str], dict[str, Any]] = {}
    scalables: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for b in buffers:
        if not b.active:
            continue
        ns = path_segment(b.namespace)
        if b.pod_template is not None and (b.namespace, b.pod_template) not in templates:
            obj = _get(api, f"/api/v1/namespaces/{ns}/podtemplates/{path_segment(b.pod_template)}")
            if obj is not None:
                templates[(b.namespace, b.pod_template)] = obj
        ref = b.scalable
        if ref is not None and ref.kind in _PLURALS:
            key = (b.namespace, ref.api_group, ref.kind, ref.name)
            if key not in scalables:
                obj = _get(api, f"/apis/{ref.api_group}/v1/namespaces/{ns}/{_PLURALS[ref.kind]}/"
                                f"{path_segment(ref.name)}")
                if obj is not None:
                    scalables[key] = obj
    return templates, scalables


def _get(api: ApiClient, path: str) -> dict[str, Any] | None:
    try:
        return request_json(api, "GET", path)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
