"""The disruption methods behind one interface: the planner asks them in order and the first one wins."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from nodescale.disruption import planner
from nodescale.disruption.context import Context
from nodescale.disruption.decisions import Action, Blocker, Decision, Reason
from nodescale.disruption.methods import (
    CapacityBlockExpiry,
    Consolidation,
    Drift,
    Emptiness,
    Expiry,
    Method,
    Repair,
    StaticScaleDown,
    default_methods,
)
from nodescale.disruption.nodes import NodeView
from nodescale.model.featuregates import ALL_ON
from nodescale.model.pod import do_not_disrupt
from tests.builders import NOW, fits_elsewhere, inputs, node, pod, pool, since


class Wants(Method):
    """A method that wants the named nodes and records which ones it was offered."""

    reason = Reason.DRIFTED

    def __init__(self, name: str, wanted: set[str]) -> None:
        self.name = name  # type: ignore[misc]
        self.wanted = wanted
        self.offered: list[str] = []

    def should_disrupt(self, node: NodeView, ctx: Context) -> bool:
        self.offered.append(node.name)
        return node.name in self.wanted

    def compute(self, candidates: Sequence[NodeView], ctx: Context) -> list[Decision]:
        taken = []
        for v in candidates:
            d = Decision([v.name], self.reason, f"by {self.name}", Action.DELETE)
            ctx.take(d, v.nodepool)
            taken.append(d)
        return taken


def test_the_default_order_is_karpenters() -> None:
    # A static pool's scale-down comes first: its user asked for it (Karpenter's static capacity design).
    # #31.5: with their gates on (StaticCapacity, NodeRepair); the gates off are tested in test_feature_gates_honoured.
    assert [type(m) for m in default_methods(fits_elsewhere, ALL_ON)] == [
        StaticScaleDown, Repair, CapacityBlockExpiry, Expiry, Drift, Emptiness, Consolidation]
    assert [m.reason for m in default_methods(fits_elsewhere, ALL_ON)] == [
        "ScaledDown", "Unhealthy", "CapacityBlockExpiring", "Expired", "Drifted", "Empty", "Underutilized"]
    assert [type(m) for m in default_methods(gates=ALL_ON)] == [
        StaticScaleDown, Repair, CapacityBlockExpiry, Expiry, Drift, Emptiness]


def test_the_first_method_that_decides_a_node_keeps_it_from_the_next() -> None:
    first, second = Wants("first", {"a"}), Wants("second", {"a", "b"})
    out = planner.plan(inputs([node("a"), node("b")]), methods=[first, second])
    assert [d.detail for d in out.decisions] == ["by first", "by second"]
    assert [d.nodes for d in out.decisions] == [["a"], ["b"]]
    assert first.offered == ["a", "b"] and second.offered == ["b"]


def test_a_node_every_method_would_take_goes_for_the_earliest_reason() -> None:
    # NotReady past its toleration, expired, drifted (label) and empty long enough: repair comes first.
    sick = node("a", ready=False, ready_for_s=3600, age_h=5, labels={"team": "b"}, annotations=since(900))
    healthy = [node(f"ok{i}", [pod(f"p{i}")], age_h=0.5) for i in range(5)]
    p = pool(expire_after_seconds=3600.0)
    out = planner.plan(inputs([sick, *healthy], [p]), fits_elsewhere)
    assert [(d.nodes, d.reason) for d in out.decisions if "a" in d.nodes] == [(["a"], "Unhealthy")]
    # Ready again: expiry before drift and emptiness.
    expired = node("a", age_h=5, labels={"team": "b"}, annotations=since(900))
    [d] = planner.plan(inputs([expired], [p]), fits_elsewhere).decisions
    assert d.reason == "Expired"
    # Not expired: drift before emptiness.
    [d] = planner.plan(inputs([node("a", labels={"team": "b"}, annotations=since(900))]), fits_elsewhere).decisions
    assert d.reason == "Drifted"


def test_reversing_the_methods_changes_who_wins() -> None:
    drifted_and_empty = node("a", labels={"team": "b"}, annotations=since(900))
    [d] = planner.plan(inputs([drifted_and_empty]), methods=[Emptiness(), Drift()]).decisions
    assert d.reason == "Empty"


def test_reasons_and_guards_are_their_old_strings() -> None:
    assert (Reason.EMPTY, Reason.ORPHANED, Action.REPLACE) == ("Empty", "Orphaned", "replace")
    assert f"{Reason.UNHEALTHY}: x" == "Unhealthy: x" and str(Blocker.BUDGET) == "budget"


def test_one_do_not_disrupt_rule_with_and_without_a_clock() -> None:
    started = NOW - timedelta(hours=1)
    assert do_not_disrupt({"karpenter.sh/do-not-disrupt": "30m"}, started, NOW) is None
    assert do_not_disrupt({"karpenter.sh/do-not-disrupt": "30m"}) == "karpenter.sh/do-not-disrupt=30m (still protected)"
    # #31.3: do-not-evict holds on a v1alpha5/v1beta1 pool's node only.
    assert do_not_disrupt({"karpenter.sh/do-not-disrupt": "false", "karpenter.sh/do-not-evict": "true"},
                          legacy=True) == "karpenter.sh/do-not-evict"
    assert do_not_disrupt({}) is None
