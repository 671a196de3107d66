"""Karpenter's NodeOverlay (karpenter.sh/v1alpha1) applied to a NodePool's instance types.

An overlay selects instance types (and, for prices, offerings) by its requirements, matched against
each type's labels together with the pool's template labels and ``karpenter.sh/nodepool``. It sets the
price of the offerings it matches (``price``, absolute) or adjusts it (``priceAdjustment``: ``+0.1``,
``-0.05`` or ``-50%``), and adds extended resources to the capacity of the types it matches.

Overlays are taken heaviest first (weight, absent = 0; equal weights: the name later in the alphabet
first), and a field set by a heavier overlay stays: per offering for the price, per resource for the
capacity. Two overlays of the same weight that both set the price of one offering, or the same resource
of one type, conflict: the later of them is not applied at all (Karpenter's NodeOverlay controller marks
it ValidationSucceeded=False, reason Conflict). As in Karpenter's store (pkg/controllers/nodeoverlay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from . import labels as wk
from . import resources as res
from .instancetype import InstanceType, Offering
from .requirements import Requirement, Requirements


@dataclass(frozen=True, slots=True)
class NodeOverlay:
    name: str
    requirements: Requirements
    price: str | None = None  # absolute, "0.05"
    price_adjustment: str | None = None  # "+0.1", "-0.05", "+10%", "-50%"
    capacity: res.Resources = field(default_factory=dict)
    weight: int = 0
    source: str = ""

    @property
    def kind(self) -> str:
        """The object's kind, as NodePools and node classes name theirs (names are unique per kind)."""
        return "NodeOverlay"

    @property
    def price_change(self) -> str | None:
        return self.price if self.price is not None else self.price_adjustment


def adjusted_price(price: float, change: str | None) -> float:
    """``price`` after an overlay's price (absolute) or priceAdjustment (signed amount or percent)."""
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    out = price * (1 + float(change[:-1]) / 100) if change.endswith("%") else price + float(change)
    return max(out, 0.0)


def ordered(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """Heaviest first; equal weights by name, the later in the alphabet first (Karpenter's OrderByWeight)."""
    return sorted(sorted(overlays, key=lambda o: o.name, reverse=True), key=lambda o: -o.weight)


@dataclass
class _Applied:
    """What the overlays applied so far set on one pool's types: who set it, at what weight."""

    prices: dict[tuple[str, str, str], NodeOverlay] = field(default_factory=dict)  # (type, zone, ct)
    capacity: dict[tuple[str, str], NodeOverlay] = field(default_factory=dict)  # (type, resource)


def _offerings_matched(it: InstanceType, pool_reqs: Requirements, overlay: NodeOverlay) -> list[Offering]:
    reqs = pool_reqs.intersect(it.requirements)
    if not reqs.compatible(overlay.requirements, allow_undefined=frozenset()):
        return []
    zone = overlay.requirements.get(wk.ZONE)
    ctype = overlay.requirements.get(wk.CAPACITY_TYPE)
    return [
        o for o in it.offerings
        if (zone is None or zone.has(o.zone)) and (ctype is None or ctype.has(o.capacity_type))
    ]


def apply_overlays(
    pool_name: str,
    pool_labels: Mapping[str, str],
    types: Sequence[InstanceType],
    overlays: Iterable[NodeOverlay],
    base_price: Mapping[str, float] | None = None,
) -> tuple[list[InstanceType], list[str]]:
    """The pool's types with the overlays applied, and the names of the overlays refused for a conflict.

    ``base_price``: per type, what of an offering's price is not the instance's (the node's EBS volumes):
    an overlay changes the instance's price, as Karpenter's does, and the volumes still count on top.
    """
    pool_reqs = Requirements.from_labels(pool_labels).with_requirement(Requirement.exactly(wk.NODEPOOL, pool_name))
    applied = _Applied()
    conflicts: list[str] = []
    for overlay in ordered(overlays):
        matches = {it.name: _offerings_matched(it, pool_reqs, overlay) for it in types}
        if _conflicts(overlay, matches, applied):
            conflicts.append(overlay.name)
            continue
        for name, offerings in matches.items():
            if not offerings:
                continue
            if overlay.price_change is not None:
                for o in offerings:
                    applied.prices.setdefault((name, o.zone, o.capacity_type), overlay)
            for resource in overlay.capacity:
                applied.capacity.setdefault((name, resource), overlay)
    return [_overlaid(it, applied, (base_price or {}).get(it.name, 0.0)) for it in types], conflicts


def _conflicts(overlay: NodeOverlay, matches: Mapping[str, list[Offering]], applied: _Applied) -> bool:
    for name, offerings in matches.items():
        if overlay.price_change is not None:
            for o in offerings:
                other = applied.prices.get((name, o.zone, o.capacity_type))
                if other is not None and other.weight == overlay.weight:
                    return True
        if offerings:
            for resource in overlay.capacity:
                other = applied.capacity.get((name, resource))
                if other is not None and other.weight == overlay.weight:
                    return True
    return False


def _overlaid(it: InstanceType, applied: _Applied, extra: float) -> InstanceType:
    notes: list[str] = []
    offerings = []
    priced: set[str] = set()
    for o in it.offerings:
        overlay = applied.prices.get((it.name, o.zone, o.capacity_type))
        if overlay is None:
            offerings.append(o)
            continue
        price = adjusted_price(max(o.price - extra, 0.0), overlay.price_change) + extra
        offerings.append(Offering(o.zone, o.capacity_type, price, o.available))
        if overlay.name not in priced:
            priced.add(overlay.name)
            notes.append(f"price set by NodeOverlay {overlay.name} ({overlay.price_change})")
    added = {r: ov for (name, r), ov in applied.capacity.items() if name == it.name}
    if not notes and not added:
        return it
    capacity = dict(it.capacity)
    for resource, overlay in sorted(added.items()):
        capacity[resource] = overlay.capacity[resource]
        notes.append(f"capacity {resource}={overlay.capacity[resource]} added by NodeOverlay {overlay.name}")
    return it.copy(offerings=tuple(offerings), capacity=capacity, overlays=(*it.overlays, *notes))
