"""The local cluster's controllers, seen through the official client: workloads, scheduling, lifecycle."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest_kube import KubeHarness, running_harness, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeHarness]:
    yield from running_harness()


def _template(labels: dict[str, str], cpu: str = "250m", **spec: object) -> dict:
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}], **spec},
    }


def _deployment(name: str, replicas: int, **spec: object) -> dict:
    labels = {"app": name}
    return {
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": _template(labels, **spec)},
    }


def _pods(kube: KubeHarness, ns: str, selector: str = "") -> list:
    return [p for p in kube.core.list_namespaced_pod(ns, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def test_deployment_pods_bind_to_a_ready_node_and_run(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.apps.create_namespaced_deployment(ns, _deployment("web", 5, nodeSelector={"pool": "web"}))
    pods = wait_for(lambda: len(_pods(kube, ns)) == 5 and _pods(kube, ns))
    assert all(p.metadata.owner_references[0].kind == "ReplicaSet" for p in pods)
    # No node yet: the scheduler says so the way kube-scheduler does.
    wait_for(lambda: all(
        any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in (p.status.conditions or []))
        for p in _pods(kube, ns)
    ))
    kube.ready_node("web-node", cpu="2", labels={"pool": "web"})
    running = wait_for(lambda: [p for p in _pods(kube, ns) if p.status.phase == "Running"])
    wait_for(lambda: len([p for p in _pods(kube, ns) if p.status.phase == "Running"]) == 5)
    running = _pods(kube, ns)
    assert {p.spec.node_name for p in running} == {"web-node"}
    assert all(any(c.type == "Ready" and c.status == "True" for c in p.status.conditions) for p in running)
    status = wait_for(lambda: (s := kube.apps.read_namespaced_deployment_status("web", ns).status).ready_replicas == 5
                      and s)
    assert status.replicas == 5 and status.available_replicas == 5


def test_unschedulable_message_counts_the_reasons(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("tainted-node", labels={"msg": "yes"}, taints=[{"key": "dedicated", "value": "gpu",
                                                                     "effect": "NoSchedule"}])
    kube.ready_node("small-node", cpu="1", labels={"msg": "yes"})
    # A node the selector does not match, made here: under xdist the module's other nodes may be elsewhere.
    kube.ready_node("msg-elsewhere-node", labels={"msg": "no"})
    kube.core.create_namespaced_pod(ns, {
        "metadata": {"name": "big"},
        "spec": {"nodeSelector": {"msg": "yes"}, "containers": [
            {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "3"}}}]},
    })

    def message() -> str | None:
        conditions = kube.core.read_namespaced_pod("big", ns).status.conditions or []
        return next((c.message for c in conditions if c.reason == "Unschedulable"), None)

    text = wait_for(message)
    assert "1 Insufficient cpu" in text
    assert "1 node(s) had untolerated taint {dedicated: gpu}" in text
    assert "node(s) didn't match Pod's node affinity/selector" in text
    assert text.startswith("0/")


def test_an_unschedulable_pods_condition_is_rewritten_at_most_once_per_backoff(kube: KubeHarness) -> None:
    """kube-scheduler retries an unschedulable pod after a backoff of at most podMaxBackoffSeconds (10 s) and
    only then rewrites its condition: a node joining does not rewrite every pending pod at once."""
    ns = kube.namespace()
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": "lonely"}, "spec": {
        "nodeSelector": {"backoff": "none-such"}, "containers": [{"name": "app", "image": "nginx"}]}})

    def condition() -> tuple[str, str] | None:
        pod = kube.core.read_namespaced_pod("lonely", ns)
        found = next((c.message for c in pod.status.conditions or [] if c.reason == "Unschedulable"), None)
        return (found, pod.metadata.resource_version) if found else None

    first, version = wait_for(condition)
    kube.ready_node("backoff-one", labels={"backoff": "other"})
    time.sleep(0.5)
    assert condition() == (first, version)
    kube.clock.advance(10)
    kube.ready_node("backoff-two", labels={"backoff": "other"})
    again, _ = wait_for(lambda: (c := condition()) and c[0] != first and c)
    assert again.startswith("0/") and "node(s) didn't match Pod's node affinity/selector" in again


def test_scheduler_honours_affinity_taints_and_resources(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("zone-a", cpu="2", labels={"sched": "t", "topology.kubernetes.io/zone": "a", "gen": "5"})
    kube.ready_node("zone-b", cpu="2", labels={"sched": "t", "topology.kubernetes.io/zone": "b", "gen": "3"},
                    taints=[{"key": "team", "value": "x", "effect": "NoSchedule"}])
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "sched", "operator": "In", "values": ["t"]},
                              {"key": "gen", "operator": "Gt", "values": ["2"]}]}]}}}
    toleration = [{"key": "team", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]
    kube.apps.create_namespaced_deployment(ns, _deployment("plain", 3, cpu="1", affinity=affinity))
    kube.apps.create_namespaced_deployment(ns, _deployment("tolerant", 2, cpu="1", affinity=affinity,
                                                           tolerations=toleration))
    wait_for(lambda: sum(1 for p in _pods(kube, ns) if p.spec.node_name) == 4)
    plain = _pods(kube, ns, "app=plain")
    assert {p.spec.node_name for p in plain if p.spec.node_name} == {"zone-a"}
    assert sum(1 for p in plain if p.spec.node_name) == 2  # the third does not fit in 2 CPUs
    tolerant = _pods(kube, ns, "app=tolerant")
    assert {p.spec.node_name for p in tolerant} == {"zone-b"}


def test_cordoned_and_not_ready_nodes_get_no_pods(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("cordoned", labels={"cordon": "t"})
    kube.core.patch_node("cordoned", {"spec": {"unschedulable": True}})
    kube.core.create_node({"metadata": {"name": "booting", "labels": {"cordon": "t"}}, "status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}})
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": "waits"}, "spec": {
        "nodeSelector": {"cordon": "t"}, "containers": [{"name": "app", "image": "nginx"}]}})
    text = wait_for(lambda: next((c.message for c in kube.core.read_namespaced_pod("waits", ns).status.conditions or []
                                  if c.reason == "Unschedulable"), None))
    assert "1 node(s) were unschedulable" in text
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in text
    # The node turns Ready (the kubelet's job): the pod binds and runs.
    kube.core.patch_node_status("booting", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    wait_for(lambda: kube.core.read_namespaced_pod("waits", ns).status.phase == "Running")
    assert kube.core.read_namespaced_pod("waits", ns).spec.node_name == "booting"


def test_scaling_a_deployment_adds_and_removes_pods(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("scale-node", cpu="8", labels={"scale": "t"})
    kube.apps.create_namespaced_deployment(ns, _deployment("api", 2, nodeSelector={"scale": "t"}))
    wait_for(lambda: len(_pods(kube, ns)) == 2)
    kube.apps.patch_namespaced_deployment_scale("api", ns, {"spec": {"replicas": 4}})
    wait_for(lambda: len(_pods(kube, ns)) == 4)
    kube.apps.patch_namespaced_deployment("api", ns, {"spec": {"replicas": 1}})
    wait_for(lambda: len(_pods(kube, ns)) == 1)
    assert kube.apps.read_namespaced_deployment_scale("api", ns).spec.replicas == 1


def test_deleting_a_deployment_collects_its_replicasets_and_pods(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.apps.create_namespaced_deployment(ns, _deployment("gone", 2))
    wait_for(lambda: len(_pods(kube, ns)) == 2)
    kube.apps.delete_namespaced_deployment("gone", ns)
    wait_for(lambda: not kube.apps.list_namespaced_replica_set(ns).items)
    wait_for(lambda: not _pods(kube, ns))


def test_orphan_propagation_keeps_the_dependents(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.apps.create_namespaced_deployment(ns, _deployment("orphaned", 1))
    wait_for(lambda: kube.apps.list_namespaced_replica_set(ns).items)
    kube.apps.delete_namespaced_deployment("orphaned", ns, propagation_policy="Orphan")
    replica_sets = kube.apps.list_namespaced_replica_set(ns).items
    assert len(replica_sets) == 1 and not replica_sets[0].metadata.owner_references


def test_daemonset_runs_one_pod_per_matching_node(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("ds-1", labels={"ds": "t"})
    kube.ready_node("ds-2", labels={"ds": "t"}, taints=[{"key": "special", "effect": "NoSchedule"}])
    kube.ready_node("ds-3", labels={"ds": "other"})
    labels = {"app": "agent"}
    kube.apps.create_namespaced_daemon_set(ns, {"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": labels}, "template": _template(labels, nodeSelector={"ds": "t"})}})
    wait_for(lambda: len(_pods(kube, ns)) == 1)
    assert _pods(kube, ns)[0].spec.node_name == "ds-1"
    kube.ready_node("ds-4", labels={"ds": "t"})
    wait_for(lambda: sorted(p.spec.node_name for p in _pods(kube, ns)) == ["ds-1", "ds-4"])
    wait_for(lambda: kube.apps.read_namespaced_daemon_set_status("agent", ns).status.number_ready == 2)
    assert kube.apps.read_namespaced_daemon_set("agent", ns).status.desired_number_scheduled == 2
    kube.core.delete_node("ds-4")
    wait_for(lambda: [p.spec.node_name for p in _pods(kube, ns)] == ["ds-1"])


def test_job_runs_parallel_pods_to_completion(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("job-node", labels={"job": "t"})
    template = _template({}, nodeSelector={"job": "t"}, restartPolicy="Never")
    template["metadata"]["annotations"] = {"sim.nodescale.io/run-seconds": "30"}
    kube.batch.create_namespaced_job(ns, {"metadata": {"name": "batch"}, "spec": {
        "parallelism": 2, "completions": 3, "template": template}})
    wait_for(lambda: sum(1 for p in _pods(kube, ns) if p.status.phase == "Running") == 2)
    assert all(p.metadata.labels["job-name"] == "batch" for p in _pods(kube, ns))
    kube.clock.advance(31)
    wait_for(lambda: sum(1 for p in _pods(kube, ns) if p.status.phase == "Running") == 1)
    kube.clock.advance(31)
    job = wait_for(lambda: (j := kube.batch.read_namespaced_job_status("batch", ns)).status.succeeded == 3 and j)
    assert {c.type for c in job.status.conditions} >= {"Complete"}


def test_pods_of_a_deleted_node_are_replaced_elsewhere(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("doomed", labels={"move": "t"})
    kube.apps.create_namespaced_deployment(ns, _deployment("mover", 2, nodeSelector={"move": "t"}))
    wait_for(lambda: sum(1 for p in _pods(kube, ns) if p.spec.node_name == "doomed") == 2)
    first = {p.metadata.name for p in _pods(kube, ns)}
    kube.ready_node("survivor", labels={"move": "t"})
    kube.core.delete_node("doomed")
    wait_for(lambda: [p.spec.node_name for p in _pods(kube, ns)] == ["survivor", "survivor"])
    assert not first & {p.metadata.name for p in _pods(kube, ns)}


def test_pods_turn_unready_with_their_node(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("flaky", labels={"flaky": "t"})
    kube.core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {
        "nodeSelector": {"flaky": "t"}, "containers": [{"name": "app", "image": "nginx"}]}})
    wait_for(lambda: kube.core.read_namespaced_pod("p", ns).status.phase == "Running")
    kube.core.patch_node_status("flaky", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})

    def ready() -> str:
        return next(c.status for c in kube.core.read_namespaced_pod("p", ns).status.conditions if c.type == "Ready")

    wait_for(lambda: ready() == "False")
    kube.core.patch_node_status("flaky", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    wait_for(lambda: ready() == "True")


def test_foreground_deletion_waits_for_the_dependents(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.ready_node("fg-node", labels={"fg": "t"})
    kube.apps.create_namespaced_deployment(ns, _deployment("fg", 2, nodeSelector={"fg": "t"}))
    wait_for(lambda: sum(1 for p in _pods(kube, ns) if p.status.phase == "Running") == 2)
    kube.apps.delete_namespaced_deployment("fg", ns, propagation_policy="Foreground")
    held = kube.apps.read_namespaced_deployment("fg", ns)
    assert held.metadata.deletion_timestamp is not None and "foregroundDeletion" in held.metadata.finalizers
    # The running pods take their grace period (30 s) to go; the deployment stays until then.
    wait_for(lambda: all(p.metadata.deletion_timestamp for p in kube.core.list_namespaced_pod(ns).items))
    assert kube.apps.list_namespaced_deployment(ns).items
    kube.clock.advance(31)
    wait_for(lambda: not kube.apps.list_namespaced_deployment(ns).items)
    assert not kube.core.list_namespaced_pod(ns).items


def test_wait_idle_returns_once_reactions_are_written(kube: KubeHarness) -> None:
    ns = kube.namespace()
    kube.apps.create_namespaced_deployment(ns, _deployment("idle", 3))
    assert kube.controllers.wait_idle(timeout=10)
    assert len(_pods(kube, ns)) == 3
