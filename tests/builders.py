"""Builders the unit tests share (#29.7): one definition each, imported where a module needs them.

The disruption planner's inputs: a NodePool with a budget and consolidateAfter, a running pod owned by a
ReplicaSet, a node's view with its pods, and the planner's Inputs at ``NOW``. The bin-packer's: instance
types on three zones, an on-demand NodePool (``scheduling_pool``), n alike pods, a DaemonSet pod, an existing
node, and ``plan_for`` that solves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from nodescale.clock import format_timestamp
from nodescale.disruption.context import Inputs
from nodescale.disruption.nodes import EMPTY_SINCE, NodeView
from nodescale.disruption.replacement import Replacement, Simulation
from nodescale.model import labels as wk
from nodescale.model.featuregates import ALL_ON
from nodescale.model.instance import ManagedInstance
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import Budget, Disruption, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.scheduling.plan import ExistingNode, NodeClaim, Plan
from nodescale.scheduling.scheduler import solve

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
    return NodeView.from_node(ClusterNode.from_dict(raw), pods or [], price)


def inputs(views: list[NodeView], pools: list[NodePool] | None = None, **kw: object) -> Inputs:
    """Every feature gate on unless ``gates`` is given (#31.5): the planner tests exercise repair, static capacity
    and spot-to-spot consolidation, which Karpenter (and nodescale) run only with their gates on."""
    pools = pools or [pool()]
    kw.setdefault("gates", ALL_ON)
    return Inputs(now=NOW, nodepools={p.name: p for p in pools}, views=views, **kw)  # type: ignore[arg-type]


def fits_elsewhere(nodes: Sequence[NodeView]) -> Simulation:
    return Simulation()


def nowhere(nodes: Sequence[NodeView]) -> Simulation:
    return Simulation(unschedulable=[(p.key, "no node has room") for n in nodes for p in n.pods])


def replacement(nodepool: str, price: float, options: list[tuple[str, float, str]], capacity_types: list[str],
                pods: Sequence[Pod] = (), zones: Sequence[str] = ("zone-a",)) -> Replacement:
    """A simulated new node: a NodeClaim of the options' types, with its options priced (cheapest first)."""
    types = list(dict.fromkeys(t for t, _, _ in options))
    claim = NodeClaim(nodepool, types, list(capacity_types), list(zones), {}, (), (), Requirements(), list(pods),
                      price, {})
    return Replacement(claim, list(options), price)


def since(seconds: float) -> dict[str, str]:
    return {EMPTY_SINCE: format_timestamp(NOW - timedelta(seconds=seconds))}


# -- the bin-packer -------------------------------------------------------------------------------------


GIB = 2**30
ZONES = ("zone-a", "zone-b", "zone-c")


def itype(name: str, cpu: int, mem_gib: int, price: float, *, arch: str = "amd64", family: str = "m",
          spot: float | None = None, gpu: int = 0, oses: frozenset[str] = frozenset({"linux"}),
          zones: tuple[str, ...] = ZONES, pods: int = 110) -> InstanceType:
    offerings = [Offering(z, wk.CAPACITY_ON_DEMAND, price) for z in zones]
    if spot is not None:
        offerings += [Offering(z, wk.CAPACITY_SPOT, spot) for z in zones]
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: arch, wk.OS: "linux", wk.INSTANCE_FAMILY: family,
              wk.INSTANCE_CPU: str(cpu)}
    capacity = {"cpu": cpu * 1000, "memory": mem_gib * GIB, "pods": pods}
    if gpu:
        capacity["nvidia.com/gpu"] = gpu
        labels[wk.INSTANCE_GPU_COUNT] = str(gpu)
    return InstanceType(name, labels, capacity, {}, tuple(offerings), operating_systems=oses)


SMALL = itype("small", 2, 4, 0.10, spot=0.03)
MEDIUM = itype("medium", 4, 8, 0.20, spot=0.06)
LARGE = itype("large", 8, 16, 0.40, spot=0.12)
ARM = itype("arm-medium", 4, 8, 0.16, arch="arm64", family="m7g")
GPU = itype("gpu", 8, 32, 1.00, gpu=1, family="p3")
C_SMALL = itype("c-small", 2, 2, 0.09, family="c")
TYPES = [SMALL, MEDIUM, LARGE, ARM, GPU]


def scheduling_pool(name: str = "default", *reqs: Requirement, weight: int = 0, taints: tuple[Taint, ...] = (),
         startup: tuple[Taint, ...] = (), limits: dict | None = None, labels: dict | None = None) -> NodePool:
    base = [Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"])]
    if any(r.key == wk.CAPACITY_TYPE for r in reqs):
        base = []
    return NodePool(name=name, requirements=Requirements([*base, *reqs]), node_class="default", weight=weight,
                    taints=taints, startup_taints=startup, limits=limits or {}, labels=labels or {})


def pods(n: int, name: str = "app", cpu: str = "1", memory: str = "1Gi", labels: dict | None = None,
         **spec: object) -> list[Pod]:
    resources = {"requests": {"cpu": cpu, "memory": memory}}
    if "limits" in spec:
        resources["limits"] = spec.pop("limits")
    body = {"containers": [{"name": "c", "resources": resources}], **spec}
    first = Pod.from_dict({"metadata": {"name": f"{name}-0", "namespace": "default",
                                        "labels": labels or {"app": name}}, "spec": body})
    return [first] + [replace(first, name=f"{name}-{i}") for i in range(1, n)]


def plan_for(workload: list[Pod], pools: list[NodePool] | None = None, types: list[InstanceType] | None = None,
             **kwargs: object) -> Plan:
    pools = pools or [scheduling_pool()]
    return solve(workload, pools, {p.name: types or TYPES for p in pools}, **kwargs)


def daemon(cpu: str, **spec: object) -> Pod:
    body = {"containers": [{"name": "d", "resources": {"requests": {"cpu": cpu}}}], **spec}
    return Pod.from_dict({"metadata": {"name": "ds", "namespace": "kube-system",
                                       "ownerReferences": [{"kind": "DaemonSet", "name": "ds", "controller": True}]},
                          "spec": body})


def existing_node(name: str, cpu: int = 4, zone: str = "zone-a", **kw: object) -> ExistingNode:
    labels = {wk.ZONE: zone, wk.ARCH: "amd64", wk.OS: "linux", wk.HOSTNAME: name, **kw.pop("labels", {})}
    return ExistingNode(name, labels, {"cpu": cpu * 1000, "memory": 64 * GIB, "pods": 110}, **kw)


def instance(iid: str, itype: str = "small", *, zone: str = "zone-a", capacity_type: str = "on-demand",
             nodepool: str | None = "default", state: str = "running", **kw: object) -> ManagedInstance:
    """One of this cluster's EC2 instances as the snapshot holds it."""
    return ManagedInstance(iid, itype, zone, capacity_type, nodepool, state, NOW, **kw)  # type: ignore[arg-type]


def cluster_nodes(*raws: dict) -> list[ClusterNode]:
    """Nodes as the world snapshot holds them (typed once, as ``read_world`` does), from their API objects."""
    return [ClusterNode.from_dict(raw) for raw in raws]
