"""Availability Zones under an ARC zonal shift or autoshift, and instance types with those zones' offerings taken out.

A zone is named here by its id (``use1-az1``), as ARC names it; an offering knows its zone's id where
DescribeAvailabilityZones told the catalog (``Offering.zone_id``), which is how a shift reaches the
zone *names* launches use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .instancetype import InstanceType


@dataclass(frozen=True, slots=True)
class ActiveShift:
    """A zone shifted away from: by which kinds of shift (autoshift, manual...), until when at the latest."""

    zone_id: str
    kinds: tuple[str, ...]
    until: float  # epoch seconds: the latest of its kinds' bounds


def avoid(types: Sequence[InstanceType], zone_ids: Iterable[str]) -> list[InstanceType]:
    """Copies of ``types`` whose offerings in the zones ``zone_ids`` are unavailable (nothing launches there)."""
    away = frozenset(zone_ids)
    if not away:
        return list(types)
    out = []
    for it in types:
        if not any(o.zone_id in away and o.available for o in it.offerings):
            out.append(it)
            continue
        offerings = tuple(dataclasses.replace(o, available=False) if o.zone_id in away else o for o in it.offerings)
        out.append(it.copy(offerings=offerings))
    return out


def zone_names(types: Iterable[InstanceType], zone_ids: Iterable[str]) -> dict[str, str]:
    """Zone id -> zone name for the ids in ``zone_ids`` that the offerings of ``types`` know."""
    wanted = frozenset(zone_ids)
    found: dict[str, str] = {}
    for it in types:
        for o in it.offerings:
            if o.zone_id in wanted:
                found.setdefault(o.zone_id, o.zone)
        if len(found) == len(wanted):
            break
    return found


def shifted_zone_names(shifts: Mapping[str, ActiveShift], names: Mapping[str, str]) -> frozenset[str]:
    """The zone names of the shifts whose zone id maps to a name."""
    return frozenset(names[z] for z in shifts if z in names)
