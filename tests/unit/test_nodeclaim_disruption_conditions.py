"""NodeClaim disruption conditions (#30.1): Drifted, Consolidatable, DisruptionReason, InstanceTerminating,
as Karpenter v1's nodeclaim disruption controller, disruption queue and termination controller write them."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from nodescale.clock import format_timestamp
from nodescale.disruption import claim_conditions as cc
from nodescale.disruption.drift import Drifted, DriftKind
from nodescale.disruption.nodes import NodeView
from tests.builders import NOW, node, pod, pool

STAMP = format_timestamp(NOW)
INIT = {"karpenter.sh/initialized": "true"}


def by_type(conditions: list[dict]) -> dict[str, dict]:
    return {c["type"]: c for c in conditions}


def empty_for(seconds: float, **kw: object) -> NodeView:
    v = node("a", labels=INIT, **kw)  # type: ignore[arg-type]
    since = format_timestamp(NOW - timedelta(seconds=seconds))
    return dataclasses.replace(v, annotations={**v.annotations, "nodescale.io/empty-since": since})


def test_should_detect_drift() -> None:
    """kubernetes-sigs/karpenter pkg/controllers/nodeclaim/disruption/drift_test.go, Describe("Drift"),
    It("should detect drift"): Drifted True, its reason and message the drift reason."""
    mark = cc.drifted_mark(Drifted(DriftKind.AMI, "image ami-1 is no longer selected"))
    out = cc.with_marks([], {cc.DRIFTED: mark}, now=STAMP, generation=1)
    assert out is not None
    drifted = by_type(out)[cc.DRIFTED]
    assert (drifted["status"], drifted["reason"], drifted["message"]) == ("True", "AMIDrift", "AMIDrift")


def test_should_remove_the_status_condition_if_the_nodeclaim_is_no_longer_drifted() -> None:
    """drift_test.go, It("should remove the status condition from the nodeClaim if the nodeClaim is no longer
    drifted")."""
    old = cc.with_marks([], {cc.DRIFTED: ("AMIDrift", "AMIDrift")}, now=STAMP, generation=1) or []
    out = cc.with_marks(old, {cc.DRIFTED: cc.drifted_mark(None)}, now=STAMP, generation=1)
    assert out is not None and cc.DRIFTED not in by_type(out)


def test_should_mark_nodeclaims_as_consolidatable() -> None:
    """pkg/controllers/nodeclaim/disruption/consolidation_test.go, Describe("Underutilized"), It("should mark
    NodeClaims as consolidatable"): not before consolidateAfter has passed since the last pod event, then True."""
    p = pool(consolidate_after_seconds=60.0)
    busy = node("b", [pod("x")], labels=INIT)
    busy = dataclasses.replace(busy, annotations={"nodescale.io/pods-changed": f"{STAMP} {busy.pods_digest}"})
    assert not cc.consolidatable(busy, p, NOW)
    assert cc.consolidatable(busy, p, NOW + timedelta(seconds=60))
    out = cc.with_marks([], {cc.CONSOLIDATABLE: cc.consolidatable_mark(True)}, now=STAMP, generation=1)
    assert out is not None and by_type(out)[cc.CONSOLIDATABLE]["status"] == "True"
    assert by_type(out)[cc.CONSOLIDATABLE]["reason"] == "Consolidatable"


def test_an_empty_node_is_consolidatable_once_empty_for_consolidate_after() -> None:
    """consolidation_test.go's "should mark NodeClaims as consolidatable", for a node whose last pod went: the clock
    is the time nodescale first saw it empty."""
    p = pool(consolidate_after_seconds=60.0)
    assert not cc.consolidatable(empty_for(30), p, NOW)
    assert cc.consolidatable(empty_for(60), p, NOW)


def test_should_remove_the_status_condition_when_last_pod_event_is_too_recent() -> None:
    """consolidation_test.go, It("should remove the status condition from the nodeClaim when lastPodEvent is too
    recent")."""
    old = cc.with_marks([], {cc.CONSOLIDATABLE: cc.TRUE_MARK}, now=STAMP, generation=1) or []
    ok = cc.consolidatable(empty_for(10), pool(consolidate_after_seconds=60.0), NOW)
    out = cc.with_marks(old, {cc.CONSOLIDATABLE: cc.consolidatable_mark(ok)}, now=STAMP, generation=1)
    assert out is not None and cc.CONSOLIDATABLE not in by_type(out)


def test_should_remove_the_status_condition_when_consolidate_after_is_never() -> None:
    """consolidation_test.go, It("should remove the status condition from the nodeClaim when consolidateAfter is
    never")."""
    assert not cc.consolidatable(empty_for(86400), pool(consolidate_after_seconds=None), NOW)


def test_should_remove_the_status_condition_when_the_nodeclaim_is_not_initialized() -> None:
    """consolidation_test.go, It("should remove the status condition from the nodeClaim when the nodeClaim is not
    initialized")."""
    v = empty_for(3600)
    uninitialized = dataclasses.replace(v, labels={k: x for k, x in v.labels.items() if k not in INIT})
    assert not cc.consolidatable(uninitialized, pool(consolidate_after_seconds=60.0), NOW)


def test_disruption_reason_and_instance_terminating_are_set_true_with_karpenters_reasons() -> None:
    """pkg/controllers/disruption/queue.go marks DisruptionReason with the command's reason as reason and message;
    pkg/controllers/node/termination sets InstanceTerminating True (its reason the type)."""
    out = cc.with_marks([], {cc.DISRUPTION_REASON: ("Empty", "Empty"), cc.INSTANCE_TERMINATING: cc.TRUE_MARK},
                        now=STAMP, generation=3)
    assert out is not None
    got = by_type(out)
    assert (got[cc.DISRUPTION_REASON]["reason"], got[cc.DISRUPTION_REASON]["message"]) == ("Empty", "Empty")
    assert (got[cc.INSTANCE_TERMINATING]["status"], got[cc.INSTANCE_TERMINATING]["reason"]) == \
        ("True", "InstanceTerminating")
    assert got[cc.DISRUPTION_REASON]["observedGeneration"] == 3


def test_nothing_changed_writes_nothing_and_other_conditions_are_kept() -> None:
    """One status patch per changed NodeClaim, only when something changed (#30.1)."""
    registered = {"type": "Registered", "status": "True", "reason": "Registered", "message": "",
                  "lastTransitionTime": STAMP, "observedGeneration": 1}
    once = cc.with_marks([registered], {cc.CONSOLIDATABLE: cc.TRUE_MARK, cc.DRIFTED: None}, now=STAMP, generation=1)
    assert once is not None and by_type(once)["Registered"] == registered
    later = format_timestamp(NOW + timedelta(minutes=5))
    assert cc.with_marks(once, {cc.CONSOLIDATABLE: cc.TRUE_MARK, cc.DRIFTED: None}, now=later, generation=1) is None
