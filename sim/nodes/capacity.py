"""Node capacity and allocatable the way the EKS AMIs' bootstrap computes them.

- max pods: ENIs x (IPv4 addresses per ENI - 1) + 2 (Windows: the primary ENI only, IPv4 per ENI - 1),
  unless the user data sets it;
- Windows: `vpc.amazonaws.com/PrivateIPv4Address` as many as its max pods (the primary interface's addresses);
- Linux on a trunk-compatible type: `vpc.amazonaws.com/pod-eni` as many as its branch interfaces (what the VPC
  resource controller advertises for security groups for pods);
- kube-reserved memory: 11 MiB per pod + 255 MiB;
- kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% above;
- kube-reserved ephemeral storage 1 GiB; eviction thresholds memory.available 100Mi, nodefs.available 10%.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 1024**3
DEFAULT_ROOT_VOLUME_GIB = 20
EVICTION_HARD_MEMORY_MIB = 100
KUBE_RESERVED_STORAGE_GIB = 1
PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"
POD_ENI = "vpc.amazonaws.com/pod-eni"


@dataclass(frozen=True)
class Resources:
    capacity: dict[str, str]
    allocatable: dict[str, str]
    max_pods: int


def eni_max_pods(instance_type: dict[str, Any], windows: bool = False) -> int:
    network = instance_type.get("NetworkInfo") or {}
    enis = int(network.get("MaximumNetworkInterfaces") or 1)
    per_eni = int(network.get("Ipv4AddressesPerInterface") or 2)
    if windows:
        return max(per_eni - 1, 1)
    return enis * (per_eni - 1) + 2


def kube_reserved_cpu_millis(vcpus: int) -> int:
    millis = 0.0
    for core in range(1, vcpus + 1):
        if core == 1:
            millis += 60
        elif core == 2:
            millis += 10
        elif core <= 4:
            millis += 5
        else:
            millis += 2.5
    return int(millis)


def kube_reserved_memory_mib(max_pods: int) -> int:
    return 11 * max_pods + 255


def gpu_count(instance_type: dict[str, Any]) -> int:
    gpus = (instance_type.get("GpuInfo") or {}).get("Gpus") or []
    return sum(int(g.get("Count") or 0) for g in gpus if str(g.get("Manufacturer", "")).upper() == "NVIDIA")


def nvme_instance_store_bytes(instance_type: dict[str, Any]) -> int | None:
    """The size of the type's NVMe instance store (decimal GB, as EC2 reports it); None without one. The
    AMIs' RAID0 set-up (AL2 --local-disks raid0, nodeadm localStorage, Bottlerocket ephemeral-storage init)
    assembles NVMe disks only."""
    storage = instance_type.get("InstanceStorageInfo") or {}
    if storage.get("NvmeSupport") in (None, "unsupported"):
        return None
    total = int(storage.get("TotalSizeInGB") or 0)
    return total * 10**9 if total else None


def node_resources(
    instance_type: dict[str, Any],
    max_pods: int | None = None,
    root_volume_gib: int | None = None,
    windows: bool = False,
    branch_interfaces: int = 0,
    instance_store_raid0: bool = False,
) -> Resources:
    """Capacity and allocatable of a node of this instance type (a describe_instance_types entry);
    ``branch_interfaces``: the type's entry in the VPC resource controller's limits table (0: cannot trunk);
    ``instance_store_raid0``: the bootstrap put the kubelet's storage on the NVMe instance store, whose size
    is then the node's ephemeral storage (the root volume's otherwise)."""
    vcpus = int((instance_type.get("VCpuInfo") or {}).get("DefaultVCpus") or 1)
    memory_mib = int((instance_type.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    pods = max_pods if max_pods is not None else eni_max_pods(instance_type, windows)
    local = nvme_instance_store_bytes(instance_type) if instance_store_raid0 else None
    storage_bytes = local or (root_volume_gib or DEFAULT_ROOT_VOLUME_GIB) * GIB
    gpus = gpu_count(instance_type)

    capacity = {
        "cpu": str(vcpus),
        "memory": f"{memory_mib * 1024}Ki",
        "ephemeral-storage": f"{storage_bytes // 1024}Ki",
        "pods": str(pods),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    cpu_alloc = vcpus * 1000 - kube_reserved_cpu_millis(vcpus)
    memory_alloc_mib = memory_mib - kube_reserved_memory_mib(pods) - EVICTION_HARD_MEMORY_MIB
    storage_alloc = storage_bytes - KUBE_RESERVED_STORAGE_GIB * GIB - storage_bytes // 10
    allocatable = {
        "cpu": f"{cpu_alloc}m",
        "memory": f"{max(memory_alloc_mib, 0) * 1024}Ki",
        "ephemeral-storage": str(max(storage_alloc, 0)),
        "pods": str(pods),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    if windows:
        # What the VPC resource controller advertises on an EKS Windows node: the primary interface's
        # IPv4 addresses less the node's own (each Windows pod requests one).
        addresses = str(eni_max_pods(instance_type, windows=True))
        capacity[PRIVATE_IPV4] = allocatable[PRIVATE_IPV4] = addresses
    elif branch_interfaces:
        # Security groups for pods: one branch interface per pod that asks; EKS offers none on Windows.
        capacity[POD_ENI] = allocatable[POD_ENI] = str(branch_interfaces)
    return Resources(capacity=capacity, allocatable=allocatable, max_pods=pods)
