"""A node class's block devices in EC2's shape (``blockDeviceMappings`` converted, sizes in GiB), or its
AMI family's default root volume: what the launch template carries and what the node's volumes cost."""

from __future__ import annotations

import math
from typing import Any

from .nodepool import NodeClass
from .quantity import QuantityError, parse_quantity


class BlockDeviceError(ValueError):
    """A blockDeviceMappings entry EC2 would refuse; the message names the node class and the field."""


_GIB = 2**30


def _gib(value: object, where: str) -> int:
    """An EBS size in GiB, rounded up: ``100Gi`` -> 100, ``20G`` (20e9 bytes) -> 19; plain ints are GiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        raise BlockDeviceError(f"{where}: {exc}") from None
    return max(1, math.ceil(amount / _GIB))


_EBS_KEYS = {
    "volumetype": "VolumeType",
    "iops": "Iops",
    "throughput": "Throughput",
    "encrypted": "Encrypted",
    "kmskeyid": "KmsKeyId",
    "deleteontermination": "DeleteOnTermination",
    "snapshotid": "SnapshotId",
}


def block_device_mappings(node_class: NodeClass, family: str) -> list[dict]:
    """The node class's block devices in EC2's shape, or the family's default root volume."""
    where = f"{node_class.source or node_class.name}: blockDeviceMappings"
    if not node_class.block_device_mappings:
        return default_block_devices(family)
    out = []
    for i, raw in enumerate(node_class.block_device_mappings):
        if "DeviceName" in raw:  # already EC2's shape
            out.append(dict(raw))
            continue
        device = raw.get("deviceName")
        if not device:
            raise BlockDeviceError(f"{where}[{i}].deviceName is required")
        ebs_in = raw.get("ebs") or {}
        ebs: dict[str, Any] = {"DeleteOnTermination": True}
        for key, value in ebs_in.items():
            if key == "volumeSize":
                ebs["VolumeSize"] = _gib(value, f"{where}[{i}].ebs.volumeSize")
                continue
            ec2_key = _EBS_KEYS.get(key.lower())
            if ec2_key is None:
                raise BlockDeviceError(f"{where}[{i}].ebs.{key} is not an EBS setting")
            ebs[ec2_key] = int(value) if ec2_key in ("Iops", "Throughput") else value
        out.append({"DeviceName": device, "Ebs": ebs})
    return out


def default_block_devices(family: str) -> list[dict]:
    def volume(device: str, gib: int) -> dict:
        return {
            "DeviceName": device,
            "Ebs": {"VolumeSize": gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }

    if family in ("AL2", "AL2023"):
        return [volume("/dev/xvda", 20)]
    if family == "Bottlerocket":
        return [volume("/dev/xvda", 4), volume("/dev/xvdb", 20)]
    if family == "Ubuntu":
        return [volume("/dev/sda1", 20)]
    if family.startswith("Windows"):
        return [volume("/dev/sda1", 50)]
    return []  # Custom: the image's own mappings
