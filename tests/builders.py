"""Builders the unit tests share (#29.7): one definition each, imported where a module needs them.

The disruption planner's inputs: a NodePool with a budget and consolidateAfter, a running pod owned by a
ReplicaSet, a node's view with its pods, and the planner's Inputs at ``NOW``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from nodescale.clock import format_timestamp
from nodescale.disruption import planner
from nodescale.disruption.consolidation import Simulation
from nodescale.disruption.nodes import EMPTY_SINCE, NodeView
from nodescale.model.nodepool import Budget, Disruption, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)  # a Monday


def pool(name: str = "default", api: str = "karpenter.sh/v1", **disruption: object) -> NodePool:
    defaults = dict(budgets=(Budget(nodes="100%"),), consolidate_after_seconds=30.0)
    defaults.update(disruption)
    return NodePool(
        name=name,
        requirements=Requirements([Requirement.exactly("karpenter.sh/capacity-type", "on-demand", "spot")]),
        node_class="default",
        labels={"team": "a"},
        taints=(Taint("dedicated", "NoSchedule", "a"),),
        disruption=Disruption(**defaults),  # type: ignore[arg-type]
        api_version=api,
    )


def pod(name: str, annotations: dict | None = None, labels: dict | None = None, ns: str = "default") -> Pod:
    return Pod.from_dict({
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}, "labels": labels or {},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}], "nodeName": "x"},
        "status": {"phase": "Running", "startTime": format_timestamp(NOW - timedelta(hours=1))},
    })


def node(name: str, pods: list[Pod] | None = None, *, ready: bool = True, age_h: float = 2.0, price: float = 0.1,
         annotations: dict | None = None, capacity_type: str = "on-demand", nodepool: str = "default",
         labels: dict | None = None, ready_for_s: float = 3600.0) -> NodeView:
    raw = {
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": nodepool, "karpenter.sh/capacity-type": capacity_type,
                       "node.kubernetes.io/instance-type": "m5.large", "team": "a", **(labels or {})},
            "annotations": annotations or {},
            "creationTimestamp": format_timestamp(NOW - timedelta(hours=age_h)),
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{name}",
                 "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                   "lastTransitionTime": format_timestamp(NOW - timedelta(seconds=ready_for_s))}],
                   "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"}},
    }
    return NodeView.from_node(raw, pods or [], price)


def inputs(views: list[NodeView], pools: list[NodePool] | None = None, **kw: object) -> planner.Inputs:
    pools = pools or [pool()]
    return planner.Inputs(now=NOW, nodepools={p.name: p for p in pools}, views=views, **kw)  # type: ignore[arg-type]


def fits_elsewhere(nodes: Sequence[NodeView]) -> Simulation:
    return Simulation()


def nowhere(nodes: Sequence[NodeView]) -> Simulation:
    return Simulation(unschedulable=[(p.key, "no node has room") for n in nodes for p in n.pods])


def since(seconds: float) -> dict[str, str]:
    return {EMPTY_SINCE: format_timestamp(NOW - timedelta(seconds=seconds))}
