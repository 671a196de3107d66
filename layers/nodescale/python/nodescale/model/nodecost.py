"""What a node costs per hour beyond its instance: its EBS volumes; and which burstable types a pool may use.

One definition, applied where each pool's instance types are derived (``pooltypes``): every offering's
price there is the instance's price plus the hourly price of the volumes its node class gives each
node. The solver compares those prices, ``plan`` prints them, and consolidation reads a node's price
and its replacements' from the same types, so planning and consolidation agree on what a node costs.

- Volumes: each EBS mapping of the node class (or the AMI family's default root volume), size x the
  region's per-GB-month price for its volume type / 730 hours a month. The prices are the caller's: the
  bundled table (``aws.pricing.ebs_prices``) is read by the adapter, so this module stays pure.
- Burstable (T) types are used only when a pool names them (see ``names_burstable``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import labels as wk
from .instance import ManagedInstance
from .instancetype import InstanceType
from .requirements import Requirements

HOURS_PER_MONTH = 730  # AWS bills GB-months; its own calculators convert them at 730 hours
DEFAULT_VOLUME_TYPE = "gp3"  # what EC2 gives a mapping without a VolumeType in a launch template
# A Custom AMI brings its own mappings, which nodescale cannot see: it is priced like the common
# default root volume (20 GiB gp3) rather than as free, so a node never looks cheaper than it is.
UNKNOWN_ROOT_VOLUME = ({"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3"}},)

# Burstable types: the T family. AWS bills their CPU above baseline in unlimited mode (T3/T3a/T4g launch
# unlimited by default, spot included) at a flat rate per vCPU-hour: $0.05 for Linux T2/T3/T3a, $0.04
# for T4g (https://aws.amazon.com/ec2/pricing/on-demand/#T2.2FT3.2FT4g_Unlimited_Mode_Pricing; surplus
# credits on spot: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/burstable-performance-instances-unlimited-mode.html).
# A pod's CPU request is what the scheduler fills a node with, and a t4g.nano (5 % baseline) running a
# pod that requests a whole CPU pays about 10x its list price in surplus credits; yet EC2, not
# nodescale, picks among a claim's types by list price. So rather than a price EC2 would not follow,
# a pool gets burstable types only when it names them.
_BURSTABLE_NAME = re.compile(r"^t[0-9]")
_NAMING_KEYS = (wk.INSTANCE_TYPE, wk.INSTANCE_FAMILY, wk.INSTANCE_CATEGORY)


def volumes_per_hour(mappings: Iterable[Mapping[str, Any]], prices: Mapping[str, float]) -> float:
    """What a node's EBS volumes cost per hour: each mapping's GiB at its type's per-GB-month price in
    ``prices`` (by volume type), over 730 hours."""
    total = 0.0
    for mapping in mappings:
        ebs = mapping.get("Ebs") or {}
        size = ebs.get("VolumeSize")
        if not size:
            continue  # from a snapshot, sized by it: unknown here
        kind = str(ebs.get("VolumeType") or DEFAULT_VOLUME_TYPE).lower()
        total += int(size) * prices.get(kind, prices[DEFAULT_VOLUME_TYPE])
    return total / HOURS_PER_MONTH


def with_node_cost(types: Sequence[InstanceType], per_hour: float) -> list[InstanceType]:
    """The types with ``per_hour`` added to every offering's price (the same objects when it is 0)."""
    if per_hour <= 0:
        return list(types)
    out = []
    for it in types:
        offerings = tuple(
            # replace, not a new Offering: every other field (the zone id among them) stays as it was
            dataclasses.replace(o, price=o.price + per_hour) if o.price else o
            for o in it.offerings
        )
        out.append(it.copy(offerings=offerings))
    return out


def is_burstable(it: InstanceType) -> bool:
    """A T-family type (t2, t3, t3a, t4g, ...): its CPU runs at a baseline fraction unless it buys credits."""
    category = it.labels.get(wk.INSTANCE_CATEGORY)
    if category is not None:
        return category == "t"
    return bool(_BURSTABLE_NAME.match(it.name))


def names_burstable(requirements: Requirements, it: InstanceType) -> bool:
    """Whether the pool's requirements name this burstable type with In: by type, family or category.

    NotIn, Exists and numeric bounds name nothing; an unconstrained pool (like Karpenter's default
    NodePool) therefore gets no T types, which is what users who exclude the t family want anyway.
    """
    for key in _NAMING_KEYS:
        req = requirements.get(key)
        if req is None or req.complement or not req.values:
            continue
        value = it.name if key == wk.INSTANCE_TYPE else it.labels.get(key)
        if value is not None and value in req.values:
            return True
    return False


def usable_types(types: Sequence[InstanceType], requirements: Requirements) -> list[InstanceType]:
    """The types a pool may launch: burstable ones only where its requirements name them."""
    return [it for it in types if not is_burstable(it) or names_burstable(requirements, it)]


def instance_price(inst: ManagedInstance, it: InstanceType | None) -> float:
    """The running instance's price per hour: its offering's (zone, capacity type, reservation) in ``it``;
    0 when the catalog does not know the type or the offering."""
    if it is None:
        return 0.0
    for o in it.offerings:
        if o.zone == inst.zone and o.capacity_type == inst.capacity_type and (
            o.reservation_id == inst.capacity_reservation_id
        ):
            return o.price
    if inst.capacity_type == wk.CAPACITY_RESERVED:
        # Its reservation is no longer selected: EC2 bills it as on-demand from now on.
        for o in it.offerings:
            if o.zone == inst.zone and o.capacity_type == wk.CAPACITY_ON_DEMAND:
                return o.price
    return 0.0
