"""terminationGracePeriod and do-not-disrupt durations: what the planner starts and what the drain holds.

Each test restates Karpenter v1 behaviour (kubernetes-sigs/karpenter `pkg/apis/v1/nodepool.go`
TerminationGracePeriod, `terminator.go` DeleteExpiringPods / podDeleteTimeWithGracePeriod, the docs'
"Disruption" page: TerminationGracePeriod and Pod-Level Controls).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nodescale.clock import format_timestamp
from nodescale.disruption import drain_policy, planner
from nodescale.disruption.decisions import Blocker
from nodescale.disruption.drift import Drifted, DriftKind
from nodescale.disruption.guards import pod_blocks
from nodescale.k8s import drain
from nodescale.model.nodepool import Budget
from nodescale.model.pdb import PodDisruptionBudget
from nodescale.model.pod import DrainPod, Pod
from nodescale.usecases.disrupt.state import FORCEFUL
from tests import fakes
from tests.builders import NOW, inputs, node, pod, pool

PDB_AT_ZERO = PodDisruptionBudget.from_dict({"metadata": {"name": "web", "namespace": "default"},
                                            "spec": {"selector": {"matchLabels": {"app": "web"}}},
                                            "status": {"disruptionsAllowed": 0}})


def raw_pod(name: str, annotations: dict | None = None, grace: int | None = None,
            started: datetime = NOW - timedelta(hours=1)) -> dict:
    spec: dict = {"containers": [{"name": "c"}], "nodeName": "n1"}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "default", "annotations": annotations or {},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": spec, "status": {"phase": "Running", "startTime": format_timestamp(started)}}


def test_with_a_termination_grace_period_drift_goes_past_do_not_disrupt_and_pdbs_but_not_budgets() -> None:
    # Karpenter docs, TerminationGracePeriod: "When configured, a node may be disrupted via drift even if
    # there are pods with blocking PDBs or the karpenter.sh/do-not-disrupt annotation scheduled to it";
    # drift_test.go "should drift nodes that have do-not-disrupt pods when the NodeClaim has a TGP".
    views = [node("a", [pod("held", {"karpenter.sh/do-not-disrupt": "true"})]),
             node("b", [pod("p", labels={"app": "web"})])]
    changed = Drifted(DriftKind.AMI, "image changed")
    drift = {"a": changed, "b": changed}
    bounded = pool(termination_grace_period_seconds=3600.0)
    out = planner.plan(inputs(views, [bounded], cloud_drift=drift, pdbs=[PDB_AT_ZERO]))
    assert sorted(d.nodes[0] for d in out.decisions) == ["a", "b"]
    assert {d.reason for d in out.decisions} == {"Drifted"}
    # Without one, both stay (Pod-Level Controls: "conditionally excluded from Drift").
    out = planner.plan(inputs(views, [pool()], cloud_drift=drift, pdbs=[PDB_AT_ZERO]))
    assert out.decisions == [] and {r.kind for r in out.refusals} == {Blocker.DO_NOT_DISRUPT,
                                                                      Blocker.PDB}
    # Drift stays graceful: the budget still holds it.
    held = pool(termination_grace_period_seconds=3600.0, budgets=(Budget(nodes="0"),))
    out = planner.plan(inputs(views, [held], cloud_drift=drift))
    assert out.decisions == [] and {r.kind for r in out.refusals} == {Blocker.BUDGET}


def test_a_pod_is_deleted_its_own_grace_before_the_nodes_deadline() -> None:
    # Docs example: a node with a 1 h terminationGracePeriod and a do-not-disrupt pod of 300 s
    # terminationGracePeriodSeconds: the pod is deleted 55 minutes into the drain.
    deadline = NOW + timedelta(hours=1)
    assert drain_policy.pod_delete_time(DrainPod.from_dict(raw_pod("a", grace=300)), deadline) == NOW + timedelta(minutes=55)
    # A pod asking for more than the node has is deleted as soon as the drain starts; unset is 30 s.
    assert drain_policy.pod_delete_time(DrainPod.from_dict(raw_pod("b", grace=7200)), deadline) < NOW
    assert drain_policy.pod_delete_time(DrainPod.from_dict(raw_pod("c")), deadline) == deadline - timedelta(seconds=30)
    assert drain_policy.pod_delete_time(DrainPod.from_dict(raw_pod("d")), None) is None


def test_a_drain_holds_do_not_disrupt_until_the_grace_period_then_deletes_with_what_is_left() -> None:
    # terminator.go Drain: do-not-disrupt pods are not evicted (IsEvictable) yet keep the node waiting
    # (IsDrainable); DeleteExpiringPods deletes them once their delete time has come.
    api = fakes.RecordingApi()
    pods = [raw_pod("held", {"karpenter.sh/do-not-disrupt": "true"}, grace=60), raw_pod("web")]
    deadline = NOW + timedelta(minutes=30)
    early = drain.drain_round(api, "n1", involuntary=False, pods=pods, now=lambda: NOW, grace_deadline=deadline)
    assert early.blocked_by_do_not_disrupt == ["default/held"] and early.deleted == []
    assert api.writes == [("POST", "/api/v1/namespaces/default/pods/web/eviction")]

    api = fakes.RecordingApi()
    late = NOW + timedelta(minutes=29, seconds=30)  # past deadline - 60 s
    result = drain.drain_round(api, "n1", involuntary=False, pods=pods[:1], now=lambda: late,
                               grace_deadline=deadline)
    assert result.blocked_by_do_not_disrupt == [] and api.writes == [("DELETE", "/api/v1/namespaces/default/pods/held")]


def test_the_drain_and_the_planner_agree_on_a_do_not_disrupt_duration() -> None:
    # Docs, Pod-Level Controls: "30m" protects for 30 minutes after the pod starts running; once it has
    # run out the planner may disrupt the node, so the drain must not hold the pod either.
    ran_out = raw_pod("job", {"karpenter.sh/do-not-disrupt": "30m"}, started=NOW - timedelta(hours=1))
    running = raw_pod("job", {"karpenter.sh/do-not-disrupt": "30m"}, started=NOW - timedelta(minutes=10))
    assert pod_blocks(Pod.from_dict(ran_out), NOW) is None
    assert not drain_policy.has_do_not_disrupt(DrainPod.from_dict(ran_out), NOW)
    assert pod_blocks(Pod.from_dict(running), NOW) is not None
    assert drain_policy.has_do_not_disrupt(DrainPod.from_dict(running), NOW)
    api = fakes.RecordingApi()
    result = drain.drain_round(api, "n1", involuntary=False, pods=[ran_out], now=lambda: NOW)
    assert result.blocked_by_do_not_disrupt == []
    assert api.writes == [("POST", "/api/v1/namespaces/default/pods/job/eviction")]


def test_expiry_starts_forcefully_but_its_drain_is_not_involuntary() -> None:
    # Docs, Expiration: forceful (past budgets and do-not-disrupt), yet do-not-disrupt and PDB-blocked
    # pods are respected while draining until terminationGracePeriod; only repair's drain evicts them.
    assert "Expired" not in FORCEFUL and "Unhealthy" in FORCEFUL
    out = planner.plan(inputs([node("a", [pod("held", {"karpenter.sh/do-not-disrupt": "true"})])],
                              [pool(expire_after_seconds=3600.0, budgets=(Budget(nodes="0"),))]))
    assert [d.reason for d in out.decisions] == ["Expired"]
