"""#31.5: the pools single-node consolidation did not reach are kept between passes of a warm container, as
Karpenter keeps them in its controller (``PreviouslyUnseenNodePools``)."""

from __future__ import annotations

from nodescale.disruption.consolidation import SearchResult
from nodescale.disruption.context import Outcome
from nodescale.usecases.disrupt import run


def _outcome(unseen: list[str] | None) -> Outcome:
    out = Outcome()
    out.consolidation = SearchResult(None, unseen_pools=unseen)
    return out


def test_unseen_pools_are_kept_until_a_pass_reaches_them(monkeypatch) -> None:
    """#31.5. Restates kubernetes-sigs/karpenter singlenodeconsolidation.go ``ComputeCommands`` (PreviouslyUnseenNodePools
    set on a timeout or a full pass, left alone when a command is returned), as singlenodeconsolidation_test.go,
    Context "Candidate Shuffling", It "should mark nodepools as timed out when timeout occurs" and It "should reset
    timed out nodepools when all nodepools are evaluated" check it: a sliced pass over other pools keeps them."""
    monkeypatch.setattr(run, "_unseen_pools", set())
    run.remember_unseen(_outcome(["b", "c"]), ["a", "b", "c"])
    assert run._unseen_pools == {"b", "c"}
    run.remember_unseen(_outcome(None), ["a", "b", "c"])  # stopped at a decision: unchanged
    assert run._unseen_pools == {"b", "c"}
    run.remember_unseen(_outcome([]), ["a", "b"])  # a pass over a and b reached both; c was not in it
    assert run._unseen_pools == {"c"}
