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

Packing assumed every claim could have a reservation, so a claim that lost one may be on a type chosen
for the reservation's price (say a larger type whose reservation ran out while a smaller type's is
untouched). When reservations are still free after that, the pods of the claims that lost one are planned
again (``share``): the claims kept so far, and the existing nodes with what they took, are in-flight
nodes of that solve, so its topology and limits count them, and the reservations they took are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..model import labels as wk
from ..model import resources as res
from ..model.capacityreservation import consume
from ..model.instancetype import InstanceType, Offering
from ..model.pod import Pod
from .nodeclaim import pinned
from .plan import ExistingNode, ExistingPlacement, NodeClaim, Plan, Unschedulable, UnschedulableKind

_PINNED_BY_CLAIM = (wk.ZONE, wk.CAPACITY_TYPE, wk.CAPACITY_RESERVATION_ID, wk.CAPACITY_RESERVATION_TYPE)


# Plans again for the pods of claims that lost a reservation, at most this many times per solve.
MAX_ROUNDS = 3
Resolve = Callable[[list[Pod], list[ExistingNode], Mapping[str, Sequence[InstanceType]]], Plan]


def allot(plan: Plan, types_by_pool: Mapping[str, Sequence[InstanceType]]) -> Plan:
    """The plan with each claim that may use reserved capacity pinned to a reservation with room, or moved
    off reserved capacity when none has room left."""
    kept, spilled = _allot(plan, types_by_pool, {})
    plan.node_claims = kept + [c for c, _ in spilled]
    return plan


def share(plan: Plan, types_by_pool: Mapping[str, Sequence[InstanceType]], existing: Sequence[ExistingNode],
          node_labels: Mapping[str, Mapping[str, str]], resolve: Resolve) -> Plan:
    """``allot``, then the pods of claims that lost a reservation planned again (``resolve``) while
    reservations they could use are still free."""
    free: dict[str, int] = {}
    kept, spilled = _allot(plan, types_by_pool, free)
    existing = list(existing)
    placed = {p.node: p for p in plan.existing}
    for round_ in range(MAX_ROUNDS + 1):
        if not spilled:
            break
        # Last round: no reservation left to them, the pods are packed for spot/on-demand, as they will run.
        final = round_ == MAX_ROUNDS or not _still_free(spilled, types_by_pool, free)
        types = _no_reserved(types_by_pool) if final else _left(types_by_pool, free)
        nodes, stand_ins = _as_nodes(existing, placed, kept, types_by_pool, node_labels)
        again = resolve([p for c, _ in spilled for p in c.pods], nodes, types)
        for placement in again.existing:
            claim = stand_ins.get(placement.node)
            if claim is not None:
                claim.pods.extend(placement.pods)
                for pod in placement.pods:
                    for k, v in pod.requests.items():
                        claim.requests[k] = claim.requests.get(k, 0) + v
            elif placement.node in placed:
                placed[placement.node].pods.extend(placement.pods)
            else:
                placed[placement.node] = placement
        plan.unschedulable.extend(again.unschedulable)
        more, spilled = _allot(again, types_by_pool, free)
        kept += more
        if final:
            break
    plan.node_claims = kept + [c for c, _ in spilled]
    plan.existing = list(placed.values())
    return plan


def _allot(plan: Plan, types_by_pool: Mapping[str, Sequence[InstanceType]], free: dict[str, int]
           ) -> tuple[list[NodeClaim], list[tuple[NodeClaim, NodeClaim]]]:
    """The claims kept (pinned to a reservation, or never asking for one), and the (fallback, original)
    pairs of those that found every reservation taken; ``free`` counts what is left of each reservation."""
    kept: list[NodeClaim] = []
    spilled: list[tuple[NodeClaim, NodeClaim]] = []
    for claim in plan.node_claims:
        if wk.CAPACITY_RESERVED not in claim.capacity_types:
            kept.append(claim)
            continue
        types = {t.name: t for t in types_by_pool.get(claim.nodepool, ())}
        chosen = _reservation(claim, types, free)
        if chosen is not None:
            name, offering = chosen
            free[offering.reservation_id] = free.get(offering.reservation_id, offering.reservation_capacity) - 1
            kept.append(_pin(claim, name, offering))
            continue
        others = [c for c in claim.capacity_types if c != wk.CAPACITY_RESERVED]
        if not others:
            plan.unschedulable.extend(
                Unschedulable(pod, f"nodepool {claim.nodepool}: every capacity reservation it may use is full",
                              UnschedulableKind.NO_OFFERING)
                for pod in claim.pods
            )
            continue
        spilled.append((_without_reserved(claim, types, others), claim))
    return kept, spilled


def _still_free(spilled: Sequence[tuple[NodeClaim, NodeClaim]], types_by_pool: Mapping[str, Sequence[InstanceType]],
                free: Mapping[str, int]) -> bool:
    """Whether a reservation the spilled claims' pools could use still has an instance free."""
    pools = {original.nodepool for _, original in spilled}
    return any(
        o.capacity_type == wk.CAPACITY_RESERVED and o.available and free.get(o.reservation_id, o.reservation_capacity) > 0
        for pool in pools for it in types_by_pool.get(pool, ()) for o in it.offerings
    )


def _no_reserved(types_by_pool: Mapping[str, Sequence[InstanceType]]) -> dict[str, list[InstanceType]]:
    """The types without their reserved offerings."""
    out: dict[str, list[InstanceType]] = {}
    for pool, types in types_by_pool.items():
        out[pool] = [
            it.copy(offerings=tuple(o for o in it.offerings if o.capacity_type != wk.CAPACITY_RESERVED))
            if any(o.capacity_type == wk.CAPACITY_RESERVED for o in it.offerings) else it
            for it in types
        ]
    return out


def _left(types_by_pool: Mapping[str, Sequence[InstanceType]], free: Mapping[str, int]
          ) -> dict[str, list[InstanceType]]:
    """The types with what the plan took from each reservation taken out of it."""
    out: dict[str, list[InstanceType]] = {}
    for pool, types in types_by_pool.items():
        current = list(types)
        for rid, left in free.items():
            taken = None
            for it in current:
                for o in it.offerings:
                    if o.reservation_id == rid:
                        taken = o.reservation_capacity - left
            if taken:
                current = consume(current, rid, taken)
        out[pool] = current
    return out


def _as_nodes(existing: Sequence[ExistingNode], placed: Mapping[str, ExistingPlacement], claims: Sequence[NodeClaim],
              types_by_pool: Mapping[str, Sequence[InstanceType]], node_labels: Mapping[str, Mapping[str, str]]
              ) -> tuple[list[ExistingNode], dict[str, NodeClaim]]:
    """The existing nodes with the pods the plan put on them, and each kept claim as an in-flight node."""
    nodes = [replace(n, pods=[*n.pods, *placed[n.name].pods]) if n.name in placed else n for n in existing]
    stand_ins: dict[str, NodeClaim] = {}
    for i, claim in enumerate(claims):
        it = next((t for t in types_by_pool.get(claim.nodepool, ()) if t.name == claim.instance_types[0]), None)
        if it is None:
            continue
        name = f"planned/{i}"
        used: res.Resources = {}
        for pod in claim.pods:
            used = res.add(used, pod.requests)
        overhead = {k: v - used.get(k, 0) for k, v in claim.requests.items() if v > used.get(k, 0)}
        labels = {**it.labels, **node_labels.get(claim.nodepool, {}), **claim.labels,
                  wk.HOSTNAME: name, wk.INSTANCE_TYPE: it.name}
        nodes.append(ExistingNode(name, labels, {k: max(0, v - overhead.get(k, 0)) for k, v in it.allocatable.items()},
                                  claim.taints, list(claim.pods), dict(it.capacity), in_flight=True, price=claim.price,
                                  pool=claim.nodepool))
        stand_ins[name] = claim
    return nodes, stand_ins


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
            if not o.meets(claim.requirements):
                continue  # its pods ask for another reservation (id or type)
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
