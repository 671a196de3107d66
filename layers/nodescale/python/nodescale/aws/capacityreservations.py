"""The capacity reservations a node class selects, from DescribeCapacityReservations, read every run so
the counts the solver plans with are EC2's (Karpenter's ``providers/capacityreservation``).

Each term is one query, as Karpenter builds it (``types.go``, ``DescribeCapacityReservationsInput``):
always ``state=active``; an ``id`` term asks for that id; otherwise ``owner-id``, one ``tag:<key>``
filter per tag (``tag-key`` for "*") and ``instance-match-criteria``. The answers are merged by id, and
reservations past their end date dropped. An id that no longer exists is an empty answer, not an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ..model.capacityreservation import MATCH_CRITERIA, RESERVATION_TYPES, TYPE_DEFAULT, CapacityReservation
from ..model.nodepool import CapacityReservationTerm

_NOT_FOUND = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")


def query(term: CapacityReservationTerm) -> dict[str, Any]:
    """The DescribeCapacityReservations parameters of one term."""
    filters: list[dict[str, Any]] = [{"Name": "state", "Values": ["active"]}]
    if term.id:
        return {"CapacityReservationIds": [term.id], "Filters": filters}
    if term.owner_id:
        filters.append({"Name": "owner-id", "Values": [term.owner_id]})
    for key, value in sorted(term.tags.items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    if term.instance_match_criteria:
        filters.append({"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]})
    return {"Filters": filters}


def from_ec2(raw: dict[str, Any]) -> CapacityReservation | None:
    """One reservation; None for a kind nodescale does not know (a future match criteria or type), which
    Karpenter also leaves out rather than guess."""
    criteria = raw.get("InstanceMatchCriteria") or ""
    kind = raw.get("ReservationType") or TYPE_DEFAULT
    if criteria not in MATCH_CRITERIA or kind not in RESERVATION_TYPES:
        return None
    end = raw.get("EndDate")
    if isinstance(end, datetime) and end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    return CapacityReservation(
        id=raw["CapacityReservationId"],
        instance_type=raw.get("InstanceType", ""),
        zone=raw.get("AvailabilityZone", ""),
        available=int(raw.get("AvailableInstanceCount") or 0),
        total=int(raw.get("TotalInstanceCount") or 0),
        owner_id=raw.get("OwnerId", ""),
        instance_match_criteria=criteria,
        reservation_type=kind,
        end_date=end if isinstance(end, datetime) else None,
        interruptible=bool(raw.get("Interruptible", False)),
    )


def discover(ec2: Any, terms: Sequence[CapacityReservationTerm], now: datetime) -> list[CapacityReservation]:
    """The active reservations any term selects, by id, without the ones already ended."""
    found: dict[str, CapacityReservation] = {}
    for term in terms:
        for raw in _describe(ec2, query(term)):
            r = from_ec2(raw)
            if r is not None and not r.ended(now):
                found[r.id] = r
    return [found[k] for k in sorted(found)]


def _describe(ec2: Any, params: dict[str, Any]) -> Iterable[dict[str, Any]]:
    try:
        for page in ec2.get_paginator("describe_capacity_reservations").paginate(**params):
            yield from page.get("CapacityReservations") or []
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _NOT_FOUND:
            return
        raise
