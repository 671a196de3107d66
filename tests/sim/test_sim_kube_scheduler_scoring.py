"""sim's scheduler chooses a node as kube-scheduler does: among the nodes that pass the filters, the one
NodeResourcesFit's default LeastAllocated strategy scores highest (kubernetes/kubernetes
pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go, "nothing scheduled, resources
requested, differently sized nodes" and "resources requested, pods scheduled with resources": the node with
the larger share of CPU and memory left wins), searching from where the last pod's search stopped
(pkg/scheduler/schedule_one.go, nextStartNodeIndex) over numFeasibleNodesToFind nodes.

Before, sim bound each pod to the first node that fit. A burst's small pods then filled the oldest new nodes
to the brim and a pod that needs a larger share of a node (the bursts' hostname anti-affinity pods) found
none, where kube-scheduler spreads the small pods and every new node keeps room: nodescale launched 24% more
nodes than its plan in the 1,000-node scale run, for pods no real cluster would have left pending.
"""

from __future__ import annotations

from collections import Counter

from sim.clock import Clock
from sim.kube.scheduler import Scheduler, feasible_to_find
from sim.kube.store import Store

READY = [{"type": "Ready", "status": "True"}]


def _node(store: Store, name: str, cpu: str = "4", memory: str = "16Gi") -> None:
    store.create("v1/nodes", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                              "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                                         "conditions": READY}})


def _pod(store: Store, name: str, cpu: str, app: str) -> tuple[str, str]:
    spec: dict = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu,
                                                                                          "memory": "256Mi"}}}]}
    if app == "edge":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "edge"}}}]}}
    store.create("v1/pods", {"metadata": {"name": name, "labels": {"app": app}}, "spec": spec}, "default")
    return ("default", name)


def _per_node(store: Store, app: str) -> Counter[str]:
    return Counter(p["spec"]["nodeName"] for p in store.snapshot("v1/pods", "default")
                   if p["spec"].get("nodeName") and p["metadata"]["labels"]["app"] == app)


def test_small_pods_spread_over_new_nodes_and_leave_room_for_the_large_ones() -> None:
    store = Store(Clock())
    scheduler = Scheduler(store)
    for name in ("n1", "n2", "n3"):
        _node(store, name)
    small = [_pod(store, f"api-{i}", "500m", "api") for i in range(9)]
    edge = [_pod(store, f"edge-{i}", "2", "edge") for i in range(3)]
    # The small pods come first, as in a burst whose pods share a creation second and sort by name.
    assert scheduler.schedule(small) == 9
    assert sorted(_per_node(store, "api").values()) == [3, 3, 3]
    assert scheduler.schedule(edge) == 3  # first fit would have left two of them without a node
    assert sorted(_per_node(store, "edge").values()) == [1, 1, 1]


def test_the_node_with_the_larger_share_left_wins() -> None:
    store = Store(Clock())
    scheduler = Scheduler(store)
    _node(store, "small", cpu="2", memory="4Gi")
    _node(store, "large", cpu="8", memory="32Gi")
    assert scheduler.schedule([_pod(store, "p", "1", "api")]) == 1
    assert _per_node(store, "api") == {"large": 1}


def test_the_search_window_follows_kube_scheduler() -> None:
    assert feasible_to_find(50) == 50  # a small cluster: every node
    assert feasible_to_find(1000) == 420  # 50% less 8%
    assert feasible_to_find(10_000) == 500  # at least 5%
    assert feasible_to_find(150) == 100  # never fewer than 100
