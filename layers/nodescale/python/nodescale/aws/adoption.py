"""The EC2 side of adopting a NodeClaim a previous Karpenter left (#30.6): read its instance's tags, and put
this cluster's ownership tag on it.

Tagging is the one change nodescale makes to an instance it did not launch, and only to one Karpenter launched
for this cluster (``kubernetes.io/cluster/<cluster>=owned``) for a NodePool nodescale manages; the IAM policy
allows nothing wider (``infra/iam.py``, AdoptKarpenterInstances).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import tags as tagging

_CHUNK = 100


def instance_tags(ec2: Any, ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """The tags of those of ``ids`` that are still running or pending (the others are not adopted)."""
    wanted = sorted(set(ids))
    out: dict[str, dict[str, str]] = {}
    for start in range(0, len(wanted), _CHUNK):
        filters = [{"Name": "instance-id", "Values": wanted[start : start + _CHUNK]},
                   {"Name": "instance-state-name", "Values": ["pending", "running"]}]
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations") or []:
                for raw in reservation.get("Instances") or []:
                    out[raw.get("InstanceId", "")] = tagging.to_dict(raw.get("Tags"))
    return out


def tag_owned(ec2: Any, instance_id: str, cluster: str) -> None:
    """Put ``nodescale.io/cluster=<cluster>`` on the instance: from now on nodescale counts it as its own."""
    ec2.create_tags(Resources=[instance_id], Tags=[{"Key": tagging.CLUSTER, "Value": cluster}])
