"""EC2 instance types and their offerings, as the scheduler and the launcher see them."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import labels as wk
from . import resources as res
from .requirements import Requirement, Requirements


@dataclass(frozen=True, slots=True)
class Offering:
    """Where and how an instance type can be bought: one zone, one capacity type, one price."""

    zone: str
    capacity_type: str  # "spot" | "on-demand"
    price: float  # USD per hour
    available: bool = True


@dataclass(slots=True)
class InstanceType:
    name: str
    # Every well-known label the type defines, one value each (arch, os, category, family, cpu, ...).
    labels: dict[str, str]
    capacity: res.Resources
    # kube-reserved + system-reserved + eviction threshold, for the kubelet settings it was computed with.
    overhead: res.Resources
    offerings: tuple[Offering, ...]
    # Operating systems its AMIs can run ("linux", "windows").
    operating_systems: frozenset[str] = frozenset({"linux"})
    _requirements: Requirements | None = field(default=None, repr=False)
    _allocatable: res.Resources | None = field(default=None, repr=False)

    @property
    def requirements(self) -> Requirements:
        """Its labels as requirements, with zone and capacity type spanning its available offerings."""
        if self._requirements is None:
            reqs = [Requirement.exactly(k, v) for k, v in self.labels.items() if k != wk.OS]
            reqs.append(Requirement.exactly(wk.OS, *sorted(self.operating_systems)))
            avail = [o for o in self.offerings if o.available]
            reqs.append(Requirement.exactly(wk.ZONE, *sorted({o.zone for o in avail})))
            reqs.append(Requirement.exactly(wk.CAPACITY_TYPE, *sorted({o.capacity_type for o in avail})))
            self._requirements = Requirements(reqs)
        return self._requirements

    @property
    def allocatable(self) -> res.Resources:
        if self._allocatable is None:
            alloc = res.subtract(self.capacity, self.overhead)
            self._allocatable = {k: max(0, v) for k, v in alloc.items()}
        return self._allocatable

    def cheapest(self, reqs: Requirements | None = None) -> Offering | None:
        """The cheapest available offering whose zone and capacity type ``reqs`` allow."""
        best = None
        zone = reqs.get(wk.ZONE) if reqs is not None else None
        ctype = reqs.get(wk.CAPACITY_TYPE) if reqs is not None else None
        for o in self.offerings:
            if not o.available:
                continue
            if zone is not None and not zone.has(o.zone):
                continue
            if ctype is not None and not ctype.has(o.capacity_type):
                continue
            if best is None or o.price < best.price:
                best = o
        return best
