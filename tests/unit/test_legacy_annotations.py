"""#31.3: karpenter.sh/do-not-evict (pods) and karpenter.sh/do-not-consolidate (nodes) hold a v1alpha5 or v1beta1 pool's
nodes, as Karpenter honoured them up to v0.37, and are ignored on a karpenter.sh/v1 pool's nodes, as Karpenter v1.0
dropped them (kubernetes-sigs/karpenter v0.37.0 pkg/utils/pod/scheduling.go HasDoNotDisrupt and
pkg/controllers/disruption/consolidation.go read v1alpha5.DoNotEvictPodAnnotationKey and
DoNotConsolidateNodeAnnotationKey; v1.0.0 has neither key: only karpenter.sh/do-not-disrupt)."""

from __future__ import annotations

import pytest

from nodescale.disruption import drain_policy, planner
from nodescale.disruption.drain_policy import DrainResult, sort_pods
from nodescale.model.pod import DrainPod
from tests.builders import NOW, fits_elsewhere, inputs, node, pod, pool, since

EVICT = {"karpenter.sh/do-not-evict": "true"}
CONSOLIDATE = {"karpenter.sh/do-not-consolidate": "true"}


@pytest.mark.parametrize(("api", "held"), [("karpenter.sh/v1", False), ("karpenter.sh/v1beta1", True),
                                           ("karpenter.sh/v1alpha5", True)])
def test_do_not_evict_holds_only_a_legacy_pools_node(api: str, held: bool) -> None:
    """#31.3: a pod's do-not-evict blocks consolidating its node on a v1alpha5/v1beta1 pool, not on a v1 pool."""
    out = planner.plan(inputs([node("a", [pod("x", EVICT)])], [pool(api=api)]), fits_elsewhere)
    assert (out.decisions == []) is held
    assert any("karpenter.sh/do-not-evict" in str(r.why) for r in out.refusals) is held


@pytest.mark.parametrize(("api", "held"), [("karpenter.sh/v1", False), ("karpenter.sh/v1beta1", True)])
def test_do_not_consolidate_holds_only_a_legacy_pools_node(api: str, held: bool) -> None:
    """#31.3: a node's do-not-consolidate keeps an empty node of a v1beta1 pool, not of a v1 pool."""
    out = planner.plan(inputs([node("a", annotations={**since(100), **CONSOLIDATE})], [pool(api=api)]))
    assert (out.decisions == []) is held


def test_a_voluntary_drain_evicts_a_do_not_evict_pod_of_a_v1_pool() -> None:
    """#31.3: the drain of a v1 pool's node evicts a pod with only do-not-evict; a legacy pool's drain leaves it."""
    raw = {"metadata": {"name": "x", "namespace": "default", "annotations": EVICT,
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
           "spec": {"containers": [{"name": "c"}], "nodeName": "a"}, "status": {"phase": "Running"}}
    drained = DrainPod.from_dict(raw)
    v1 = DrainResult(node="a")
    evict, _ = sort_pods(v1, [drained], involuntary=False, grace_deadline=None, now=NOW)
    assert evict == [drained] and v1.blocked_by_do_not_disrupt == []
    legacy = DrainResult(node="a")
    evict, _ = sort_pods(legacy, [drained], involuntary=False, grace_deadline=None, now=NOW, legacy=True)
    assert evict == [] and legacy.blocked_by_do_not_disrupt == ["default/x"]
    assert not drain_policy.has_do_not_disrupt(drained, NOW) and drain_policy.has_do_not_disrupt(drained, NOW, legacy=True)
