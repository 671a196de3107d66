"""On-demand capacity reservations as nodescale plans with them (Karpenter v1.3+'s reserved capacity).

A reservation an EC2NodeClass selects (``capacityReservationSelectorTerms``) becomes one ``reserved``
offering of its instance type in its zone, priced near zero so the solver picks it before spot and
on-demand, and usable while instances are still free in it. Karpenter's rules, restated:

- the price of a reserved offering is the type's on-demand price / 10,000,000 (karpenter-provider-aws
  ``offering/reserved_capacity_resolver.go``): near zero, yet larger types still cost more than smaller;
- a capacity block is ``expiring`` from 40 minutes before its end (``ec2nodeclass_status.go``,
  ``capacityReservationExpirationPeriod``): it offers nothing more, and its nodes are drained then
  (``controllers/capacityreservation/expiration``), before EC2 reclaims the instances;
- a reservation past its end date is gone (``capacityreservation/provider.go``, ``filterReservations``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from . import labels as wk
from .instancetype import InstanceType, Offering

TYPE_DEFAULT = "default"
TYPE_CAPACITY_BLOCK = "capacity-block"
RESERVATION_TYPES = (TYPE_DEFAULT, TYPE_CAPACITY_BLOCK)
MATCH_OPEN = "open"
MATCH_TARGETED = "targeted"
MATCH_CRITERIA = (MATCH_OPEN, MATCH_TARGETED)
# How long before a capacity block ends its nodes are drained (Karpenter: 40 minutes).
CAPACITY_BLOCK_DRAIN = timedelta(minutes=40)
# A reserved offering costs the on-demand price divided by this (Karpenter's factor).
RESERVED_PRICE_DIVISOR = 10_000_000.0


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One active reservation, as DescribeCapacityReservations gave it."""

    id: str
    instance_type: str
    zone: str
    available: int  # AvailableInstanceCount
    total: int = 0  # TotalInstanceCount
    owner_id: str = ""
    instance_match_criteria: str = MATCH_TARGETED
    reservation_type: str = TYPE_DEFAULT
    end_date: datetime | None = None
    interruptible: bool = False

    def ended(self, now: datetime) -> bool:
        return self.end_date is not None and self.end_date <= now

    def expiring(self, now: datetime) -> bool:
        """A capacity block within 40 minutes of its end: drain its nodes, launch none into it."""
        return (
            self.reservation_type == TYPE_CAPACITY_BLOCK
            and self.end_date is not None
            and now >= self.end_date - CAPACITY_BLOCK_DRAIN
        )


def reserved_price(on_demand_price: float) -> float:
    """What a reserved offering costs the solver: near zero, in the order of the on-demand prices."""
    return on_demand_price / RESERVED_PRICE_DIVISOR


def offering(reservation: CapacityReservation, on_demand_price: float, now: datetime, zone_id: str = "") -> Offering:
    """The reserved offering of a reservation: available while it has room and is not expiring."""
    return Offering(
        zone=reservation.zone,
        capacity_type=wk.CAPACITY_RESERVED,
        price=reserved_price(on_demand_price),
        available=reservation.available > 0 and not reservation.expiring(now) and not reservation.ended(now),
        zone_id=zone_id,
        reservation_id=reservation.id,
        reservation_type=reservation.reservation_type,
        reservation_capacity=max(0, reservation.available),
    )


def with_reservations(
    types: Iterable[InstanceType], reservations: Iterable[CapacityReservation], now: datetime
) -> list[InstanceType]:
    """The types with a ``reserved`` offering for each reservation of theirs in a zone they are offered in
    (the zone's on-demand price, else any of its prices, sets the near-zero price)."""
    by_type: dict[str, list[CapacityReservation]] = {}
    for r in reservations:
        by_type.setdefault(r.instance_type, []).append(r)
    if not by_type:
        return list(types)
    out = []
    for it in types:
        mine = by_type.get(it.name)
        if not mine:
            out.append(it)
            continue
        added = []
        for r in sorted(mine, key=lambda r: r.id):
            in_zone = [o for o in it.offerings if o.zone == r.zone and o.capacity_type != wk.CAPACITY_RESERVED]
            if not in_zone:
                continue  # a zone the type (or its node class's subnets) does not reach
            od = [o.price for o in in_zone if o.capacity_type == wk.CAPACITY_ON_DEMAND]
            added.append(offering(r, min(od) if od else max(o.price for o in in_zone), now, in_zone[0].zone_id))
        out.append(it.copy(offerings=(*it.offerings, *added)) if added else it)
    return out


def consume(types: Iterable[InstanceType], reservation_id: str, count: int = 1) -> list[InstanceType]:
    """The types with ``count`` fewer instances free in the reservation (Karpenter's MarkLaunched)."""
    out = []
    for it in types:
        if not any(o.reservation_id == reservation_id for o in it.offerings):
            out.append(it)
            continue
        offerings = []
        for o in it.offerings:
            if o.reservation_id == reservation_id:
                left = max(0, o.reservation_capacity - count)
                o = replace(o, reservation_capacity=left, available=o.available and left > 0)
            offerings.append(o)
        out.append(it.copy(offerings=tuple(offerings)))
    return out
