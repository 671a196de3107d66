"""Security groups chosen by selector terms (tags, id or group name)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model.nodepool import SelectorTerm
from .selectors import SelectorError, paginate, select


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    id: str
    name: str
    vpc_id: str


def discover(
    ec2: object, terms: Sequence[SelectorTerm], where: str = "securityGroupSelectorTerms"
) -> list[SecurityGroup]:
    """Every security group any term selects, sorted by id; raises SelectorError when none does."""
    raw = select(
        terms, paginate(ec2, "describe_security_groups", "SecurityGroups"), "GroupId", "group-id", "group-name", where
    )
    if not raw:
        raise SelectorError(f"{where}: no security group matches the selector terms")
    return [SecurityGroup(g["GroupId"], g.get("GroupName", ""), g.get("VpcId", "")) for g in raw]
