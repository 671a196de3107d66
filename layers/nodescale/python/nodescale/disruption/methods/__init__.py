"""The disruption methods, one module each, behind one interface (``base.Method``).

``default_methods`` gives them in the planner's order, which is also their priority: a node one
method decides about (or refuses) is not offered to the next. As in Karpenter (expiration, drift,
then consolidation), the forceful and corrective methods come before the ones that save money.
"""

from __future__ import annotations

from ...model.featuregates import FeatureGates
from ..replacement import Simulator
from .base import Method
from .capacityblock import CapacityBlockExpiry
from .consolidation import Consolidation
from .drift import Drift
from .emptiness import Emptiness
from .expiry import Expiry
from .repair import Repair
from .static import StaticScaleDown


def default_methods(simulate: Simulator | None = None, gates: FeatureGates | None = None) -> list[Method]:
    """A static pool's scale-down (asked for by its user), repair, capacity-block expiry, expiry, drift,
    emptiness, then consolidation (only with a simulator to ask). As Karpenter registers its static
    deprovisioning and node health controllers only with their gates on, static scale-down needs
    StaticCapacity and repair NodeRepair (``gates``: Karpenter's defaults when not given)."""
    gates = gates or FeatureGates()
    methods: list[Method] = [
        *([StaticScaleDown()] if gates.static_capacity else []), *([Repair()] if gates.node_repair else []),
        CapacityBlockExpiry(), Expiry(), Drift(), Emptiness(),
    ]
    if simulate is not None:
        methods.append(Consolidation(simulate))
    return methods


__all__ = [
    "CapacityBlockExpiry", "Consolidation", "Drift", "Emptiness", "Expiry", "Method", "Repair", "StaticScaleDown",
    "default_methods",
]
