"""A spot/on-demand split per NodePool (``nodescale.io/on-demand-min-percent``), asked of Karpenter in
aws/karpenter-provider-aws#331: at least that share of the pool's nodes stays off spot through launches,
interruption replacements, emptiness and consolidation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nodescale.cli import main
from nodescale.config.nodepools import convert_nodepool, convert_provisioner
from nodescale.disruption import planner
from nodescale.disruption.consolidation import evaluate
from nodescale.disruption.decisions import Blocker, Refusal
from nodescale.disruption.replacement import Simulation
from nodescale.model import labels as wk
from nodescale.model.requirements import Requirement
from nodescale.scheduling.capacity_split import (
    SplitRefusal,
    removal_breaks_split,
    required_on_demand,
    split_refusal,
)
from nodescale.scheduling.plan import ExistingNode
from nodescale.scheduling.scheduler import solve
from tests.builders import MEDIUM, inputs, node, pods, since
from tests.builders import pool as disruption_pool
from tests.builders import scheduling_pool as pool

BOTH = Requirement.create(wk.CAPACITY_TYPE, "In", [wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND])


def split_pool(percent: int = 30):
    return dataclasses.replace(pool("default", BOTH), on_demand_min_percent=percent)


def one_per_node(n: int, name: str = "app") -> list:
    # 3 vCPU each on 4-vCPU "medium" nodes: one pod a node.
    return pods(n, name, cpu="3")


def capacity_types(plan) -> list[str]:
    return sorted("/".join(c.capacity_types) for c in plan.node_claims)


def existing(name: str, capacity_type: str) -> ExistingNode:
    labels = {wk.NODEPOOL: "default", wk.CAPACITY_TYPE: capacity_type, wk.ZONE: "zone-a", wk.INSTANCE_TYPE: "medium",
              "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    return ExistingNode(name, labels, {"cpu": 500, "memory": 2**30, "pods": 29})  # full: takes no 3-vCPU pod


# ------------------------------------------------------------------------------------------- the rule


@pytest.mark.parametrize(("percent", "total", "need"), [(30, 10, 3), (30, 11, 4), (30, 1, 1), (0, 10, 0),
                                                       (100, 7, 7), (50, 3, 2), (1, 0, 0)])
def test_the_minimum_is_the_percent_of_nodes_rounded_up(percent: int, total: int, need: int) -> None:
    assert required_on_demand(percent, total) == need


def test_a_removal_breaks_the_split_only_when_it_ends_under_it_with_fewer_on_demand() -> None:
    od, spot = wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT
    three_of_ten = [od] * 3 + [spot] * 7
    assert not removal_breaks_split(30, three_of_ten, [od] * 3 + [spot] * 6)  # a spot node goes: 3 of 9
    assert removal_breaks_split(30, three_of_ten, [od] * 2 + [spot] * 7)  # an on-demand node goes: 2 of 9
    assert not removal_breaks_split(30, three_of_ten, [od] * 2 + [spot] * 7 + [od])  # replaced by on-demand
    assert removal_breaks_split(30, three_of_ten, [od] * 2 + [spot] * 8)  # on-demand replaced by spot
    assert not removal_breaks_split(30, [spot] * 5, [spot] * 4)  # already under it: spot may still go
    assert not removal_breaks_split(30, [od] * 3, [od] * 2)  # 2 of 2 is more than 30%
    assert not removal_breaks_split(None, three_of_ten, [spot])


def test_a_refused_split_is_a_typed_result_with_the_counts_and_the_message() -> None:
    """#29.3: split_refusal returns the pool, its percent and the counts, not only a string."""
    od, spot = wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT
    before = [od] * 3 + [spot] * 7
    assert split_refusal(split_pool(30), before, [od] * 3 + [spot] * 6) is None
    refusal = split_refusal(split_pool(30), before, [od] * 2 + [spot] * 7)
    assert refusal == SplitRefusal("default", 30, off=2, total=9, needed=3)
    assert str(refusal) == refusal.why == ("NodePool default keeps at least 30% of its nodes off spot "
                                           "(nodescale.io/on-demand-min-percent): 2 of 9 would be, and 3 are needed")


# ---------------------------------------------------------------------------------------------- config


def nodepool_doc(annotations: dict, requirements: list | None = None, **spec: object) -> dict:
    reqs = requirements if requirements is not None else [
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "split", "annotations": annotations},
            "spec": {"template": {"spec": {"requirements": reqs, "nodeClassRef": {
                "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}, **spec}}


def test_the_annotation_is_read_on_v1_and_v1alpha5_pools() -> None:
    p, errors = convert_nodepool(nodepool_doc({"nodescale.io/on-demand-min-percent": "30"}), "test")
    assert errors == [] and p is not None and p.on_demand_min_percent == 30
    p, errors = convert_nodepool(nodepool_doc({}), "test")
    assert errors == [] and p is not None and p.on_demand_min_percent is None
    legacy = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner",
              "metadata": {"name": "old", "annotations": {"nodescale.io/on-demand-min-percent": "50"}},
              "spec": {"providerRef": {"name": "default"}, "requirements": [
                  {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]}}
    p, errors = convert_provisioner(legacy, "test")
    assert errors == [] and p is not None and p.on_demand_min_percent == 50


@pytest.mark.parametrize(("value", "words"), [("abc", "whole percent"), ("101", "whole percent"),
                                              (30, "as a string"), ("-5", "whole percent"), ("3.5", "whole percent")])
def test_a_bad_percent_is_refused_naming_the_annotation(value: object, words: str) -> None:
    p, errors = convert_nodepool(nodepool_doc({"nodescale.io/on-demand-min-percent": value}), "test")
    assert p is None
    assert any("metadata.annotations[nodescale.io/on-demand-min-percent]" in str(e) and words in str(e)
               for e in errors), errors


def test_a_spot_only_or_static_pool_cannot_ask_for_on_demand() -> None:
    spot_only = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
    p, errors = convert_nodepool(nodepool_doc({"nodescale.io/on-demand-min-percent": "30"}, spot_only), "test")
    assert p is None and any("does not allow on-demand" in str(e) for e in errors)
    p, errors = convert_nodepool(nodepool_doc({"nodescale.io/on-demand-min-percent": "30"}, replicas=2), "test")
    assert p is None and any("static pool" in str(e) for e in errors)


# -------------------------------------------------------------------------------------------- launches


def test_ten_nodes_of_pods_in_a_30_percent_pool_launch_three_on_demand() -> None:
    plan = solve(one_per_node(10), [split_pool(30)], {"default": [MEDIUM]})
    assert capacity_types(plan) == ["on-demand"] * 3 + ["on-demand/spot"] * 7
    narrowed = [c for c in plan.node_claims if c.capacity_types == ["on-demand"]]
    assert all(c.labels[wk.CAPACITY_TYPE] == "on-demand" and c.price == pytest.approx(0.20) for c in narrowed)
    assert all(c.requirements.get(wk.CAPACITY_TYPE).values == {"on-demand"} for c in narrowed)
    # Without the annotation every claim may go to spot (tried first, as Karpenter does).
    assert capacity_types(solve(one_per_node(10), [pool("default", BOTH)], {"default": [MEDIUM]})) == \
        ["on-demand/spot"] * 10


def test_existing_nodes_count_so_only_the_shortfall_is_narrowed() -> None:
    nodes = [existing("od-1", "on-demand"), existing("od-2", "on-demand")] + [existing(f"s{i}", "spot") for i in range(5)]
    plan = solve(one_per_node(3), [split_pool(30)], {"default": [MEDIUM]}, existing_nodes=nodes)
    assert capacity_types(plan) == ["on-demand", "on-demand/spot", "on-demand/spot"]  # 3 of 10 off spot
    # 3 on-demand of 8, 3 new: 4 of 11 needed, one claim narrowed.
    more = [*nodes, existing("od-3", "on-demand")]
    plan = solve(one_per_node(3), [split_pool(30)], {"default": [MEDIUM]}, existing_nodes=more)
    assert capacity_types(plan) == ["on-demand", "on-demand/spot", "on-demand/spot"]
    # 4 on-demand of 9, 3 new: 4 of 12 needed, already there.
    plan = solve(one_per_node(3), [split_pool(30)], {"default": [MEDIUM]},
                 existing_nodes=[*more, existing("od-4", "on-demand")])
    assert capacity_types(plan) == ["on-demand/spot"] * 3


def test_an_interrupted_spot_node_is_replaced_keeping_the_split() -> None:
    # 3 on-demand of 10; a spot node goes (left out of planning, as the interruption use-case does): its
    # replacement may be spot. An on-demand node goes: its replacement is on-demand.
    nodes = [existing(f"od{i}", "on-demand") for i in range(3)] + [existing(f"s{i}", "spot") for i in range(6)]
    assert capacity_types(solve(one_per_node(1), [split_pool(30)], {"default": [MEDIUM]}, existing_nodes=nodes)) == \
        ["on-demand/spot"]
    without_one_od = nodes[1:] + [existing("s6", "spot")]
    assert capacity_types(solve(one_per_node(1), [split_pool(30)], {"default": [MEDIUM]},
                                existing_nodes=without_one_od)) == ["on-demand"]


def test_pods_that_require_spot_stay_on_spot() -> None:
    spot_pods = pods(3, "s", cpu="3", nodeSelector={wk.CAPACITY_TYPE: "spot"})
    assert capacity_types(solve(spot_pods, [split_pool(100)], {"default": [MEDIUM]})) == ["spot"] * 3


# ------------------------------------------------------------------------------------------ disruption


def test_emptiness_takes_spot_nodes_first_and_keeps_the_on_demand_minimum() -> None:
    split = dataclasses.replace(disruption_pool(consolidate_after_seconds=30.0), on_demand_min_percent=30)
    views = [node(f"od{i}", annotations=since(3600), capacity_type="on-demand") for i in range(3)]
    views += [node(f"s{i}", annotations=since(3600), capacity_type="spot") for i in range(7)]
    out = planner.plan(inputs(views, [split]), lambda nodes: Simulation())
    gone = {n for d in out.decisions if d.reason == "Empty" for n in d.nodes}
    # Each on-demand node came first and would leave 2 of 9 (3 needed): refused; every spot node goes.
    assert gone == {f"s{i}" for i in range(7)}
    assert {r.nodes[0] for r in out.refusals if r.kind == Blocker.CAPACITY_SPLIT} == {"od0", "od1", "od2"}
    # With the spot nodes gone, on-demand nodes may go one by one: 2 of 2 is above 30%.
    out = planner.plan(inputs(views[:3], [split]), lambda nodes: Simulation())
    assert {n for d in out.decisions for n in d.nodes} == {"od0", "od1", "od2"}


def test_a_consolidation_the_split_forbids_is_refused_with_the_reason() -> None:
    n = node("od0", capacity_type="on-demand")
    outcome = evaluate([n], Simulation(blocked="NodePool default keeps at least 30% of its nodes off spot"))
    assert isinstance(outcome, Refusal) and "30% of its nodes off spot" in outcome.why


def test_plan_f_shows_the_on_demand_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool_doc = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: mixed
  annotations: {nodescale.io/on-demand-min-percent: "30"}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["spot", "on-demand"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {k: v}}]
  securityGroupSelectorTerms: [{tags: {k: v}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: nginx, resources: {requests: {cpu: 1500m}}}]
"""
    path = tmp_path / "split.yaml"
    path.write_text(pool_doc)
    assert main(["plan", "-f", str(path), "-o", "json"]) == 0
    claims = json.loads(capsys.readouterr().out)["nodeClaims"]
    assert len(claims) == 10
    assert sorted("/".join(c["capacityTypes"]) for c in claims) == ["on-demand"] * 3 + ["on-demand/spot"] * 7
    assert all(c["labels"]["karpenter.sh/capacity-type"] == "on-demand" for c in claims if c["capacityTypes"] == ["on-demand"])
