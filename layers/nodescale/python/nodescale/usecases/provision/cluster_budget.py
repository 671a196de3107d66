"""Cluster-wide limits across every NodePool: cpu, memory, nodes and a price-per-hour ceiling.

Set at deploy time (``NODESCALE_CLUSTER_LIMITS``), counted over this system's nodes (existing and in
flight), and checked before each launch with the dearest option of the planned node, so a launch can
never take the cluster over a limit whichever instance type the Fleet picks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...model import resources as res
from ...model.currency import Message, Money, Priced
from ...model.quantity import QuantityError, format_bytes, format_cpu, to_int, to_milli
from ...scheduling.plan import ExistingNode
from ...settings import CLUSTER_LIMITS, SettingsError

PRICE = "pricePerHour"
NODES = "nodes"


def parse_limits(raw: Mapping[str, str]) -> dict[str, float]:
    """Limits in canonical units (cpu millicores, memory bytes, nodes, USD per hour)."""
    out: dict[str, float] = {}
    for key, value in raw.items():
        try:
            if key == res.CPU:
                out[key] = float(to_milli(value))
            elif key == res.MEMORY:
                out[key] = float(to_int(value))
            elif key == NODES:
                out[key] = float(int(str(value)))
            elif key == PRICE:
                out[key] = float(value)
            else:
                raise SettingsError(f"{CLUSTER_LIMITS}: unknown limit {key!r}; allowed are cpu, memory, nodes, {PRICE}")
        except (QuantityError, ValueError) as exc:
            if isinstance(exc, SettingsError):
                raise
            raise SettingsError(f"{CLUSTER_LIMITS}: {key}={value!r} is not a valid amount ({exc})") from None
        if out[key] < 0:
            raise SettingsError(f"{CLUSTER_LIMITS}: {key}={value!r} must not be negative")
    return out


def show(key: str, value: float) -> Message:
    if key == res.CPU:
        return format_cpu(int(value))
    if key == res.MEMORY:
        return format_bytes(int(value))
    if key == PRICE:
        return Priced.of(Money(value), "/h")
    return str(int(value))


@dataclass
class ClusterBudget:
    """What the cluster may still add before a cluster-wide limit is reached."""

    limits: dict[str, float]
    usage: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, raw_limits: Mapping[str, str], nodes: Iterable[ExistingNode]) -> ClusterBudget:
        budget = cls(parse_limits(raw_limits))
        for n in nodes:
            if n.nodepool:  # only capacity this system manages counts
                budget.add((n.capacity or n.allocatable), n.price)
        return budget

    def add(self, capacity: Mapping[str, int], price: float) -> None:
        self.usage[res.CPU] = self.usage.get(res.CPU, 0.0) + capacity.get(res.CPU, 0)
        self.usage[res.MEMORY] = self.usage.get(res.MEMORY, 0.0) + capacity.get(res.MEMORY, 0)
        self.usage[NODES] = self.usage.get(NODES, 0.0) + 1
        self.usage[PRICE] = self.usage.get(PRICE, 0.0) + price

    def blocked(self, capacity: Mapping[str, int], price: float) -> Message | None:
        """Why adding one node of this size and price would break a limit, or None when it fits."""
        adding = {
            res.CPU: float(capacity.get(res.CPU, 0)),
            res.MEMORY: float(capacity.get(res.MEMORY, 0)),
            NODES: 1.0,
            PRICE: price,
        }
        for key, limit in sorted(self.limits.items()):
            used = self.usage.get(key, 0.0)
            if used + adding[key] > limit + 1e-9:
                return Priced.of(f"cluster-wide limit {key}=", show(key, limit), " reached: ", show(key, used),
                                 " in use, the node needs ", show(key, adding[key]), " more")
        return None
