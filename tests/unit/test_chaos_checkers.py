"""The chaos run's invariant checkers report a broken history or state, and stay quiet on a sound one."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import urllib3

from sim.chaos import cutoff, final_checks
from sim.chaos.checkers import DisruptionChecker, ForeignChecker, InstanceRecord, LimitsChecker

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

CLUSTER = "demo-cluster"
OURS = {"nodescale.io/cluster": CLUSTER, "karpenter.sh/nodepool": "general"}
PDB = {
    "metadata": {"name": "nginx-pdb", "namespace": "default"},
    "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "nginx"}}},
}


def pod(name: str, node: str = "node-a", *, healthy: bool = True, terminating: bool = False,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {"app": "nginx"},
                            "annotations": annotations or {}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"phase": "Running" if healthy else "Pending",
                   "conditions": [{"type": "Ready", "status": "True" if healthy else "False"}]},
    }


def node(name: str, instance_id: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"providerID": f"aws:///us-east-1a/{instance_id}", **spec}}


def nginx_checker(replicas: int = 4) -> DisruptionChecker:
    checker = DisruptionChecker(expected={"default/nginx-pdb": replicas})
    checker.pdb_event("ADDED", PDB)
    checker.node_event("ADDED", node("node-a", "i-a"))
    checker.node_event("ADDED", node("node-b", "i-b"))
    for i in range(replicas):
        checker.pod_event("ADDED", pod(f"nginx-{i}", "node-a" if i < 3 else "node-b"))
    return checker


# -------------------------------------------------------------------------------------------- PDBs
def test_evicting_more_than_the_budget_allows_is_a_pdb_violation() -> None:
    checker = nginx_checker()
    assert checker.pod_event("MODIFIED", pod("nginx-0", terminating=True), at=1.0) == []
    assert checker.pod_event("DELETED", pod("nginx-1"), at=2.0) == []  # 2 of 4 healthy: the budget's floor
    found = checker.pod_event("MODIFIED", pod("nginx-2", terminating=True), at=3.0)
    assert [v.invariant for v in found] == ["pdb"]
    assert "left 1 healthy" in found[0].detail and "needs 2 of 4" in found[0].detail
    assert checker.counts() == {"voluntary": 3, "involuntary": 0}


def test_evictions_paced_by_replacements_keep_the_budget() -> None:
    checker = nginx_checker()
    for i in range(4):
        checker.pod_event("MODIFIED", pod(f"nginx-{i}", terminating=True))
        checker.pod_event("ADDED", pod(f"nginx-new-{i}", "node-c"))
        checker.pod_event("DELETED", pod(f"nginx-{i}", terminating=True))
    assert checker.violations == []
    assert checker.counts()["voluntary"] == 4


def test_pods_lost_with_an_interrupted_instance_are_not_voluntary() -> None:
    checker = nginx_checker()
    checker.mark_involuntary("i-a")
    for i in range(3):
        checker.pod_event("DELETED", pod(f"nginx-{i}"))
    assert checker.violations == []
    assert checker.counts() == {"voluntary": 0, "involuntary": 3}


def test_without_expected_pods_the_peak_of_healthy_pods_counts() -> None:
    checker = DisruptionChecker()
    checker.pdb_event("ADDED", PDB)
    for i in range(4):
        checker.pod_event("ADDED", pod(f"nginx-{i}"))
    checker.pod_event("DELETED", pod("nginx-0"))
    checker.pod_event("DELETED", pod("nginx-1"))
    assert [v.invariant for v in checker.pod_event("DELETED", pod("nginx-2"))] == ["pdb"]


# ---------------------------------------------------------------------------------- do-not-disrupt
def test_evicting_a_do_not_disrupt_pod_is_reported_unless_its_node_was_taken() -> None:
    checker = DisruptionChecker()
    checker.node_event("ADDED", node("node-a", "i-a"))
    checker.node_event("ADDED", node("node-b", "i-b"))
    job = {"labels": {"job-name": "nightly-report"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"}}
    checker.pod_event("ADDED", pod("report-1", "node-a", **job))
    checker.pod_event("ADDED", pod("report-2", "node-b", **job))
    checker.mark_involuntary("i-b")
    assert checker.pod_event("DELETED", pod("report-2", "node-b", **job)) == []
    found = checker.pod_event("MODIFIED", pod("report-1", "node-a", terminating=True, **job))
    assert [v.invariant for v in found] == ["do-not-disrupt"]
    assert "report-1" in found[0].detail


def test_a_pending_pod_deleted_is_no_disruption() -> None:
    checker = DisruptionChecker()
    waiting = pod("report-1", annotations={"karpenter.sh/do-not-disrupt": "true"})
    waiting["spec"] = {}
    checker.pod_event("ADDED", waiting)
    assert checker.pod_event("DELETED", waiting) == []
    assert checker.disruptions == []


# ----------------------------------------------------------------------------------------- foreign
def test_a_foreign_instance_terminated_or_retagged_is_reported() -> None:
    untagged = InstanceRecord("i-untagged", "running", "t3.micro", tags={"Name": "unmanaged"})
    karpenter = InstanceRecord("i-karp", "running", "m5.large", tags={"karpenter.sh/nodepool": "default"})
    checker = ForeignChecker([untagged, karpenter], [])
    assert checker.instances_seen({"i-untagged": untagged, "i-karp": karpenter}) == []
    found = checker.instances_seen({
        "i-untagged": InstanceRecord("i-untagged", "shutting-down", "t3.micro", tags={"Name": "unmanaged"}),
        "i-karp": InstanceRecord("i-karp", "running", "m5.large", tags={**karpenter.tags, **OURS}),
    }, at=4.0)
    assert sorted(v.detail.split(" ")[2] for v in found) == ["i-karp", "i-untagged"]
    assert {v.invariant for v in found} == {"foreign"}
    # Reported once, not at every poll.
    assert checker.instances_seen({"i-karp": karpenter}) and len(checker.violations) == 3


def test_a_foreign_node_cordoned_or_deleted_is_reported() -> None:
    foreign = node("someone-else", "i-karp", taints=[{"key": "x", "effect": "NoSchedule"}])
    checker = ForeignChecker([], [foreign])
    assert checker.node_event("MODIFIED", foreign) == []
    assert checker.node_event("MODIFIED", node("ours", "i-1", unschedulable=True)) == []
    cordoned = node("someone-else", "i-karp", taints=[{"key": "x", "effect": "NoSchedule"}], unschedulable=True)
    assert [v.invariant for v in checker.node_event("MODIFIED", cordoned)] == ["foreign"]
    assert "deleted" in checker.node_event("DELETED", foreign)[0].detail


# ------------------------------------------------------------------------------------------ limits
def test_capacity_above_a_pool_limit_is_reported_and_terminated_instances_do_not_count() -> None:
    capacity = {"m5.xlarge": {"cpu": 4000, "memory": 16 * 2**30}}
    checker = LimitsChecker(CLUSTER, {"general": {"cpu": 8000}}, lambda t: capacity.get(t, {}))
    two = {f"i-{n}": InstanceRecord(f"i-{n}", "running", "m5.xlarge", tags=OURS) for n in range(2)}
    gone = {"i-9": InstanceRecord("i-9", "terminated", "m5.xlarge", tags=OURS)}
    foreign = {"i-f": InstanceRecord("i-f", "running", "m5.xlarge", tags={"karpenter.sh/nodepool": "general"})}
    assert checker.instances_seen({**two, **gone, **foreign}) == []
    third = {"i-2": InstanceRecord("i-2", "pending", "m5.xlarge", tags=OURS)}
    found = checker.instances_seen({**two, **third}, at=9.0)
    assert [v.invariant for v in found] == ["limits"]
    assert "cpu 12000 above its limit 8000" in found[0].detail
    assert checker.peak["general"]["nodes"] == 3


# ------------------------------------------------------------------------------------ final checks
def test_a_leaked_instance_and_an_orphaned_node_are_reported() -> None:
    instances = [
        InstanceRecord("i-1", "running", "m5.large", tags=OURS),
        InstanceRecord("i-leak", "running", "m5.large", tags=OURS),
        InstanceRecord("i-dead", "terminated", "m5.large", tags=OURS),
        InstanceRecord("i-untagged", "running", "t3.micro"),
    ]
    nodes = [node("n-1", "i-1"), node("n-dead", "i-dead"), node("foreign", "i-karp")]
    found = final_checks.leaks(instances, nodes, CLUSTER, foreign_nodes=["foreign"])
    assert sorted(v.detail.split(" ")[1] for v in found) == ["i-leak", "n-dead"]
    assert final_checks.leaks(instances[:1], nodes[:1], CLUSTER) == []


def test_a_pod_that_could_run_but_waits_is_reported() -> None:
    pods = [pod("running"), pod("waiting", healthy=False), pod("too-big", healthy=False),
            pod("leaving", healthy=False, terminating=True)]
    found = final_checks.pods_not_running(pods, cannot_run=["default/too-big"])
    assert [v.detail.split(" ")[1] for v in found] == ["default/waiting"]


@pytest.mark.parametrize(("in_use", "scratch", "bad"), [(5, 4, False), (4, 4, False), (6, 4, True)])
def test_more_than_one_node_above_the_bin_packer_is_excess(in_use: int, scratch: int, bad: bool) -> None:
    assert bool(final_checks.excess_capacity(in_use, scratch)) is bad


# ---------------------------------------------------------------------------------------- cut-off
def test_an_invocation_is_cut_off_at_its_nth_call_and_other_threads_are_not() -> None:
    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        http = urllib3.PoolManager()
        served = []
        with pytest.raises(cutoff.InvocationCutOff) as stopped, cutoff.cut_off_at(3, after=False):
            for _ in range(5):
                served.append(http.request("GET", url).status)
                other = threading.Thread(target=lambda: served.append(http.request("GET", url).status))
                other.start()
                other.join()
        assert stopped.value.call == 3 and not stopped.value.after
        assert served == [200, 200, 200, 200]  # two of its own, two from another thread
        assert http.request("GET", url).status == 200  # outside the cut-off, calls go through
    finally:
        server.shutdown()


def test_nodes_a_users_rule_protects_are_not_excess_and_others_still_are() -> None:
    summary = {"refused": [
        {"nodes": ["a"], "blockedBy": "pdb"},
        {"nodes": ["b"], "blockedBy": "do-not-disrupt"},
        {"nodes": ["c"], "blockedBy": "not-consolidatable"},
        {"nodes": ["d"], "blockedBy": "budget"},  # the clean rounds move the clock past a budget
    ]}
    protected = final_checks.protected_nodes(summary)
    assert protected == {"a", "b", "c"}
    assert final_checks.excess_capacity(7, 4, protected=len(protected)) == []
    (violation,) = final_checks.excess_capacity(9, 4, protected=len(protected))
    assert "3 kept by a PDB" in violation.detail
    assert final_checks.protected_nodes("cut-off") == set()
