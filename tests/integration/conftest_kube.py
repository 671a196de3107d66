"""A local Kubernetes API (store + HTTP server + controllers) for the sim/kube tests.

A test module defines its `kube` fixture with `yield from running_harness()`; tests reach the API only through the
official `kubernetes` client over HTTP, and give their objects unique names or namespaces.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from sim.aws.constants import KUBE_ADMIN_TOKEN
from sim.clock import Clock
from sim.kube.controllers import Controllers
from sim.kube.server import KubeServer
from sim.kube.store import Store


class KubeHarness:
    def __init__(self, ready_delay: float = 0.2) -> None:
        self.clock = Clock()
        self.store = Store(self.clock)
        self.server = KubeServer(self.store).start()
        self.controllers = Controllers(self.store, self.clock, ready_delay=ready_delay).start()
        config = client.Configuration(host=self.server.url)
        config.api_key = {"authorization": KUBE_ADMIN_TOKEN}  # these tests exercise the API itself: as admin
        config.api_key_prefix = {"authorization": "Bearer"}
        self.api_client = client.ApiClient(config)
        self.core = client.CoreV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)
        self.policy = client.PolicyV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.controllers.stop()
        self.server.stop()
        self.api_client.close()

    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": name}})
        return name

    def ready_node(self, name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110",
                   labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None) -> Any:
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {
                "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.10"}],
            },
        }
        self.core.create_node(body)
        # Node status is a subresource: creating with a status is allowed, and so is writing it later.
        return self.core.read_node(name)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll until `predicate()` is truthy; returns its value or fails the test with the last one."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value:
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s (last value: {value!r})")
        time.sleep(interval)
        value = predicate()
    return value


def running_harness() -> Iterator[KubeHarness]:
    """Body of a test module's `kube` fixture: one harness for the module, stopped at the end."""
    harness = KubeHarness()
    try:
        yield harness
    finally:
        harness.stop()


def unschedulable_message(kube: KubeHarness, ns: str, name: str) -> str:
    """The message of the pod's PodScheduled=False/Unschedulable condition, once sim's scheduler has set it."""
    def message() -> str | None:
        pod = kube.core.read_namespaced_pod(name, ns)
        return next((c.message for c in pod.status.conditions or []
                     if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)
    return wait_for(message)
