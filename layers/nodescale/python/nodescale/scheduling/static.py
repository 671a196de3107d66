"""Static capacity (karpenter.sh/v1 ``spec.replicas``): the NodeClaim that adds one node to a pool, with no pods."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from .nodeclaim import pinned
from .plan import MAX_INSTANCE_TYPES, NodeClaim
from .templates import build_template, min_values_of, truncate


def static_claim(
    pool: NodePool,
    types: Iterable[InstanceType],
    *,
    extra_labels: Mapping[str, str] | None = None,
    unavailable: Iterable[tuple[str, str, str]] = (),
    key: str = "",
) -> NodeClaim | None:
    """One node of ``pool``: its types that satisfy its requirements and are offered, cheapest first
    (at most MAX_INSTANCE_TYPES, minValues kept); None when the pool has no type it could launch."""
    template = build_template(0, pool, types, (), [], extra_labels or {}, frozenset(unavailable), {})
    if not template.types:
        return None
    options = truncate(template.types, min_values_of(template.requirements), MAX_INSTANCE_TYPES)
    pairs = {(z, c) for t in options for z, c, _ in t.offers}
    zones = sorted({z for z, _ in pairs})
    capacity_types = sorted({c for _, c in pairs})
    requirements, labels = pinned(template.requirements, template.labels, zones, capacity_types)
    return NodeClaim(
        nodepool=pool.name,
        instance_types=[t.name for t in options],
        capacity_types=capacity_types,
        zones=zones,
        labels=labels,
        taints=pool.taints,
        startup_taints=pool.startup_taints,
        requirements=requirements,
        pods=[],
        price=options[0].offers[0][2],
        requests={},
        overlays=options[0].it.overlays,
        key=key,
    )
