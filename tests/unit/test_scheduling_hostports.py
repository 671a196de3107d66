"""Host ports: two pods asking for the same protocol and port never share a node, as kube-scheduler's NodePorts
filter keeps them apart; a DaemonSet's host port is taken on every node it runs on."""

from __future__ import annotations

from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.pod import Pod
from nodescale.scheduling.plan import UnschedulableKind
from tests.builders import LARGE, MEDIUM, plan_for, pods
from tests.builders import daemon as _daemon
from tests.builders import existing_node as _node


def _ports(*entries: dict) -> dict:
    return {"containers": [{"name": "c", "ports": list(entries),
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}


def port_pods(n: int, name: str, *entries: dict) -> list[Pod]:
    return pods(n, name=name, **{"containers": _ports(*entries)["containers"]})


def test_a_pod_requests_each_host_port_once_tcp_by_default_init_containers_not_counted() -> None:
    [pod] = port_pods(1, "web", {"containerPort": 80, "hostPort": 8080},
                      {"containerPort": 53, "hostPort": 53, "protocol": "UDP"}, {"containerPort": 9000})
    assert {k: v for k, v in pod.requests.items() if res.is_host_port(k)} == {
        "host port TCP/8080": 1, "host port UDP/53": 1}
    [init] = pods(1, name="init", initContainers=[{"name": "i", "ports": [{"containerPort": 1, "hostPort": 1}]}])
    assert not any(res.is_host_port(k) for k in init.requests)


def test_pods_with_the_same_host_port_go_to_different_nodes() -> None:
    # Karpenter provisioning/scheduling suite_test.go: "should schedule pods with the same host port to
    # different nodes" -- a node that would hold both by their requests still takes one.
    plan = plan_for(port_pods(2, "web", {"containerPort": 8080, "hostPort": 8080}), types=[LARGE])
    assert [len(c.pods) for c in plan.node_claims] == [1, 1]
    assert not plan.unschedulable


def test_other_ports_or_protocols_share_a_node() -> None:
    workload = (port_pods(1, "tcp", {"containerPort": 8080, "hostPort": 8080})
                + port_pods(1, "udp", {"containerPort": 8080, "hostPort": 8080, "protocol": "UDP"})
                + port_pods(1, "other", {"containerPort": 9090, "hostPort": 9090}))
    plan = plan_for(workload, types=[LARGE])
    assert [len(c.pods) for c in plan.node_claims] == [3]


def test_a_daemonset_host_port_leaves_no_node_for_a_pod_asking_for_it() -> None:
    # Karpenter provisioning suite_test.go: "should account for daemonset hostports" -- no node is launched.
    daemon = _daemon("1", containers=[{"name": "d", "ports": [{"containerPort": 8080, "hostPort": 8080}],
                                       "resources": {"requests": {"cpu": "1"}}}])
    plan = plan_for(port_pods(1, "web", {"containerPort": 8080, "hostPort": 8080}), types=[MEDIUM, LARGE],
                    daemonset_pods=[daemon])
    assert plan.node_claims == []
    [refused] = plan.unschedulable
    assert refused.kind == UnschedulableKind.TOO_LARGE and "host port TCP/8080" in refused.reason, refused


def test_a_daemonset_that_would_not_run_on_the_pool_holds_no_port() -> None:
    # Karpenter provisioning suite_test.go: "should not account for daemonset hostports when daemonset would
    # not schedule on selected node".
    daemon = _daemon("1", nodeSelector={wk.ARCH: "arm64"},
                     containers=[{"name": "d", "ports": [{"containerPort": 8080, "hostPort": 8080}],
                                  "resources": {"requests": {"cpu": "1"}}}])
    plan = plan_for(port_pods(1, "web", {"containerPort": 8080, "hostPort": 8080}), types=[MEDIUM],
                    daemonset_pods=[daemon])
    assert [len(c.pods) for c in plan.node_claims] == [1]


def test_an_existing_node_whose_pod_holds_the_port_takes_no_second_one() -> None:
    holder = port_pods(1, "old", {"containerPort": 8080, "hostPort": 8080})
    node = _node("n1", cpu=16, pods=holder)
    plan = plan_for(port_pods(1, "web", {"containerPort": 8080, "hostPort": 8080})
                    + port_pods(1, "free", {"containerPort": 9090, "hostPort": 9090}), existing_nodes=[node])
    assert [(e.node, [p.name for p in e.pods]) for e in plan.existing] == [("n1", ["free-0"])]
    assert [[p.name for p in c.pods] for c in plan.node_claims] == [["web-0"]]


def test_consolidation_does_not_move_a_pod_onto_a_node_holding_its_port() -> None:
    # Node a's agent fits on b by its requests, but b's agent holds the port: deleting a needs a new node.
    from nodescale.disruption.nodes import NodeView
    from nodescale.disruption.simulator import bin_packing_simulator
    from nodescale.model.node import ClusterNode
    from tests.builders import TYPES
    from tests.builders import scheduling_pool as pool

    agents = {name: port_pods(1, f"agent-{name}", {"containerPort": 8126, "hostPort": 8126}) for name in "ab"}
    free = {name: port_pods(1, f"free-{name}", {"containerPort": 9000 + i, "hostPort": 9000 + i})
            for i, name in enumerate("ab")}
    existing = [_node(name, cpu=16, pods=agents[name] + free[name]) for name in "ab"]
    simulate = bin_packing_simulator(existing, [pool()], {"default": TYPES})

    without_a = simulate([NodeView.from_node(ClusterNode.from_dict({"metadata": {"name": "a"}}), agents["a"] + free["a"], 0.4)])

    assert not without_a.unschedulable
    [replacement] = without_a.replacements  # the agent; the other pod, on a free port, fits on b
    assert replacement.nodepool == "default"
