"""The core's plans are the recorded ones (#29, "plans stay identical before and after"): 300 random calls of
``scheduling.solve`` and 100 of ``disruption.planner.plan`` (tests/plan_workloads.py), each held to the digest
recorded for its seed on the base commit in tests/fixtures/plans/random.json. The suite's own plan calls are
checked by scripts/plan_identity.py (tests/plan_recorder.py). The other tests here show the harness sees a
plan change: a price, an order, a decision.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from nodescale.disruption import planner
from nodescale.disruption.decisions import Action
from nodescale.scheduling.scheduler import solve
from tests import plan_digest, plan_recorder, plan_workloads
from tests.builders import TYPES, existing_node, pods, scheduling_pool

RECORDED = json.loads((Path(__file__).parent.parent / "fixtures" / "plans" / "random.json").read_text())
CHUNKS = 8
SOLVE_SAMPLE = {f"solve-{s}" for s in range(40)}
PLAN_SAMPLE = {f"plan-{s}" for s in range(40)}


def test_every_case_is_recorded() -> None:
    """#29: the recording holds every case the generator makes, 300 solve calls and 100 planner calls."""
    ids = [case_id for case_id, _, _ in plan_workloads.cases()]
    assert sorted(ids) == sorted(RECORDED)
    assert sum(i.startswith("solve-") for i in ids) == 300 and sum(i.startswith("plan-") for i in ids) == 100


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_the_random_plans_are_the_recorded_ones(chunk: int) -> None:
    """#29: each random case's plan has the digest recorded on the base commit (a share of the cases per chunk)."""
    only = sorted(RECORDED)[chunk::CHUNKS]
    differing = plan_workloads.differences(RECORDED, only)
    assert not differing, "plans changed:\n" + "\n".join(differing)


def _priced_up(*args: object, **kwargs: object) -> object:
    plan = solve(*args, **kwargs)
    if plan.node_claims:
        plan.node_claims[0].price += 0.001
    return plan


def _types_reversed(*args: object, **kwargs: object) -> object:
    plan = solve(*args, **kwargs)
    for claim in plan.node_claims:
        claim.instance_types = claim.instance_types[::-1]
    return plan


@pytest.mark.parametrize("tweak", [_priced_up, _types_reversed])
def test_a_changed_claim_is_seen(monkeypatch: pytest.MonkeyPatch, tweak: object) -> None:
    """#29: a claim a tenth of a cent dearer, or its instance types in another order, is a different plan."""
    monkeypatch.setattr(plan_workloads, "solve", tweak)
    differing = plan_workloads.differences(RECORDED, SOLVE_SAMPLE)
    with_claims = [i for i in SOLVE_SAMPLE if not RECORDED[i]["summary"].startswith("claims 0 ")]
    assert with_claims and len(differing) >= len(with_claims) // 2
    assert all("recorded:" in d and "now:" in d for d in differing)


def test_a_changed_decision_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """#29: a replacement turned into a plain delete is a different disruption plan."""
    plan = planner.plan

    def deletes(*args: object, **kwargs: object) -> planner.Outcome:
        out = plan(*args, **kwargs)
        out.decisions = [replace(d, action=Action.DELETE, replacements=[]) for d in out.decisions]
        return out

    monkeypatch.setattr(planner, "plan", deletes)
    replacing = [i for i in PLAN_SAMPLE if "/replace" in RECORDED[i]["summary"]]
    differing = plan_workloads.differences(RECORDED, PLAN_SAMPLE)
    assert replacing and sorted(d.split(":")[0] for d in differing) == sorted(replacing)


def test_the_suite_recorder_fails_a_call_whose_plan_changed() -> None:
    """#29: in check mode a recorded input whose output digest changed is a mismatch naming the test."""
    args = (pods(3, cpu="1"), [scheduling_pool()], {"default": TYPES})
    recording = plan_recorder.Recorder(None)
    recording.wrap("solve", solve)(*args)
    checking = plan_recorder.Recorder({row["in"]: row["out"] for row in recording.rows})
    checking.test = "t::check"
    checking.wrap("solve", solve)(*args)
    assert checking.hits == 1 and checking.mismatches == {}
    checking.wrap("solve", functools.wraps(solve)(_priced_up))(*args)
    assert checking.hits == 2 and list(checking.mismatches) == ["t::check"] and len(checking.mismatches["t::check"]) == 1


def test_a_digest_ignores_identity_insertion_order_and_generated_names() -> None:
    """#29: equal inputs built apart, with mappings in another order and other generated names, digest alike."""
    def call(labels: dict[str, str], node: str) -> tuple[str, str, str]:
        nodes = [existing_node(node, labels=labels)]
        kwargs = {"pods": pods(2), "nodepools": [], "instance_types_by_pool": {}, "existing_nodes": nodes}
        return plan_digest.digests("solve", kwargs, solve(**kwargs))

    first = call({"a": "1", "b": "2"}, "i-0123456789abcdef0")
    second = call({"b": "2", "a": "1"}, "i-0fedcba9876543210")
    assert first[:2] == second[:2]
    assert call({"a": "1", "b": "3"}, "i-0123456789abcdef0")[0] != first[0]
