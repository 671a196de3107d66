"""A disruption pass split into slices of NodePools (issue 18 item 3): how the pools are cut, what a
slice event may say, and that a slice's plan takes only its pools' nodes while every budget stays the
whole pool's."""

from __future__ import annotations

import pytest

from nodescale.disruption import planner
from nodescale.disruption.slices import MAX_SLICES, plan_slices
from nodescale.model.nodepool import Budget
from nodescale.settings import DISRUPTION_SLICE_NODES, Settings, SettingsError
from nodescale.usecases.disrupt.slices import Slice, SliceError
from tests.builders import inputs, node, pool, since


def test_a_cluster_within_the_threshold_is_one_slice_of_every_pool() -> None:
    assert plan_slices({"a": 600, "b": 400}, slice_nodes=1000) == [["a", "b"]]
    assert plan_slices({"a": 6000, "b": 4000}, slice_nodes=0) == [["a", "b"]]  # 0: never split
    assert plan_slices({"big": 10_000}, slice_nodes=1000) == [["big"]]  # one pool is never cut
    assert plan_slices({}, slice_nodes=1000) == []


def test_larger_clusters_are_cut_into_whole_pools_with_even_node_counts() -> None:
    counts = {"a": 4000, "b": 3000, "c": 2000, "d": 1000, "e": 0}
    slices = plan_slices(counts, slice_nodes=5000)
    assert sorted(sum(counts[p] for p in s) for s in slices) == [5000, 5000]
    assert sorted(p for s in slices for p in s) == sorted(counts)  # every pool once, none cut
    # As many slices as the size asks for, never more than pools or MAX_SLICES.
    assert len(plan_slices(counts, slice_nodes=2500)) == 4
    assert len(plan_slices({f"p{i}": 100 for i in range(40)}, slice_nodes=100)) == MAX_SLICES


def test_a_slice_event_round_trips_and_bad_ones_name_the_field() -> None:
    piece = Slice(("team-a", "team-b"), 1, 3)
    assert Slice.from_event(piece.event()["slice"]) == piece
    for bad, field in (({"pools": []}, "slice.pools"), ({"pools": ["a"], "index": 3, "of": 2}, "slice.index"),
                       ("team-a", "slice="), ({"pools": ["a"], "of": MAX_SLICES + 1}, "slice.index")):
        with pytest.raises(SliceError, match=field.replace(".", r"\.")):
            Slice.from_event(bad)


def test_the_slice_threshold_setting_is_a_whole_number() -> None:
    base = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}
    assert Settings.from_env(base).disruption_slice_nodes == 2000
    assert Settings.from_env({**base, DISRUPTION_SLICE_NODES: "0"}).disruption_slice_nodes == 0
    with pytest.raises(SettingsError, match=f"{DISRUPTION_SLICE_NODES}='lots': allowed is a whole number"):
        Settings.from_env({**base, DISRUPTION_SLICE_NODES: "lots"})


def test_a_slice_plans_only_its_pools_nodes_and_counts_each_budget_over_the_whole_pool() -> None:
    # Two pools, each with an empty node past consolidateAfter; pool a's 50% budget over its two nodes
    # allows one. The slice of pool b removes b's node only; the slice of pool a removes one of a's.
    pools = [pool("a", budgets=(Budget(nodes="50%"),)), pool("b")]
    views = [node("a1", nodepool="a", annotations=since(60)), node("a2", nodepool="a", annotations=since(60)),
             node("b1", nodepool="b", annotations=since(60))]
    only_b = planner.plan(inputs(views, pools, candidate_pools=frozenset({"b"})))
    assert [d.nodes for d in only_b.decisions] == [["b1"]]
    only_a = planner.plan(inputs(views, pools, candidate_pools=frozenset({"a"})))
    assert [d.nodes for d in only_a.decisions] == [["a1"]]
    whole = planner.plan(inputs(views, pools))
    assert sorted(n for d in whole.decisions for n in d.nodes) == ["a1", "b1"]  # the same as the two slices


class FakeLambda:
    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[dict] = []

    def invoke(self, **kwargs: object) -> dict:
        self.calls.append(kwargs)
        return {"StatusCode": self.status}


def test_a_slice_is_started_as_an_asynchronous_invocation_and_a_refusal_is_an_error() -> None:
    import json

    from nodescale.aws.fan_out import FanOutError, invoke_async

    arn = "arn:aws:lambda:us-east-1:123456789012:function:nodescale-c-disruption"
    accepted = FakeLambda(202)
    invoke_async(arn, Slice(("a",), 0, 2).event(), accepted)
    [call] = accepted.calls
    assert call["FunctionName"] == arn and call["InvocationType"] == "Event"
    assert json.loads(call["Payload"]) == {"slice": {"pools": ["a"], "index": 0, "of": 2}}
    with pytest.raises(FanOutError, match="answered 200"):
        invoke_async(arn, Slice(("a",)).event(), FakeLambda(200))
