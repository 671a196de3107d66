"""The CSINode the kubelet registers for a node once the EBS CSI driver's node plugin runs on it (#31.2).

Its one driver, ``ebs.csi.aws.com``, reports the instance id as its node id, the driver's zone topology key, and
how many EBS volumes the node can attach, as kubernetes-sigs/aws-ebs-csi-driver pkg/driver/node.go
getVolumesLimit works it out when no ``--volume-attach-limit`` is set:

- a Nitro instance type has 28 attachment slots shared by EBS volumes, network interfaces and NVMe instance-store
  disks: 28 minus the interfaces attached when the driver starts, minus the type's NVMe instance-store disks;
- an older (Xen) type has 39 slots for EBS volumes alone;
- either way the block devices already mapped at launch and the root volume are taken off (the driver reserves
  its mapped devices plus one for the root), and at least 1 is reported.

Not modelled: the driver's per-type tables (a few types have a dedicated EBS limit or a lower EBS maximum) and
Snow devices.
"""

from __future__ import annotations

from typing import Any

EBS_DRIVER = "ebs.csi.aws.com"
EBS_TOPOLOGY_KEY = "topology.ebs.csi.aws.com/zone"
NITRO_ATTACHMENTS = 28
XEN_ATTACHMENTS = 39


def ebs_attach_limit(itype: dict[str, Any], interfaces: int, extra_mappings: int) -> int:
    """The count the driver reports for an instance type (an EC2 DescribeInstanceTypes entry), given the network
    interfaces attached and the block devices mapped at launch besides the root volume."""
    if itype.get("Hypervisor") == "nitro":
        slots = NITRO_ATTACHMENTS - interfaces - _nvme_disks(itype)
    else:
        slots = XEN_ATTACHMENTS
    return max(1, slots - extra_mappings - 1)


def _nvme_disks(itype: dict[str, Any]) -> int:
    storage = itype.get("InstanceStorageInfo") or {}
    if (storage.get("NvmeSupport") or "unsupported") == "unsupported":
        return 0
    return sum(int(d.get("Count") or 0) for d in storage.get("Disks") or [])


def csinode_for(node: dict[str, Any], instance_id: str, limit: int) -> dict[str, Any]:
    """The CSINode body for a stored Node (same name, owned by the Node so it goes when the Node goes)."""
    meta = node["metadata"]
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": meta["name"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {"drivers": [{
            "name": EBS_DRIVER,
            "nodeID": instance_id,
            "topologyKeys": [EBS_TOPOLOGY_KEY],
            "allocatable": {"count": limit},
        }]},
    }
