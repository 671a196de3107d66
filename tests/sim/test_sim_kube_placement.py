"""Quantities, pod requests, placement rules, PDB arithmetic and the simulated clock."""

from __future__ import annotations

import pytest

from sim.clock import Clock
from sim.kube.disruption import pdb_status
from sim.kube.placement import matches_node_selection, pod_requests, static_reason, tolerates
from sim.kube.quantity import QuantityError, milli
from sim.kube.store import Store


@pytest.mark.parametrize(("text", "expected"), [
    ("100m", 100), ("1", 1000), ("0.5", 500), ("1Ki", 1024_000), ("1.5Gi", 1610612736000),
    ("2e3", 2_000_000), ("1k", 1_000_000), ("128974848", 128974848000), (2, 2000),
])
def test_quantities(text: str | int, expected: int) -> None:
    assert milli(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(QuantityError):
        milli(text)


def test_pod_requests_follow_the_init_container_max_rule_and_overhead() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                       {"resources": {"requests": {"cpu": "250m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}},
                           {"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
        "overhead": {"cpu": "50m"},
    }
    requests = pod_requests(spec)
    assert requests["cpu"] == 2000 + 50  # the big init container dominates, plus overhead
    assert requests["memory"] == milli("1Gi")


def _node(labels: dict[str, str], taints: list | None = None, ready: bool = True, **spec: object) -> dict:
    return {"metadata": {"name": "n", "labels": labels}, "spec": {"taints": taints or [], **spec},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_required_node_affinity_operators() -> None:
    node = _node({"zone": "a", "gen": "6", "arch": "arm64"})

    def with_terms(*expressions: dict) -> dict:
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}}

    assert matches_node_selection(with_terms({"key": "zone", "operator": "In", "values": ["a", "b"]}), node)
    assert not matches_node_selection(with_terms({"key": "arch", "operator": "NotIn", "values": ["arm64"]}), node)
    assert matches_node_selection(with_terms({"key": "gen", "operator": "Gt", "values": ["5"]}), node)
    assert not matches_node_selection(with_terms({"key": "gen", "operator": "Lt", "values": ["5"]}), node)
    assert matches_node_selection(with_terms({"key": "gpu", "operator": "DoesNotExist"}), node)
    assert not matches_node_selection(with_terms({"key": "gpu", "operator": "Exists"}), node)
    assert not matches_node_selection({"nodeSelector": {"zone": "b"}}, node)


def test_taints_and_tolerations() -> None:
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    assert tolerates([{"key": "dedicated", "operator": "Equal", "value": "gpu"}], taint)
    assert tolerates([{"operator": "Exists"}], taint)
    assert not tolerates([{"key": "dedicated", "value": "cpu"}], taint)
    assert not tolerates([{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}], taint)
    assert static_reason({}, _node({}, [taint])) == "node(s) had untolerated taint {dedicated: gpu}"
    assert static_reason({}, _node({}, ready=False)) == (
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )
    assert static_reason({}, _node({}, unschedulable=True)) == "node(s) were unschedulable"
    prefer_no_schedule = {"key": "soft", "effect": "PreferNoSchedule"}
    assert static_reason({}, _node({}, [prefer_no_schedule])) is None


def test_a_pod_with_resource_claims_fits_no_node() -> None:
    """#31.4: sim has no DRA driver, so, as kube-scheduler's DynamicResources filter, it places no pod whose
    claims cannot be allocated (it used to bind such a pod like any other)."""
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    assert static_reason(spec, _node({})) == "cannot allocate all claims"
    assert static_reason({}, _node({})) is None


def _healthy_pod(store: Store, name: str) -> None:
    spec = {"nodeName": "n", "containers": [{"name": "app", "image": "nginx"}]}
    store.create("v1/pods", {"metadata": {"name": name, "labels": {"app": "x"}}, "spec": spec}, "default")
    store.modify("v1/pods", name, "default", lambda pod: pod["status"].update(
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}), "status")


@pytest.mark.parametrize(("budget", "expected"), [
    ({"minAvailable": 2}, (3, 2, 1, 3)),
    ({"minAvailable": "50%"}, (3, 2, 1, 3)),
    ({"maxUnavailable": 1}, (3, 2, 1, 3)),
    ({"maxUnavailable": "10%"}, (3, 2, 1, 3)),
    ({"maxUnavailable": 0}, (3, 3, 0, 3)),
])
def test_pdb_status_arithmetic(budget: dict, expected: tuple[int, int, int, int]) -> None:
    store = Store(Clock())
    for index in range(3):
        _healthy_pod(store, f"p{index}")
    pdb = store.create("policy/v1/poddisruptionbudgets", {
        "metadata": {"name": "b"}, "spec": {**budget, "selector": {"matchLabels": {"app": "x"}}}}, "default")
    status = pdb_status(store, pdb)
    assert (status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"],
            status["expectedPods"]) == expected


def test_clock_advances_and_sleeps_in_simulated_time() -> None:
    clock = Clock(speed=10)
    before = clock.now()
    clock.advance(3600)
    assert (clock.now() - before).total_seconds() >= 3600
    start = clock.elapsed()
    clock.sleep(1)  # 0.1 s real at speed 10
    assert clock.elapsed() - start >= 1
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        Clock(speed=0)
