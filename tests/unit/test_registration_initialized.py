"""Karpenter's initialization test on the typed Node (#29.1): Ready, no startup taint, devices advertised."""

from __future__ import annotations

import pytest

from nodescale.model.node import ClusterNode
from nodescale.usecases.provision.registration import initialized
from tests.builders import GPU, MEDIUM, pool


def gpu_node(allocatable: dict[str, str], *, ready: str = "True", taints: list[dict] | None = None) -> ClusterNode:
    return ClusterNode.from_dict({
        "metadata": {"name": "ip-10-0-1-4.ec2.internal"},
        "spec": {"providerID": "aws:///zone-a/i-0123456789abcdef0", "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": ready}],
                   "capacity": {"cpu": "8", "memory": "32Gi", **allocatable},
                   "allocatable": {"cpu": "8", "memory": "32Gi", **allocatable}},
    })


@pytest.mark.parametrize("gpus", ["0", "0m", "0Mi", "0k"])
def test_a_device_advertised_as_any_spelling_of_zero_is_not_advertised(gpus: str) -> None:
    """#29.1: the device check compares parsed quantities. It compared the raw string with "0", so a device
    plugin's "0m" (or "0Mi") counted as advertised and the node was labelled initialized too early."""
    assert not initialized(gpu_node({"nvidia.com/gpu": gpus}), pool(), GPU)


@pytest.mark.parametrize("gpus", ["1", "4", "1000m"])
def test_a_device_advertised_above_zero_initializes_the_node(gpus: str) -> None:
    assert initialized(gpu_node({"nvidia.com/gpu": gpus}), pool(), GPU)


def test_a_missing_device_a_startup_taint_or_no_ready_keeps_the_node_uninitialized() -> None:
    assert not initialized(gpu_node({}), pool(), GPU)
    assert initialized(gpu_node({}), pool(), MEDIUM)  # no device on the type: nothing to wait for
    assert not initialized(gpu_node({}, ready="False"), pool(), MEDIUM)
    coming_up = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    assert not initialized(gpu_node({}, taints=coming_up), pool(), MEDIUM)
