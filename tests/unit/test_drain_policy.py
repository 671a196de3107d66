"""The drain policy (moved from k8s/drain, #29.4): which pods a drain leaves, do-not-disrupt, what a round leaves."""

from __future__ import annotations

import pytest

from nodescale.disruption.drain_policy import (
    DrainResult,
    EvictionOutcome,
    EvictionResult,
    backoff,
    has_do_not_disrupt,
    skip_reason,
)


def running(name="r", **meta) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running"},
    }


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        ({**running(), "status": {"phase": "Succeeded"}}, "finished"),
        (running(annotations={"kubernetes.io/config.mirror": "abc"}), "mirror"),
        (running(ownerReferences=[{"kind": "DaemonSet", "name": "x"}]), "DaemonSet"),
        (running(ownerReferences=[{"kind": "Node", "name": "n1"}]), "static"),
        ({**running(), "spec": {"tolerations": [{"operator": "Exists"}]}}, "tolerates"),
        ({**running(), "spec": {"tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists"}]}}, "tolerates"),
    ],
)
def test_pods_a_drain_leaves_on_the_node(pod, reason):
    assert reason in (skip_reason(pod) or "")


def test_pods_a_drain_removes():
    assert skip_reason(running()) is None
    other_toleration = {**running(), "spec": {"tolerations": [{"key": "other", "operator": "Exists"}]}}
    assert skip_reason(other_toleration) is None


def test_do_not_disrupt_annotations():
    assert has_do_not_disrupt(running(annotations={"karpenter.sh/do-not-disrupt": "true"}))
    # #31.3: do-not-evict holds on a v1alpha5/v1beta1 pool's node only (test_legacy_annotations: v1 ignores it).
    assert has_do_not_disrupt(running(annotations={"karpenter.sh/do-not-evict": "true"}), legacy=True)
    assert not has_do_not_disrupt(running(annotations={"karpenter.sh/do-not-disrupt": "false"}))
    assert not has_do_not_disrupt(running())


def test_drain_result_is_empty_only_when_nothing_is_left_to_wait_for():
    assert DrainResult("n1").empty
    assert not DrainResult("n1", evicted=["a"], in_flight=["a"]).empty
    assert not DrainResult("n1", blocked_by_pdb=["a"]).empty
    assert not DrainResult("n1", terminating=["a"]).empty
    assert DrainResult("n1", skipped={"a": "DaemonSet pod"}).empty
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
