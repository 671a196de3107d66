"""Messages that name a price carry the amounts as numbers, rendered in the region's currency where shown (#29.3)."""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from nodescale.commands import status as status_cmd
from nodescale.disruption import consolidation
from nodescale.disruption.decisions import Action, Blocked, Blocker, Decision, Reason, Refusal
from nodescale.disruption.replacement import Simulation
from nodescale.disruption.validation import Invalid, Invalidation, same_or_cheaper
from nodescale.model.currency import CNY, USD, Money, Priced, render
from nodescale.model.pod import Pod
from nodescale.settings import Settings
from nodescale.usecases.disrupt import act
from nodescale.usecases.disrupt.state import Report
from nodescale.usecases.provision import capacity
from nodescale.usecases.provision import launch as provision_launch
from nodescale.usecases.status import read_status
from tests.builders import node, replacement
from tests.unit.test_provisioning import FakeLauncher, FakeRecorder, _world
from tests.unit.test_provisioning import _pod as sized_pod
from tests.unit.test_status_snapshot import UNSCHEDULABLE, pod, world_of


def test_one_decision_renders_in_usd_and_in_cny() -> None:
    """#29.3: the core's decision holds its prices as numbers; the same object is shown in either currency."""
    nodes = [node("a", price=0.2), node("b", price=0.2)]
    new = replacement("p", 0.15, [("c5.large", 0.15, "on-demand"), ("t3.large", 0.16, "on-demand")], ["on-demand"])
    d = consolidation.evaluate(nodes, Simulation(replacements=[new]))
    assert isinstance(d, Decision)
    assert render(d.detail, USD) == "underutilized: the 2 nodes ($0.4000/h) can be replaced by one c5.large ($0.1500/h)"
    assert render(d.detail, CNY) == "underutilized: the 2 nodes (¥0.4000/h) can be replaced by one c5.large (¥0.1500/h)"


def test_a_refusal_and_an_invalidation_render_their_prices_in_either_currency() -> None:
    """#29.3: a refusal's and a dropped command's wording keep their prices as amounts up to where they are shown."""
    nodes = [node("a", price=0.2)]
    dear = replacement("p", 0.3, [("m5.xlarge", 0.3, "on-demand")], ["on-demand"])
    refusal = consolidation.evaluate(nodes, Simulation(replacements=[dear]))
    assert isinstance(refusal, Refusal)
    blocked = Blocked(refusal.nodes, refusal.reason, refusal.why, Blocker.NOT_CONSOLIDATABLE)
    assert render(blocked.message, USD) == (
        "not consolidated: the cheapest replacement (m5.xlarge, $0.3000/h) is not cheaper than $0.2000/h")
    assert render(blocked.message, CNY) == (
        "not consolidated: the cheapest replacement (m5.xlarge, ¥0.3000/h) is not cheaper than ¥0.2000/h")
    cheap = replacement("p", 0.1, [("c5.large", 0.1, "on-demand")], ["on-demand"])
    dearer = replacement("p", 0.3, [("m5.2xlarge", 0.3, "on-demand")], ["on-demand"])
    invalid = same_or_cheaper([cheap], [dearer])
    assert isinstance(invalid, Invalid) and invalid.kind == Invalidation.CHANGED
    assert render(invalid.message, CNY) == (
        "command no longer valid (simulation-changed): the simulation now asks for m5.2xlarge in NodePool p "
        "(¥0.3000/h), not c5.large in NodePool p (¥0.1000/h)")


@pytest.mark.parametrize("currency", [USD, CNY])
def test_a_dollar_sign_that_is_no_price_is_shown_as_written(currency: str) -> None:
    """#29.3: text around the amounts is never rewritten, so a "$5" that is part of a name stays "$5"."""
    why = Priced.of("pod apps/web has annotation cost=$5 and saves ", Money(0.25), "/h")
    shown = render(Blocked(["n1"], Reason.UNDERUTILIZED, why, Blocker.DO_NOT_DISRUPT).message, currency)
    sign = "$" if currency == USD else "¥"
    assert shown == f"not consolidated: pod apps/web has annotation cost=$5 and saves {sign}0.2500/h"


def test_status_in_a_china_region_keeps_a_dollar_in_a_pods_affinity_and_shows_prices_in_yuan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#29.3: the old code regex-replaced every "$<digit>" of a shown message in cn- regions, so a pod whose
    node affinity asks for team In [$1] read "team In [¥1]" in `nodescale status`; only the prices change."""
    pods = [pod("a", phase="Pending", status__conditions=UNSCHEDULABLE),
            pod("d", phase="Pending", status__conditions=UNSCHEDULABLE)]
    outcome = provision_launch.LaunchOutcome(dry_run=True)
    outcome.launches.append(provision_launch.Launch("default", "", "m5.large", "cn-north-1a", "spot", 0.04,
                                                    ["apps/a"], ["m5.large"]))
    # The solver's wording for a requirement no NodePool can meet (a pod's affinity values are free text).
    outcome.unschedulable = [("apps/d", "incompatible with nodepool default: no value of team satisfies team In [$1]")]

    def dry(rt: Any, world: Any, given: list[Pod], **kwargs: Any) -> provision_launch.LaunchOutcome:
        return outcome

    monkeypatch.setattr(capacity, "launch_capacity", dry)
    runtime: Any = type("Rt", (), {"settings": Settings("demo", "cn-north-1")})()
    world = dataclasses.replace(world_of([], pods), pending=[Pod.from_dict(raw) for raw in pods])
    data = read_status(runtime, world).to_dict()
    text = status_cmd.to_text(data)
    assert data["currency"] == CNY
    assert "would get a new node of NodePool default: [m5.large] in [cn-north-1a] (spot), from ¥0.0400/h" in text
    assert "no value of team satisfies team In [$1]" in text and "¥1" not in text


def test_a_claim_held_by_the_clusters_price_limit_says_so_in_the_regions_currency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#29.3: the cluster-wide pricePerHour limit's reason (pod events, logs, the summary) was written as "$" and
    only `nodescale status`/`explain` rewrote it; now it is rendered once, in the region's currency."""
    monkeypatch.setattr(capacity, "refresh_instances", lambda world, ec2: world)
    recorder = FakeRecorder()
    monkeypatch.setattr(capacity, "event_recorder", lambda rt, world: recorder)
    settings = Settings(cluster_name="demo", region="cn-north-1", cluster_limits={"pricePerHour": "0.001"})
    rt = SimpleNamespace(settings=settings, launcher=FakeLauncher(), api=None, cluster="demo",
                         aws=SimpleNamespace(dynamodb=None, ec2=None))
    outcome = capacity.launch_capacity(rt, _world(), [sized_pod("a", "1")], dry_run=True)
    assert outcome.launches == []
    [limit] = outcome.limits
    assert limit.reason.startswith("cluster-wide limit pricePerHour=¥0.0010/h reached: ¥0.0000/h in use, "
                                      "the node needs ¥"), limit
    assert "$" not in limit.reason and [why for _, why in outcome.unschedulable] == [limit.reason]


class _Run:
    """What `act` uses of a disrupt run: its report (in the region's currency), logger and node events."""

    def __init__(self, currency: str) -> None:
        self.report = Report(False, currency=currency)
        self.log = logging.getLogger("test")
        self.refusal_events = 0
        self.events_skipped = 0
        self.events: list[tuple[str, str, str]] = []

    def event(self, node: str, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append((node, reason, message))


def test_a_refusal_and_a_balanced_approval_are_shown_in_the_regions_currency() -> None:
    """#29.3: the report's "why" and the node events render the core's amounts in yuan in a cn- region; the
    ConsolidationApproved event, which the regex never reached, read "$" there before."""
    run: Any = _Run(CNY)
    why = Priced.of("the cheapest replacement (m5.large, ", Money(0.3), "/h) is not cheaper than ", Money(0.2), "/h")
    act.refused(run, Blocked(["n1"], Reason.UNDERUTILIZED, why, Blocker.NOT_CONSOLIDATABLE))
    shown = "not consolidated: the cheapest replacement (m5.large, ¥0.3000/h) is not cheaper than ¥0.2000/h"
    assert run.report.refused[0].to_json()["why"] == shown and run.events == [("n1", "Unconsolidatable", shown)]
    detail = Priced.of("underutilized: the node (", Money(0.4), "/h) can be replaced by one c5.large (",
                       Money(0.1), "/h)") + "; balanced score 2.00 for NodePool default"
    decision = Decision(["n1"], Reason.UNDERUTILIZED, detail, Action.REPLACE, saving_per_hour=0.3, score=2.0)
    run.events.clear()
    act._approved(run, decision)
    assert run.events == [("n1", "ConsolidationApproved", "underutilized: the node (¥0.4000/h) can be replaced by "
                                                           "one c5.large (¥0.1000/h); balanced score 2.00 for NodePool default")]
