"""A Pod's times and literal nodeSelector, parsed once by Pod.from_dict instead of read from Pod.raw (#29.1)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from nodescale.model.node import ClusterNode
from nodescale.model.pod import Pod, started_at
from nodescale.usecases.provision.launch import pending_since
from nodescale.usecases.provision.unmet import why_node_refuses

CREATED = "2026-11-24T10:00:00Z"


def raw_pod(status: dict | None = None, node_selector: dict | None = None) -> dict:
    return {"metadata": {"name": "p", "namespace": "ns", "creationTimestamp": CREATED},
            "spec": {"containers": [{"name": "c"}], **({"nodeSelector": node_selector} if node_selector else {})},
            "status": status or {}}


def parsed(raw: dict) -> Pod:
    # Without its raw object: what the use-cases read must be in the typed fields.
    return dataclasses.replace(Pod.from_dict(raw), raw={})


def test_times_are_parsed_into_fields() -> None:
    """#29.1: started, created and when it was found unschedulable are fields, read without Pod.raw."""
    waiting = raw_pod({"phase": "Pending", "conditions": [
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-24T10:00:30Z"},
        {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-11-24T10:00:05Z"}]})
    pod = parsed(waiting)
    assert pod.created == pod.started == datetime(2026, 11, 24, 10, tzinfo=UTC) == started_at(waiting)
    assert pod.unschedulable_since == pending_since(pod) == datetime(2026, 11, 24, 10, 0, 5, tzinfo=UTC)
    running = parsed(raw_pod({"phase": "Running", "startTime": "2026-11-24T10:02:00Z"}))
    assert running.started == datetime(2026, 11, 24, 10, 2, tzinfo=UTC) and running.unschedulable_since is None
    assert pending_since(running) == running.created  # never found unschedulable: since its creation


def test_the_literal_node_selector_is_read_from_the_parsed_pod() -> None:
    """#29.1: why_node_refuses compares the nodeSelector as written, from the typed Pod."""
    node = ClusterNode.from_dict({"metadata": {"name": "n", "labels": {"disk": "ssd"}}})
    assert why_node_refuses(node, parsed(raw_pod(node_selector={"disk": "ssd"}))) is None
    why = why_node_refuses(node, parsed(raw_pod(node_selector={"disk": "hdd"})))
    assert why == "its nodeSelector wants disk=hdd, the node has disk=ssd"
