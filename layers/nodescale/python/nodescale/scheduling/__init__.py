"""The bin-packer: where pending pods go, and which NodeClaims to launch for them."""

from .plan import (
    MAX_INSTANCE_TYPES,
    ExistingNode,
    ExistingPlacement,
    NodeClaim,
    Plan,
    Unschedulable,
    UnschedulableKind,
)
from .scheduler import solve

__all__ = [
    "MAX_INSTANCE_TYPES",
    "ExistingNode",
    "ExistingPlacement",
    "NodeClaim",
    "Plan",
    "Unschedulable",
    "UnschedulableKind",
    "solve",
]
