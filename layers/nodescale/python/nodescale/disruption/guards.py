"""What stops a voluntary disruption: do-not-disrupt on pods or nodes, and pods with nowhere to go."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..model.durations import go_duration_seconds
from ..model.pod import DO_NOT_DISRUPT, LEGACY_DO_NOT_EVICT, Pod
from ..model.timestamps import parse_timestamp
from .nodes import LEGACY_DO_NOT_CONSOLIDATE, NodeView


def pod_blocks(pod: Pod, now: datetime) -> str | None:
    """Why this pod blocks a voluntary disruption of its node, or None.

    ``karpenter.sh/do-not-disrupt`` is "true" (always) or a duration such as "30m", counted from the
    pod's start; the legacy ``karpenter.sh/do-not-evict: "true"`` still holds, as v0.2x users expect.
    """
    value = pod.annotations.get(DO_NOT_DISRUPT)
    if value is not None and value != "false":
        if value == "true":
            return f"pod {pod.key} has {DO_NOT_DISRUPT}"
        span = parse_duration(value)
        started = parse_timestamp((pod.raw.get("status") or {}).get("startTime")) or parse_timestamp(
            (pod.raw.get("metadata") or {}).get("creationTimestamp")
        )
        if span is None:
            return f"pod {pod.key} has {DO_NOT_DISRUPT}={value!r} (not a duration: treated as true)"
        if started is None or now < started + span:
            return f"pod {pod.key} has {DO_NOT_DISRUPT}={value} (still protected)"
    if pod.annotations.get(LEGACY_DO_NOT_EVICT) == "true":
        return f"pod {pod.key} has {LEGACY_DO_NOT_EVICT}"
    return None


def node_blocks(node: NodeView, now: datetime) -> str | None:
    if node.annotations.get(DO_NOT_DISRUPT) == "true":
        return f"node {node.name} has {DO_NOT_DISRUPT}"
    if node.annotations.get(LEGACY_DO_NOT_CONSOLIDATE) == "true":
        return f"node {node.name} has {LEGACY_DO_NOT_CONSOLIDATE}"
    for pod in node.pods:
        why = pod_blocks(pod, now)
        if why:
            return why
    return None


def parse_duration(value: str) -> timedelta | None:
    seconds = go_duration_seconds(value.strip())
    return None if seconds is None else timedelta(seconds=seconds)
