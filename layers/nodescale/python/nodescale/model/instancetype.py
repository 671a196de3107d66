"""EC2 instance types and their offerings, as the scheduler and the launcher see them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from . import labels as wk
from . import resources as res
from .requirements import Requirement, Requirements

# Labels an EC2 instance type may or may not define (a type without a GPU has no instance-gpu-* labels).
INSTANCE_LABELS = (
    wk.INSTANCE_CATEGORY,
    wk.INSTANCE_FAMILY,
    wk.INSTANCE_GENERATION,
    wk.INSTANCE_SIZE,
    wk.INSTANCE_CPU,
    wk.INSTANCE_CPU_MANUFACTURER,
    wk.INSTANCE_MEMORY,
    wk.INSTANCE_GPU_NAME,
    wk.INSTANCE_GPU_COUNT,
    wk.INSTANCE_GPU_MANUFACTURER,
    wk.INSTANCE_GPU_MEMORY,
    wk.INSTANCE_HYPERVISOR,
    wk.INSTANCE_LOCAL_NVME,
    wk.INSTANCE_NETWORK_BANDWIDTH,
    wk.INSTANCE_ENCRYPTION_IN_TRANSIT,
    wk.INSTANCE_EBS_BANDWIDTH,
    wk.INSTANCE_ACCELERATOR_NAME,
    wk.INSTANCE_ACCELERATOR_MANUFACTURER,
    wk.INSTANCE_ACCELERATOR_COUNT,
    wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    wk.INSTANCE_NITRO_ENCLAVES,
    wk.INSTANCE_CAPABILITY_FLEX,
    wk.INSTANCE_TENANCY,
    # nodescale sets no placement group (placementGroupSelector is read past), so no type is in one.
    wk.PLACEMENT_GROUP_ID,
    wk.PLACEMENT_GROUP_PARTITION,
)

# node.kubernetes.io/windows-build is set by the AMI, not the instance type: the Windows Server build.
WINDOWS_BUILDS = {"windows2019": "10.0.17763", "windows2022": "10.0.20348", "windows2025": "10.0.26100"}


class WindowsFamilyError(ValueError):
    """An AMI family named like Windows whose build nodescale does not know."""


def windows_build(ami_family: str | None) -> str | None:
    """The windows-build label value nodes of this AMI family get; None for Linux families."""
    family = (ami_family or "").lower()
    if not family.startswith("windows"):
        return None
    build = WINDOWS_BUILDS.get(family)
    if build is None:
        raise WindowsFamilyError(
            f"amiFamily {ami_family!r}: unknown Windows family; allowed are Windows2019, Windows2022, Windows2025"
        )
    return build


@dataclass(frozen=True, slots=True)
class Offering:
    """Where and how an instance type can be bought: one zone, one capacity type, one price."""

    zone: str
    capacity_type: str  # "spot" | "on-demand" | "reserved"
    price: float  # per hour, in the region's currency (USD; CNY in the China regions)
    available: bool = True
    # The zone's account-independent id (use1-az1), the node's topology.k8s.aws/zone-id; "" when unknown.
    zone_id: str = ""
    # A "reserved" offering is one capacity reservation: its id, type (default | capacity-block) and how
    # many instances it still takes (Karpenter's Offering.ReservationCapacity).
    reservation_id: str = ""
    reservation_type: str = ""
    reservation_capacity: int = 0

    def reservation_labels(self) -> dict[str, str]:
        """The reservation labels a node launched into it carries; none outside a reservation. Whether the
        reservation is interruptible is not tracked, so no offering has that label (see ``wk.RESERVATION_KEYS``)."""
        if not self.reservation_id:
            return {}
        return {
            wk.CAPACITY_RESERVATION_ID: self.reservation_id,
            wk.CAPACITY_RESERVATION_TYPE: self.reservation_type or "default",
        }

    def meets(self, reqs: Requirements) -> bool:
        """Whether its reservation labels meet ``reqs``: an absent label satisfies only NotIn and DoesNotExist."""
        labels = self.reservation_labels()
        for key in wk.RESERVATION_KEYS:
            req = reqs.get(key)
            if req is None:
                continue
            value = labels.get(key)
            if not (req.allows_absent if value is None else req.has(value)):
                return False
        return True


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
    # What the provider built it from (nodescale.model.catalog_facts.TypeFacts for EC2 types), so the
    # capacity can be recomputed for other kubelet settings; None for kwok and benchmark types.
    facts: object | None = field(default=None, repr=False, compare=False)
    # What NodeOverlays changed on it for its pool ("price set by NodeOverlay half (-50%)"), for plan/explain.
    overlays: tuple[str, ...] = field(default=(), compare=False)
    # Its offerings' prices with the Windows Server license included, by (zone, capacity type): what a node
    # of a Windows AMI family pays (``offerings`` hold the Linux prices). Empty where nothing priced Windows.
    windows_prices: Mapping[tuple[str, str], float] = field(default_factory=dict, repr=False, compare=False)

    @property
    def requirements(self) -> Requirements:
        """Its labels as requirements, with zone and capacity type spanning its available offerings."""
        if self._requirements is None:
            reqs = [Requirement.exactly(k, v) for k, v in self.labels.items() if k != wk.OS]
            if self.facts is not None:
                # Like Karpenter: an EC2 type without a GPU (or NVMe, ...) has DoesNotExist on that label,
                # so a pod asking for instance-gpu-name In [t4] cannot land on it.
                reqs.extend(Requirement.exactly(k) for k in INSTANCE_LABELS if k not in self.labels)
            reqs.append(Requirement.exactly(wk.OS, *sorted(self.operating_systems)))
            avail = [o for o in self.offerings if o.available]
            reqs.append(Requirement.exactly(wk.ZONE, *sorted({o.zone for o in avail})))
            zone_ids = {o.zone_id for o in avail if o.zone_id}
            if zone_ids:
                reqs.append(Requirement.exactly(wk.ZONE_ID, *sorted(zone_ids)))
            reqs.append(Requirement.exactly(wk.CAPACITY_TYPE, *sorted({o.capacity_type for o in avail})))
            self._requirements = Requirements(reqs)
        return self._requirements

    @property
    def allocatable(self) -> res.Resources:
        if self._allocatable is None:
            alloc = res.subtract(self.capacity, self.overhead)
            self._allocatable = {k: max(0, v) for k, v in alloc.items()}
        return self._allocatable

    def copy(self, **changes: object) -> InstanceType:
        """A copy with some fields replaced and the derived caches cleared."""
        return replace(self, _requirements=None, _allocatable=None, **changes)

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
