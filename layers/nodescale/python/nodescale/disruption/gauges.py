"""The per-minute picture of managed capacity: node counts, price, CPU, memory, NodePool usage and limits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..model import resources as res
from ..model.nodepool import NodePool
from .nodes import NodeView

_GIB = 2**30


@dataclass
class ClusterGauges:
    nodes: dict[tuple[str, str], int] = field(default_factory=dict)  # (nodepool, capacity type) -> count
    price_per_hour: float = 0.0
    cpu: float = 0.0  # vCPUs
    memory_gib: float = 0.0
    usage: dict[tuple[str, str], float] = field(default_factory=dict)  # (nodepool, resource) -> amount
    limits: dict[tuple[str, str], float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "nodes": {f"{p}/{c}": n for (p, c), n in sorted(self.nodes.items())},
            "pricePerHour": round(self.price_per_hour, 6),
            "cpu": self.cpu,
            "memoryGiB": round(self.memory_gib, 3),
            "usage": {f"{p}/{r}": v for (p, r), v in sorted(self.usage.items())},
            "limits": {f"{p}/{r}": v for (p, r), v in sorted(self.limits.items())},
        }


def _display(resource: str, amount: int) -> float:
    if resource == res.CPU:
        return amount / 1000
    if resource == res.MEMORY:
        return round(amount / _GIB, 3)
    return float(amount)


def cluster_gauges(
    views: Iterable[NodeView], capacities: Mapping[str, Mapping[str, int]], nodepools: Mapping[str, NodePool]
) -> ClusterGauges:
    """``capacities``: node name -> its capacity (what counts against NodePool limits)."""
    g = ClusterGauges()
    for v in views:
        key = (v.nodepool, v.capacity_type or "unknown")
        g.nodes[key] = g.nodes.get(key, 0) + 1
        g.price_per_hour += v.price
        cap = capacities.get(v.name) or v.allocatable
        g.cpu += cap.get(res.CPU, 0) / 1000
        g.memory_gib += cap.get(res.MEMORY, 0) / _GIB
        for resource in (res.CPU, res.MEMORY):
            k = (v.nodepool, resource)
            g.usage[k] = g.usage.get(k, 0.0) + _display(resource, cap.get(resource, 0))
        g.usage[(v.nodepool, "nodes")] = g.usage.get((v.nodepool, "nodes"), 0.0) + 1
    for name, pool in nodepools.items():
        for resource, amount in pool.limits.items():
            g.limits[(name, resource)] = _display(resource, amount)
    return g
