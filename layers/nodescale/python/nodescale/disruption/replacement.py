"""What a disruption command launches: the new nodes a simulation asked for, and the simulation itself.

A :class:`Replacement` holds the scheduling ``NodeClaim`` the bin-packer produced (its pool,
requirements, zones, capacity types and the pods planned onto it) with its instance-type options
priced, cheapest first; the disruption use-case launches exactly that claim (narrowed to those
options), not a new plan. Consolidation, repacking, the simulator and the validation share these
types, so none of them imports another for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..model.instancetype import InstanceType
from ..scheduling.plan import NodeClaim
from .nodes import NodeView

Option = tuple[str, float, str]  # (instance type, price, capacity type)


@dataclass(slots=True)
class Replacement:
    """One new node a command launches: the simulation's claim and its options, cheapest first."""

    claim: NodeClaim
    options: list[Option]
    price: float  # of the cheapest option

    @property
    def nodepool(self) -> str:
        return self.claim.nodepool

    @property
    def capacity_types(self) -> list[str]:
        return list(self.claim.capacity_types)

    @property
    def pods(self) -> list[str]:
        return [p.key for p in self.claim.pods]

    @property
    def instance_type(self) -> str:
        return self.options[0][0] if self.options else ""

    @property
    def instance_types(self) -> list[str]:
        """The option types, cheapest first, each once."""
        return list(dict.fromkeys(t for t, _, _ in self.options))

    def launch_claim(self) -> NodeClaim:
        """The claim to launch: the simulation's, its instance types narrowed to the options decided on
        (a multi-node consolidation drops the types of the nodes it removes)."""
        return dataclasses.replace(self.claim, instance_types=self.instance_types, price=self.price)


def replacement_from_claim(claim: NodeClaim, types: Sequence[InstanceType]) -> Replacement:
    """The claim's options as (type, price, capacity type), cheapest first, within its zones and capacity types."""
    by_name = {t.name: t for t in types}
    options: list[Option] = []
    zones, cts = set(claim.zones), set(claim.capacity_types)
    for name in claim.instance_types:
        it = by_name.get(name)
        if it is None:
            continue
        for o in it.offerings:
            if o.available and o.zone in zones and o.capacity_type in cts:
                options.append((name, o.price, o.capacity_type))
    options.sort(key=lambda x: (x[1], x[0]))
    best: dict[tuple[str, str], Option] = {}
    for opt in options:
        best.setdefault((opt[0], opt[2]), opt)
    ordered = sorted(best.values(), key=lambda x: (x[1], x[0]))
    return Replacement(claim, ordered, claim.price)


@dataclass(slots=True)
class Simulation:
    """What the bin-packer says happens to the pods of the nodes taken away."""

    unschedulable: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    replacements: list[Replacement] = field(default_factory=list)  # new nodes the candidates' pods need
    blocked: str = ""  # why the move may not happen whatever its pods (a pool's on-demand minimum)


Simulator = Callable[[Sequence[NodeView]], Simulation]
