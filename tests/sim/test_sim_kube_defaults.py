"""Defaults sim's API server fills in on create, as kube-apiserver's defaulting and admission do."""

from __future__ import annotations

from sim.kube.defaults import pod_defaults


def test_priority_admission_resolves_the_system_priority_classes() -> None:
    pods = [{"spec": {"priorityClassName": name, "containers": [{"name": "c"}]}}
            for name in ("system-node-critical", "system-cluster-critical", "")]
    for pod in pods:
        pod_defaults(pod)
    assert [p["spec"]["priority"] for p in pods] == [2000001000, 2000000000, 0]
    assert {p["spec"]["preemptionPolicy"] for p in pods} == {"PreemptLowerPriority"}


def test_a_priority_written_by_the_client_is_kept() -> None:
    pod = {"spec": {"priority": 7, "containers": [{"name": "c"}]}}
    pod_defaults(pod)
    assert pod["spec"]["priority"] == 7
