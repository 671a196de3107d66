"""This cluster's EC2 instances: listing them by their ownership tag, status checks, and a
terminate that refuses anything that is not provably ours."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import clock
from ..model import labels as wk
from ..model import nodelabels
from ..model.instance import ManagedInstance
from . import tags as tagging

log = logging.getLogger(__name__)

# Every state but terminated: a stopped instance still costs its volumes and still backs a (NotReady)
# Node, so repair, cleanup and `cdk destroy` must all see it.
ACTIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
_PAGE = 1000  # DescribeInstances' MaxResults ceiling
_CHUNK = 100  # ids per Describe*/Terminate call (the APIs accept more; smaller pages stay fast)


def instance_id_from_provider_id(provider_id: str) -> str | None:
    """``aws:///us-east-1a/i-0abc`` -> ``i-0abc``; None for anything that is not an EC2 provider id."""
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


def capacity_type_of(raw: dict) -> tuple[str, str, str]:
    """(capacity type, reservation id, reservation type) of a DescribeInstances instance: one running in a
    capacity reservation is ``reserved`` (a capacity block's lifecycle is ``capacity-block``)."""
    lifecycle = raw.get("InstanceLifecycle")
    reservation = raw.get("CapacityReservationId") or ""
    if reservation:
        kind = "capacity-block" if lifecycle == "capacity-block" else "default"
        return wk.CAPACITY_RESERVED, reservation, kind
    return (wk.CAPACITY_SPOT if lifecycle == "spot" else wk.CAPACITY_ON_DEMAND), "", ""


def _from_ec2(raw: dict) -> ManagedInstance:
    tags = tagging.to_dict(raw.get("Tags"))
    capacity_type, reservation_id, reservation_type = capacity_type_of(raw)
    return ManagedInstance(
        instance_id=raw["InstanceId"],
        instance_type=raw.get("InstanceType", ""),
        zone=(raw.get("Placement") or {}).get("AvailabilityZone", ""),
        capacity_type=capacity_type,
        capacity_reservation_id=reservation_id,
        capacity_reservation_type=reservation_type,
        nodepool=nodelabels.pool_key(tags) or None,
        state=(raw.get("State") or {}).get("Name", ""),
        launch_time=raw.get("LaunchTime"),
        image_id=raw.get("ImageId", ""),
        private_dns_name=raw.get("PrivateDnsName", ""),
        subnet_id=raw.get("SubnetId", ""),
        launch_id=tags.get(tagging.LAUNCH),
        config_hash=tags.get(tagging.CONFIG_HASH),
        security_group_ids=tuple(sorted(g["GroupId"] for g in raw.get("SecurityGroups") or [])),
        tags=tags,
    )


def _describe(ec2: Any, filters: list[dict]) -> list[dict]:
    out = []
    # The largest page the API allows: a cluster of thousands is listed in a few calls, not dozens.
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters, PaginationConfig={"PageSize": _PAGE})
    for page in pages:
        for reservation in page.get("Reservations", []):
            out.extend(reservation.get("Instances", []))
    return out


def list_instances(
    ec2: Any, cluster: str, states: Sequence[str] = ACTIVE_STATES, nodepool: str | None = None
) -> list[ManagedInstance]:
    """This cluster's instances in ``states`` (default: everything not yet terminated)."""
    filters = [*tagging.cluster_filters(cluster, nodepool), {"Name": "instance-state-name", "Values": list(states)}]
    return sorted(
        (_from_ec2(raw) for raw in _describe(ec2, filters) if tagging.is_managed(raw.get("Tags"), cluster)),
        key=lambda i: i.instance_id,
    )


# StateReason codes of an instance EC2 accepted that died as it started: a volume's KMS key refused the launching
# caller (kms:CreateGrant through EC2), or another launch-time failure EC2 reports as its own.
DIED_AT_LAUNCH = ("Client.InternalError", "Server.InternalError")


def died_at_launch(ec2: Any, cluster: str) -> list[tuple[ManagedInstance, str, str]]:
    """This cluster's instances that terminated as they started, with their StateReason code and message
    (EC2 shows a terminated instance for about an hour)."""
    filters = [*tagging.cluster_filters(cluster, None),
               {"Name": "instance-state-name", "Values": ["shutting-down", "terminated"]},
               {"Name": "state-reason-code", "Values": list(DIED_AT_LAUNCH)}]
    out = []
    for raw in _describe(ec2, filters):
        reason = raw.get("StateReason") or {}
        if tagging.is_managed(raw.get("Tags"), cluster) and reason.get("Code") in DIED_AT_LAUNCH:
            out.append((_from_ec2(raw), str(reason["Code"]), str(reason.get("Message") or "")))
    return sorted(out, key=lambda found: found[0].instance_id)


def unregistered(
    candidates: Iterable[ManagedInstance],
    registered_ids: Iterable[str],
    timeout_seconds: float,
    now: datetime | None = None,
) -> list[ManagedInstance]:
    """Instances launched more than ``timeout_seconds`` ago that no Node names in its providerID
    (pass the ids from :func:`instance_id_from_provider_id`): they will never join."""
    now = now or clock.now()
    registered = set(registered_ids)
    out = []
    for inst in candidates:
        if inst.instance_id in registered or inst.state not in ("pending", "running") or inst.launch_time is None:
            continue
        launched = inst.launch_time if inst.launch_time.tzinfo else inst.launch_time.replace(tzinfo=UTC)
        if (now - launched).total_seconds() > timeout_seconds:
            out.append(inst)
    return out


@dataclass
class TerminateResult:
    terminated: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # exist, but lack this cluster's tag
    missing: list[str] = field(default_factory=list)  # no such instance (already gone)


def terminate(ec2: Any, ids: Iterable[str], cluster: str) -> TerminateResult:
    """Terminate the instances among ``ids`` that carry this cluster's ownership tag, and only those.

    Each instance's tags are read from EC2 just before, so a stale or forged id can never reach an
    instance this cluster does not own.
    """
    wanted = sorted(set(ids))
    result = TerminateResult()
    if not wanted:
        return result
    owned: list[str] = []
    found: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        # A filter, not InstanceIds: one unknown id would otherwise fail the whole call.
        for raw in _describe(ec2, [{"Name": "instance-id", "Values": chunk}]):
            iid = raw["InstanceId"]
            found.add(iid)
            if tagging.is_managed(raw.get("Tags"), cluster):
                owned.append(iid)
            else:
                result.refused.append(iid)
                log.warning(
                    "refused to terminate an instance without this cluster's tag",
                    extra={"instance_id": iid, "cluster": cluster, "tag": tagging.CLUSTER},
                )
    result.missing = [i for i in wanted if i not in found]
    for start in range(0, len(owned), _CHUNK):
        chunk = owned[start : start + _CHUNK]
        out = ec2.terminate_instances(InstanceIds=chunk)
        result.terminated.extend(i["InstanceId"] for i in out.get("TerminatingInstances", []))
    if result.terminated:
        log.info("terminated instances", extra={"instance_ids": result.terminated, "cluster": cluster})
    return result


def impaired_instances(ec2: Any) -> set[str]:
    """Running instances failing a system or instance status check.

    One paginated call for the account rather than one per hundred ids: a cluster of thousands of
    nodes needs a few pages, not dozens of calls each scanning every instance.
    """
    out: set[str] = set()
    for page in ec2.get_paginator("describe_instance_status").paginate(PaginationConfig={"PageSize": 1000}):
        for s in page.get("InstanceStatuses", []):
            states = ((s.get("SystemStatus") or {}).get("Status"), (s.get("InstanceStatus") or {}).get("Status"))
            if "impaired" in states:
                out.add(s["InstanceId"])
    return out


def tag_nodeclaim(ec2: Any, instance_id: str, nodeclaim: str) -> None:
    """Tag a launched instance, its volumes and its network interfaces with its NodeClaim's name, as
    Karpenter does. After the launch, not in the Fleet request: one request launches several claims'
    instances, and its ClientToken must not change when a retried launch made new NodeClaims. The IAM
    policy allows only this key on this cluster's instances, volumes and network interfaces."""
    ids = [instance_id, *attached_resources(ec2, instance_id)]
    ec2.create_tags(Resources=ids, Tags=[{"Key": tagging.NODECLAIM, "Value": nodeclaim}])


def attached_resources(ec2: Any, instance_id: str) -> list[str]:
    """The EBS volumes and network interfaces DescribeInstances lists on the instance (none while EC2
    does not list the instance yet: its tag still goes on)."""
    # A filter rather than InstanceIds: an instance EC2 does not list yet answers nothing, not an error.
    pages = ec2.get_paginator("describe_instances").paginate(Filters=[{"Name": "instance-id", "Values": [instance_id]}])
    out: list[str] = []
    for page in pages:
        for reservation in page.get("Reservations") or []:
            for raw in reservation.get("Instances") or []:
                out += [m["Ebs"]["VolumeId"] for m in raw.get("BlockDeviceMappings") or [] if (m.get("Ebs") or {}).get("VolumeId")]
                out += [n["NetworkInterfaceId"] for n in raw.get("NetworkInterfaces") or [] if n.get("NetworkInterfaceId")]
    return out
