"""One of this cluster's EC2 instances as the snapshot holds it: what EC2 says about it, read once per
invocation by the adapter (``aws/instances``) and decided on by the core (in flight, its price, its labels)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def instance_id(value: object) -> str | None:
    """``value`` when it is an EC2 instance id (``i-`` and 8 or 17 hex digits), else None."""
    return value if isinstance(value, str) and _INSTANCE_ID.match(value) else None


@dataclass(frozen=True, slots=True)
class ManagedInstance:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    nodepool: str | None
    state: str
    launch_time: datetime | None
    image_id: str = ""
    private_dns_name: str = ""
    subnet_id: str = ""
    launch_id: str | None = None
    config_hash: str | None = None  # of the launch template it came from
    security_group_ids: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # The capacity reservation it runs in ("" for none) and that reservation's type (default | capacity-block).
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""

    @property
    def provider_id(self) -> str:
        """The Node's ``spec.providerID`` on EKS: ``aws:///<zone>/<instance id>``."""
        return f"aws:///{self.zone}/{self.instance_id}"
