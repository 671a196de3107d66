"""The drain policy (moved from k8s/drain, #29.4): which pods a drain leaves, do-not-disrupt, what a round leaves."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodescale.disruption.drain_policy import (
    DrainGroup,
    DrainResult,
    EvictionOutcome,
    EvictionResult,
    Skip,
    SkipKind,
    backoff,
    current_group,
    drain_group,
    has_do_not_disrupt,
    pod_skip,
    skip_reason,
    sort_pods,
)
from nodescale.model.pod import DrainPod, Pod

_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def running(name="r", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize(
    ("pod", "kind", "reason"),
    [
        ({**running(), "status": {"phase": "Succeeded"}}, SkipKind.FINISHED, "finished (Succeeded)"),
        (running(annotations={"kubernetes.io/config.mirror": "abc"}), SkipKind.MIRROR, "mirror (static) pod"),
        (running(ownerReferences=[{"kind": "Node", "name": "n1"}]), SkipKind.STATIC, "static pod"),
        ({**running(), "spec": {"tolerations": [{"operator": "Exists"}]}}, SkipKind.TOLERATES,
         "tolerates karpenter.sh/disrupted=:NoSchedule"),
        ({**running(), "spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}},
         SkipKind.TOLERATES, "tolerates karpenter.sh/disrupted=:NoSchedule"),
    ],
)
def test_pods_a_drain_leaves_on_the_node(pod, kind, reason):
    """#29.3: a typed Skip (kind and message); #29.1: the parsed Pod gets the same answer as the raw pod."""
    skip = skip_reason(DrainPod.from_dict(pod))
    assert skip is not None and skip.kind is kind and str(skip) == reason
    assert pod_skip(Pod.from_dict(pod)) == skip


def test_pods_a_drain_removes():
    assert skip_reason(DrainPod.from_dict(running())) is None
    other_toleration = {**running(), "spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}
    assert skip_reason(DrainPod.from_dict(other_toleration)) is None
    assert pod_skip(Pod.from_dict(running())) is None and pod_skip(Pod.from_dict(other_toleration)) is None


def test_do_not_disrupt_annotations():
    assert has_do_not_disrupt(DrainPod.from_dict(running(annotations={"karpenter.sh/do-not-disrupt": "true"})))
    # #31.3: do-not-evict holds on a v1alpha5/v1beta1 pool's node only (test_legacy_annotations: v1 ignores it).
    assert has_do_not_disrupt(DrainPod.from_dict(running(annotations={"karpenter.sh/do-not-evict": "true"})), legacy=True)
    assert not has_do_not_disrupt(DrainPod.from_dict(running(annotations={"karpenter.sh/do-not-disrupt": "false"})))
    assert not has_do_not_disrupt(DrainPod.from_dict(running()))


def test_drain_result_is_empty_only_when_nothing_is_left_to_wait_for():
    assert DrainResult("n1").empty
    assert not DrainResult("n1", evicted=["a"], in_flight=["a"]).empty
    assert not DrainResult("n1", blocked_by_pdb=["a"]).empty
    assert not DrainResult("n1", terminating=["a"]).empty
    assert DrainResult("n1", skipped={"a": Skip(SkipKind.MIRROR, "mirror (static) pod")}).empty
    total = DrainResult("n1", evicted=["a"], in_flight=["a"]).merge(DrainResult("n1"))
    assert total.empty and total.evicted == ["a"]


def test_backoff_doubles_while_blocked_up_to_its_cap_and_settles_briefly_after_evictions():
    """#29.4: the rounds' backoff, moved out of k8s/drain.drain into the core, as the loop used it."""
    blocked = DrainResult("n1", blocked_by_pdb=["a"])
    assert backoff(blocked, 0.5) == (0.5, 1.0)
    assert backoff(blocked, 8.0) == (8.0, 8.0)
    assert backoff(DrainResult("n1", blocked_by_pdb=["a"], retry_after=20.0), 1.0) == (20.0, 2.0)
    assert backoff(DrainResult("n1", evicted=["a"], in_flight=["a"]), 4.0) == (0.25, 0.5)
    assert backoff(DrainResult("n1", failed={"a": "500: boom"}), 2.0) == (2.0, 4.0)


def test_eviction_outcomes_are_counted_by_their_enum():
    """#29.3: a drain round tallies typed eviction outcomes (EvictionResult), not the strings
    "evicted"/"pdb"/"gone"/"failed"; a forced delete counts as evicted and deleted."""
    result = DrainResult(node="n1")
    result.record("ns/a", EvictionOutcome(EvictionResult.EVICTED), forced=False)
    result.record("ns/b", EvictionOutcome(EvictionResult.EVICTED), forced=True)
    result.record("ns/c", EvictionOutcome(EvictionResult.BLOCKED_BY_PDB, retry_after=3.0), forced=False)
    result.record("ns/d", EvictionOutcome(EvictionResult.BLOCKED_BY_PDB, retry_after=1.0), forced=False)
    result.record("ns/e", EvictionOutcome(EvictionResult.GONE), forced=False)
    result.record("ns/f", EvictionOutcome(EvictionResult.FAILED, error="500: boom"), forced=False)
    assert result.evicted == ["ns/a", "ns/b"]
    assert result.deleted == ["ns/b"]
    assert result.in_flight == ["ns/a", "ns/b"]
    assert result.blocked_by_pdb == ["ns/c", "ns/d"]
    assert result.retry_after == 3.0
    assert result.failed == {"ns/f": "500: boom"}
    assert "ns/e" not in result.remaining
    assert str(EvictionResult.BLOCKED_BY_PDB) == "blocked by a PodDisruptionBudget"


def _pod(name: str, *, daemon: bool = False, priority: str | None = None, **extra) -> dict:
    pod = running(name, **({"ownerReferences": [{"kind": "DaemonSet", "name": "ds"}]} if daemon else {}), **extra)
    if priority:
        pod["spec"]["priorityClassName"] = priority
    return pod


def test_drain_groups_follow_karpenters_order():
    """#30.3, restating kubernetes-sigs/karpenter pkg/controllers/node/termination/suite_test.go, Describe
    "Termination" / It "should evict pods in order and wait until pods are fully deleted": non-critical pods,
    then non-critical DaemonSet pods, then critical (system-cluster-critical / system-node-critical) pods,
    then critical DaemonSet pods. DaemonSet pods are drained too (they were left on the node before)."""
    assert drain_group(DrainPod.from_dict(_pod("a"))) is DrainGroup.NON_CRITICAL
    assert drain_group(DrainPod.from_dict(_pod("b", daemon=True))) is DrainGroup.NON_CRITICAL_DAEMON
    assert drain_group(DrainPod.from_dict(_pod("c", priority="system-node-critical"))) is DrainGroup.CRITICAL
    assert drain_group(DrainPod.from_dict(_pod("d", priority="system-cluster-critical"))) is DrainGroup.CRITICAL
    assert drain_group(DrainPod.from_dict(_pod("e", daemon=True, priority="system-node-critical"))) is DrainGroup.CRITICAL_DAEMON
    assert drain_group(DrainPod.from_dict(_pod("f", priority="high"))) is DrainGroup.NON_CRITICAL
    assert skip_reason(DrainPod.from_dict(_pod("g", daemon=True))) is None


@pytest.mark.parametrize(
    ("names", "evicted_first"),
    [
        (["app", "ds", "crit", "critds"], {"default/app"}),
        (["ds", "crit", "critds"], {"default/ds"}),
        (["crit", "critds"], {"default/crit"}),
        (["critds"], {"default/critds"}),
    ],
)
def test_a_round_evicts_only_the_first_group_left(names, evicted_first):
    """#30.3 (same upstream It): a group starts only once every pod of the earlier groups is gone; the
    later groups' pods wait (and keep the node from counting as drained)."""
    pods = {
        "app": _pod("app"),
        "ds": _pod("ds", daemon=True),
        "crit": _pod("crit", priority="system-cluster-critical"),
        "critds": _pod("critds", daemon=True, priority="system-node-critical"),
    }
    result = DrainResult("n1")
    to_evict, to_delete = sort_pods(result, [DrainPod.from_dict(pods[n]) for n in names], False, None, _NOW)
    assert {p.key for p in to_evict} == evicted_first
    assert not to_delete
    assert set(result.waiting) == {f"default/{n}" for n in names} - evicted_first
    assert result.empty == (len(names) == 1)  # the evictions themselves are recorded by the round


def test_a_terminating_pod_holds_back_the_next_group():
    """#30.3 (same upstream It, "wait until pods are fully deleted"): a pod of the first group that is
    shutting down still blocks the DaemonSet pods."""
    leaving = _pod("app", deletionTimestamp="2026-01-01T00:00:00Z")
    result = DrainResult("n1")
    to_evict, _ = sort_pods(result, [DrainPod.from_dict(p) for p in (leaving, _pod("ds", daemon=True))], False, None, _NOW)
    assert to_evict == [] and result.terminating == ["default/app"] and result.waiting == ["default/ds"]


def test_pods_a_drain_never_evicts_do_not_start_a_group():
    """#30.3, restating karpenter's termination suite_test.go It "should not evict pods that tolerate karpenter
    disruption taint with equal operator" and "should delete nodes with terminal pods": such pods are no group's,
    so the next group starts without them."""
    tolerating = _pod("tol", tolerations=[])
    tolerating["spec"]["tolerations"] = [
        {"key": "karpenter.sh/disrupted", "operator": "Equal", "value": "", "effect": "NoSchedule"}]
    finished = {**_pod("done"), "status": {"phase": "Succeeded"}}
    mirror = _pod("mirror", annotations={"kubernetes.io/config.mirror": "x"})
    assert current_group(map(DrainPod.from_dict, [tolerating, finished, mirror, _pod("ds", daemon=True)])) is DrainGroup.NON_CRITICAL_DAEMON
    assert current_group(map(DrainPod.from_dict, [tolerating, finished, mirror])) is None


def test_a_later_group_pod_past_its_delete_time_is_deleted_at_once():
    """#30.3: Karpenter deletes every pod whose terminationGracePeriod delete time has come, whatever its
    group (termination suite_test.go It "should preemptively delete pods to satisfy their
    terminationGracePeriodSeconds")."""
    result = DrainResult("n1")
    to_evict, to_delete = sort_pods(result, [DrainPod.from_dict(_pod("app")), DrainPod.from_dict(_pod("ds", daemon=True))], False, _NOW, _NOW)
    assert [p.name for p in to_delete] == ["app", "ds"] and not to_evict
