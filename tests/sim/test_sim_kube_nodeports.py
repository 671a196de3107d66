"""The local scheduler's NodePorts filter, seen through the official client: a pod asking for a host port that
a pod on the node holds (same protocol and port, the same host IP or either bound to every address) stays
Pending as kube-scheduler leaves it (restating cases of kube-scheduler's plugins/nodeports/node_ports_test.go),
and binds once the holder is gone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _pod(kube: KubeHarness, ns: str, name: str, group: str, port: int, protocol: str | None = None,
         host_ip: str | None = None) -> None:
    entry: dict[str, object] = {"containerPort": port, "hostPort": port}
    if protocol:
        entry["protocol"] = protocol
    if host_ip:
        entry["hostIP"] = host_ip
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
        "nodeSelector": {"ports": group},
        "containers": [{"name": "c", "image": "nginx", "ports": [entry],
                        "resources": {"requests": {"cpu": "100m"}}}]}})


def _where(kube: KubeHarness, ns: str, name: str) -> tuple[str | None, str | None]:
    pod = kube.core.read_namespaced_pod(name, ns)
    message = next((c.message for c in pod.status.conditions or []
                    if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)
    return pod.spec.node_name, message


def _bound(kube: KubeHarness, ns: str, name: str) -> str:
    return wait_for(lambda: _where(kube, ns, name)[0])


def _refused(kube: KubeHarness, ns: str, name: str) -> str:
    node, message = wait_for(lambda: (found if (found := _where(kube, ns, name))[1] else None))
    assert node is None
    return message


@pytest.mark.parametrize(("first", "second", "fits"), [
    pytest.param((8080, None, None), (8080, None, None), False, id="same port: the second stays pending"),
    pytest.param((8080, "UDP", None), (8080, "TCP", None), True, id="same port, other protocol: fits"),
    pytest.param((8001, None, "127.0.0.1"), (8001, None, "127.0.0.2"), True, id="same port, other host IP: fits"),
    pytest.param((8001, None, "127.0.0.1"), (8001, None, "0.0.0.0"), False, id="the second on every address: pending"),
])
def test_a_host_port_held_on_the_node_refuses_the_pod(kube: KubeHarness, first: tuple, second: tuple,
                                                      fits: bool) -> None:
    ns = kube.namespace()
    group = ns  # a node of its own for each case
    kube.ready_node(f"{ns}-n", labels={"ports": group})
    _pod(kube, ns, "holder", group, *first)
    assert _bound(kube, ns, "holder") == f"{ns}-n"
    _pod(kube, ns, "asker", group, *second)
    if fits:
        assert _bound(kube, ns, "asker") == f"{ns}-n"
        return
    # The module's other nodes are in the message too, refused by the node selector.
    assert "1 node(s) didn't have free ports for the requested pod ports" in _refused(kube, ns, "asker")
    kube.core.delete_namespaced_pod("holder", ns, grace_period_seconds=0)
    assert _bound(kube, ns, "asker") == f"{ns}-n"


def test_pods_of_one_template_with_a_host_port_take_a_node_each(kube: KubeHarness) -> None:
    ns = kube.namespace()
    for index in range(2):
        kube.ready_node(f"{ns}-{index}", labels={"ports": ns})
    for index in range(3):
        _pod(kube, ns, f"agent-{index}", ns, 9100)
    nodes = sorted(_bound(kube, ns, f"agent-{index}") for index in range(2))
    assert nodes == [f"{ns}-0", f"{ns}-1"]
    assert "2 node(s) didn't have free ports" in _refused(kube, ns, "agent-2")
