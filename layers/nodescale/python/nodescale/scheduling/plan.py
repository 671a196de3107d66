"""What the bin-packer is given besides pods and pools (existing nodes) and what it answers (a Plan)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..model import nodelabels
from ..model import resources as res
from ..model.pod import Pod
from ..model.requirements import Requirements
from ..model.taints import Taint

# Karpenter hands at most this many instance types to one launch; more adds nothing but request size.
MAX_INSTANCE_TYPES = 60
# A claim that may launch spot keeps at least this many instance types when its pool has that many that
# hold its pods: spot-to-spot consolidation needs 15 cheaper types to choose from (Karpenter's
# MinInstanceTypesForSpotToSpotConsolidation), and price-capacity-optimized needs pools to choose among.
SPOT_FLEXIBILITY = 15


@dataclass(slots=True)
class ExistingNode:
    """A node already in the cluster, or capacity in flight (launched, not yet registered)."""

    name: str
    labels: dict[str, str]
    allocatable: res.Resources
    taints: tuple[Taint, ...] = ()
    pods: list[Pod] = field(default_factory=list)  # pods bound to it, daemons included
    capacity: res.Resources | None = None  # what counts against its NodePool's limits; allocatable if None
    in_flight: bool = False
    unschedulable: bool = False  # cordoned: keeps its pods, takes no new ones
    price: float = 0.0
    pool: str | None = None  # the pool's key when the labels alone do not say it (see nodelabels.pool_key)
    # Its CSINode's allocatable count per CSI driver (scheduling/volumeusage); empty: no limit known.
    volume_limits: dict[str, int] = field(default_factory=dict)

    @property
    def nodepool(self) -> str:
        return self.pool if self.pool is not None else nodelabels.pool_key(self.labels)


@dataclass(slots=True)
class NodeClaim:
    """One node to launch: any of ``instance_types`` (cheapest first) in one of the zones and capacity types."""

    nodepool: str
    instance_types: list[str]
    capacity_types: list[str]
    zones: list[str]
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    requirements: Requirements
    pods: list[Pod]
    price: float  # USD per hour of the cheapest option
    requests: res.Resources  # the pods' requests plus daemon overhead on the cheapest option
    overlays: tuple[str, ...] = ()  # what NodeOverlays changed on the cheapest option (its price, capacity)
    key: str = ""  # a claim without pods (static capacity): what tells its launch from another's


@dataclass(slots=True)
class ExistingPlacement:
    node: str
    in_flight: bool
    pods: list[Pod]


class UnschedulableKind(StrEnum):
    """Why a pod has no place, in kinds a caller can act on; ``Unschedulable.reason`` says it in words.

    When several nodepools refuse a pod for different reasons, the kind is that of the pool that came
    closest to taking it, in this order: LIMITS, MIN_VALUES, TOO_LARGE, NO_OFFERING, INCOMPATIBLE.
    """

    NO_NODEPOOL = "NoNodePool"  # no nodepool is defined, and no existing node takes the pod
    INCOMPATIBLE = "Incompatible"  # taints, node selectors or requirements rule out every pool and node
    NO_OFFERING = "NoOffering"  # no instance type is offered in the zones and capacity types allowed
    TOO_LARGE = "TooLarge"  # no instance type has room for the pod's requests
    MIN_VALUES = "MinValues"  # too few instance types fit to keep a requirement's minValues
    LIMITS = "Limits"  # a new node would exceed its nodepool's limits
    TOPOLOGY = "Topology"  # topology spread or pod (anti-)affinity cannot be met
    DRA = "DynamicResourceAllocation"  # it claims DRA devices, which nodescale does not plan for (yet)


@dataclass(slots=True)
class Unschedulable:
    pod: Pod
    reason: str
    kind: UnschedulableKind
    limited_pools: tuple[str, ...] = ()  # every nodepool the reason refuses for its limits, in its order


@dataclass(slots=True)
class Plan:
    node_claims: list[NodeClaim]
    existing: list[ExistingPlacement]
    unschedulable: list[Unschedulable]
    pods: int
    solve_seconds: float = 0.0
    buffers: list[dict] = field(default_factory=list)  # CapacityBuffers planned with it (scheduling/buffers.py)

    @property
    def price_per_hour(self) -> float:
        return sum(c.price for c in self.node_claims)
