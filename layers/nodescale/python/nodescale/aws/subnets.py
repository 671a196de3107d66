"""Subnets chosen by selector terms; in each zone, the one with the most free addresses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..model.nodepool import SelectorTerm
from . import tags as tagging
from .selectors import SelectorError, paginate, select


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    zone_id: str
    vpc_id: str
    available_ips: int
    tags: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


def discover(ec2: object, terms: Sequence[SelectorTerm], where: str = "subnetSelectorTerms") -> list[Subnet]:
    """Every available subnet any term selects; raises SelectorError when none does."""
    raw = select(terms, paginate(ec2, "describe_subnets", "Subnets"), "SubnetId", "subnet-id", None, where)
    subnets = [
        Subnet(
            id=s["SubnetId"],
            zone=s["AvailabilityZone"],
            zone_id=s.get("AvailabilityZoneId", ""),
            vpc_id=s.get("VpcId", ""),
            available_ips=int(s.get("AvailableIpAddressCount", 0)),
            tags=tagging.to_dict(s.get("Tags")),
        )
        for s in raw
        if s.get("State", "available") == "available"
    ]
    if not subnets:
        raise SelectorError(f"{where}: no available subnet matches {_describe_terms(terms)}")
    return subnets


def best_per_zone(subnets: Iterable[Subnet], min_free: int = 1) -> dict[str, Subnet]:
    """Per zone, the subnet with the most free addresses (ties: lowest id, so runs agree).

    Zones whose subnets are all full are left out: a launch there can only fail with
    InsufficientFreeAddressesInSubnet.
    """
    best: dict[str, Subnet] = {}
    for s in subnets:
        if s.available_ips < min_free:
            continue
        cur = best.get(s.zone)
        if cur is None or (s.available_ips, cur.id) > (cur.available_ips, s.id):
            best[s.zone] = s
    return dict(sorted(best.items()))


def _describe_terms(terms: Sequence[SelectorTerm]) -> str:
    parts = []
    for t in terms:
        bits = [f"{k}={v}" for k, v in sorted(t.tags.items())]
        if t.id:
            bits.append(f"id={t.id}")
        parts.append("{" + ", ".join(bits) + "}")
    return " or ".join(parts)
