"""Capacity reservations shared out among a plan's NodeClaims, so a plan never counts on more reserved
instances than EC2 has free (Karpenter's scheduler ``ReservationManager``, which reserves a reserved
offering for a NodeClaim and takes reserved offerings from a claim when none is left).

The solver packs pods with reserved offerings priced near zero, so every claim that can use a
reservation is cheapest there. Afterwards, in plan order (the most important pods first), each claim
allowing ``reserved`` takes one free instance of the cheapest reservation among its types and zones and
is pinned to it: that type, that zone, capacity type ``reserved``, and the reservation's labels. A claim
that finds every reservation taken keeps its other capacity types (spot, then on-demand, at launch),
priced again without the reservation; one allowed nothing but ``reserved`` cannot be launched, and its
pods are left unschedulable until a reservation has room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..model import labels as wk
from ..model.instancetype import InstanceType, Offering
from .nodeclaim import pinned
from .plan import NodeClaim, Plan, Unschedulable, UnschedulableKind

_PINNED_BY_CLAIM = (wk.ZONE, wk.CAPACITY_TYPE, wk.CAPACITY_RESERVATION_ID, wk.CAPACITY_RESERVATION_TYPE)


def allot(plan: Plan, types_by_pool: Mapping[str, Sequence[InstanceType]]) -> Plan:
    """The plan with each claim that may use reserved capacity pinned to a reservation with room, or moved
    off reserved capacity when none has room left."""
    if not any(wk.CAPACITY_RESERVED in c.capacity_types for c in plan.node_claims):
        return plan
    free: dict[str, int] = {}
    claims: list[NodeClaim] = []
    for claim in plan.node_claims:
        if wk.CAPACITY_RESERVED not in claim.capacity_types:
            claims.append(claim)
            continue
        types = {t.name: t for t in types_by_pool.get(claim.nodepool, ())}
        chosen = _reservation(claim, types, free)
        if chosen is not None:
            name, offering = chosen
            free[offering.reservation_id] = free.get(offering.reservation_id, offering.reservation_capacity) - 1
            claims.append(_pin(claim, name, offering))
            continue
        others = [c for c in claim.capacity_types if c != wk.CAPACITY_RESERVED]
        if not others:
            plan.unschedulable.extend(
                Unschedulable(pod, f"nodepool {claim.nodepool}: every capacity reservation it may use is full",
                              UnschedulableKind.NO_OFFERING)
                for pod in claim.pods
            )
            continue
        claims.append(_without_reserved(claim, types, others))
    plan.node_claims = claims
    return plan


def _reservation(
    claim: NodeClaim, types: Mapping[str, InstanceType], free: Mapping[str, int]
) -> tuple[str, Offering] | None:
    """The cheapest reserved offering among the claim's types and zones with an instance still free."""
    best: tuple[float, int, str, Offering] | None = None
    for rank, name in enumerate(claim.instance_types):
        it = types.get(name)
        if it is None:
            continue
        for o in it.offerings:
            if o.capacity_type != wk.CAPACITY_RESERVED or not o.available or o.zone not in claim.zones:
                continue
            if free.get(o.reservation_id, o.reservation_capacity) <= 0:
                continue
            key = (o.price, rank, o.reservation_id, o)
            if best is None or key[:3] < best[:3]:
                best = key
    return None if best is None else (claim.instance_types[best[1]], best[3])


def _base_labels(claim: NodeClaim) -> dict[str, str]:
    return {k: v for k, v in claim.labels.items() if k not in _PINNED_BY_CLAIM}


def _pin(claim: NodeClaim, name: str, offering: Offering) -> NodeClaim:
    requirements, labels = pinned(claim.requirements, _base_labels(claim), [offering.zone], [wk.CAPACITY_RESERVED])
    labels[wk.CAPACITY_RESERVATION_ID] = offering.reservation_id
    labels[wk.CAPACITY_RESERVATION_TYPE] = offering.reservation_type or "default"
    return replace(claim, instance_types=[name], zones=[offering.zone], capacity_types=[wk.CAPACITY_RESERVED],
                   requirements=requirements, labels=labels, price=offering.price)


def _without_reserved(claim: NodeClaim, types: Mapping[str, InstanceType], others: list[str]) -> NodeClaim:
    prices = [
        (o.price, name)
        for name in claim.instance_types
        if (it := types.get(name)) is not None
        for o in it.offerings
        if o.available and o.zone in claim.zones and o.capacity_type in others
    ]
    prices.sort()
    order = list(dict.fromkeys(name for _, name in prices))
    names = order + [n for n in claim.instance_types if n not in order]
    requirements, labels = pinned(claim.requirements, _base_labels(claim), claim.zones, others)
    if len(claim.zones) == 1:
        labels[wk.ZONE] = claim.zones[0]
    return replace(claim, instance_types=names, capacity_types=others, requirements=requirements, labels=labels,
                   price=prices[0][0] if prices else claim.price)
