"""Which instances named in an event this cluster owns, in any state.

The world's instance list holds only live instances; an event may name one that is already
stopped or terminated, and a terminated instance still has to be proved ours before its Node is
touched. So the ids are described one more time, whatever their state, and each is sorted into
owned (with what the decision needs) or not ours, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..model import labels as wk
from ..model import nodelabels
from ..model.instance import ManagedInstance
from . import tags as tagging

# States in which the instance no longer runs its pods: waiting for them to drain is pointless.
NOT_RUNNING_STATES = frozenset({"shutting-down", "terminated", "stopping", "stopped"})
GONE_STATES = frozenset({"shutting-down", "terminated"})
_CHUNK = 100


@dataclass(frozen=True, slots=True)
class OwnedInstance:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    nodepool: str | None
    # EC2's PrivateDnsName: the Node's name on EKS (kubelet registers under it), "" when EC2 gives none.
    private_dns_name: str = ""

    def managed(self) -> ManagedInstance:
        """The instance as a read of this cluster's instances gives it (no launch time or tags known here)."""
        return ManagedInstance(self.instance_id, self.instance_type, self.zone, self.capacity_type, self.nodepool,
                               self.state, None, private_dns_name=self.private_dns_name)

    @property
    def running_pods(self) -> bool:
        return self.state not in NOT_RUNNING_STATES

    @property
    def gone(self) -> bool:
        return self.state in GONE_STATES


class NotOursReason(StrEnum):
    """Why an instance is left alone; decisions read this, never the message."""

    UNTAGGED = "untagged"  # it exists, without this cluster's ownership tag
    NOT_FOUND = "not-found"  # EC2 does not know it in this account and region


@dataclass(frozen=True, slots=True)
class NotOurs:
    reason: NotOursReason
    message: str  # for people: events, logs, summaries


@dataclass(frozen=True, slots=True)
class Ownership:
    owned: dict[str, OwnedInstance]
    not_ours: dict[str, NotOurs]  # instance id -> why it is left alone

    def missing(self, instance_id: str) -> bool:
        """EC2 does not know the instance (as opposed to: it belongs to someone else)."""
        found = self.not_ours.get(instance_id)
        return found is not None and found.reason is NotOursReason.NOT_FOUND


def classify(ec2: Any, ids: Iterable[str], cluster: str) -> Ownership:
    """Describe ``ids`` (every state) and split them into this cluster's and the rest."""
    wanted = sorted(set(ids))
    owned: dict[str, OwnedInstance] = {}
    not_ours: dict[str, NotOurs] = {}
    seen: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        # A filter rather than InstanceIds: one unknown id would otherwise fail the whole call.
        pages = ec2.get_paginator("describe_instances").paginate(Filters=[{"Name": "instance-id", "Values": chunk}])
        for page in pages:
            for reservation in page.get("Reservations") or []:
                for raw in reservation.get("Instances") or []:
                    iid = raw.get("InstanceId", "")
                    seen.add(iid)
                    tags = tagging.to_dict(raw.get("Tags"))
                    if not tagging.is_managed(tags, cluster):
                        not_ours[iid] = NotOurs(
                            NotOursReason.UNTAGGED,
                            f"instance {iid} has no {tagging.CLUSTER}={cluster} tag: not launched by this cluster",
                        )
                        continue
                    owned[iid] = OwnedInstance(
                        instance_id=iid,
                        instance_type=raw.get("InstanceType", ""),
                        zone=(raw.get("Placement") or {}).get("AvailabilityZone", ""),
                        capacity_type=wk.CAPACITY_SPOT if raw.get("InstanceLifecycle") == "spot" else wk.CAPACITY_ON_DEMAND,
                        state=(raw.get("State") or {}).get("Name", ""),
                        nodepool=nodelabels.pool_key(tags) or None,
                        private_dns_name=raw.get("PrivateDnsName") or "",
                    )
    for iid in wanted:
        if iid not in seen:
            not_ours[iid] = NotOurs(NotOursReason.NOT_FOUND, f"instance {iid} not found in this account and region")
    return Ownership(owned, not_ours)
