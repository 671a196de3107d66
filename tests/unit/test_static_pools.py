"""Static capacity (karpenter.sh/v1 ``spec.replicas``): parsed into the model, and its nodes are never
taken by emptiness or consolidation."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from nodescale.clock import format_timestamp
from nodescale.config.nodepools import convert_nodepool
from nodescale.disruption import planner
from nodescale.disruption.nodes import NodeView
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.scheduling.static import static_claim
from tests.builders import NOW, fits_elsewhere, inputs, node, pod, pool


def v1(spec_extra: dict) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "static"},
        "spec": {
            "template": {"spec": {"requirements": [],
                                  "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                   "name": "default"}}},
            **spec_extra,
        },
    }


def test_replicas_is_parsed_and_a_pool_without_it_is_dynamic() -> None:
    p, errors = convert_nodepool(v1({"replicas": 3}), "test")
    assert errors == [] and p is not None and p.replicas == 3 and p.static
    p, errors = convert_nodepool(v1({"replicas": 0}), "test")
    assert errors == [] and p is not None and p.replicas == 0 and p.static
    p, errors = convert_nodepool(v1({}), "test")
    assert errors == [] and p is not None and p.replicas is None and not p.static


@pytest.mark.parametrize("bad", [-1, "two", 1.5])
def test_replicas_must_be_a_non_negative_whole_number(bad: object) -> None:
    p, errors = convert_nodepool(v1({"replicas": bad}), "test")
    assert p is None and any("spec.replicas" in str(e) for e in errors)


def empty_since(v: NodeView, ago_s: float) -> NodeView:
    stamp = format_timestamp(NOW - timedelta(seconds=ago_s))
    return dataclasses.replace(v, annotations={**v.annotations, "nodescale.io/empty-since": stamp})


def test_emptiness_and_consolidation_never_take_a_static_pools_nodes() -> None:
    dynamic = pool(consolidate_after_seconds=30.0)
    static = dataclasses.replace(dynamic, replicas=2)
    empty = empty_since(node("a"), 3600)
    busy = node("b", [pod("p")])
    out = planner.plan(inputs([empty, busy], [dynamic]), fits_elsewhere)
    assert {n for d in out.decisions for n in d.nodes} >= {"a"}, "the dynamic pool's empty node goes"
    out = planner.plan(inputs([empty, busy], [static]), fits_elsewhere)
    assert out.decisions == []
    # No emptiness clock is started on a static pool's node either.
    out = planner.plan(inputs([node("c")], [static]), fits_elsewhere)
    assert out.decisions == [] and out.mark_empty == []


def test_static_claim_is_the_pools_cheapest_type_with_no_pods() -> None:
    def it(name: str, price: float) -> InstanceType:
        return InstanceType(name=name, capacity={"cpu": 2000, "memory": 8 << 30, "pods": 29}, overhead={},
                            offerings=[Offering("us-east-1a", "on-demand", price)],
                            labels={"node.kubernetes.io/instance-type": name, "kubernetes.io/arch": "amd64",
                                    "kubernetes.io/os": "linux"})

    p = dataclasses.replace(pool(), replicas=1)
    claim = static_claim(p, [it("b", 0.2), it("a", 0.1)], key="k")
    assert claim is not None and claim.pods == [] and claim.instance_types[0] == "a" and claim.price == 0.1
    assert claim.zones == ["us-east-1a"] and claim.capacity_types == ["on-demand"] and claim.key == "k"
