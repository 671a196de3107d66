"""Simulated nodes report the capacity and allocatable the EKS AMIs' bootstrap would compute."""

from __future__ import annotations

from sim.nodes.capacity import kube_reserved_cpu_millis, node_resources

M5_LARGE = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
P3_8XLARGE = {
    "InstanceType": "p3.8xlarge",
    "VCpuInfo": {"DefaultVCpus": 32},
    "MemoryInfo": {"SizeInMiB": 249856},
    "NetworkInfo": {"MaximumNetworkInterfaces": 8, "Ipv4AddressesPerInterface": 30},
    "GpuInfo": {"Gpus": [{"Name": "V100", "Manufacturer": "NVIDIA", "Count": 4}]},
}


def test_m5_large_matches_the_eks_ami_figures() -> None:
    res = node_resources(M5_LARGE)
    assert res.max_pods == 29  # 3 ENIs x (10 - 1) + 2
    assert res.capacity["cpu"] == "2" and res.capacity["memory"] == f"{8192 * 1024}Ki"
    assert res.allocatable["cpu"] == "1930m"  # 60m + 10m reserved
    # 8192 - (11 * 29 + 255) kube-reserved - 100 eviction = 7518 MiB
    assert res.allocatable["memory"] == f"{7518 * 1024}Ki"
    assert res.allocatable["pods"] == "29"
    assert res.capacity["ephemeral-storage"] == f"{20 * 1024 * 1024}Ki"


def test_user_data_max_pods_and_root_volume_change_allocatable() -> None:
    res = node_resources(M5_LARGE, max_pods=110, root_volume_gib=100)
    assert res.allocatable["pods"] == "110"
    assert res.allocatable["memory"] == f"{(8192 - (11 * 110 + 255) - 100) * 1024}Ki"
    gib = 1024**3
    assert int(res.allocatable["ephemeral-storage"]) == 100 * gib - gib - 10 * gib


def test_gpus_and_cpu_reservation_on_a_large_instance() -> None:
    res = node_resources(P3_8XLARGE)
    assert res.capacity["nvidia.com/gpu"] == res.allocatable["nvidia.com/gpu"] == "4"
    assert kube_reserved_cpu_millis(32) == 60 + 10 + 5 + 5 + 28 * 2.5
    assert res.allocatable["cpu"] == f"{32000 - 150}m"
    assert res.max_pods == 8 * 29 + 2


def test_windows_nodes_use_only_the_primary_eni() -> None:
    assert node_resources(M5_LARGE, windows=True).max_pods == 9


M5D_LARGE = {**M5_LARGE, "InstanceType": "m5d.large", "InstanceStorageInfo": {
    "TotalSizeInGB": 75, "Disks": [{"Count": 1, "SizeInGB": 75, "Type": "ssd"}], "NvmeSupport": "required"}}
C3_LARGE = {**M5_LARGE, "InstanceType": "c3.large", "InstanceStorageInfo": {
    "TotalSizeInGB": 32, "Disks": [{"Count": 2, "SizeInGB": 16, "Type": "ssd"}], "NvmeSupport": "unsupported"}}


def test_a_raid0_node_reports_its_nvme_instance_store_as_ephemeral_storage() -> None:
    """#31.5 (instance store): with the instance store assembled as RAID0 by the bootstrap, a node's
    ephemeral storage is its NVMe instance store's size (decimal GB, as nodescale's planner counts it in
    model/nodecapacity.instance_store_bytes), as on the EKS AMIs; Karpenter's counterpart is
    aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go, It "should launch instances w/
    instance storage for ephemeral storage resource requests when disks are mounted for ephemeral-storage".
    Without RAID0, or on a type whose disks are not NVMe, the root volume stays the node's storage."""
    res = node_resources(M5D_LARGE, root_volume_gib=20, instance_store_raid0=True)
    assert res.capacity["ephemeral-storage"] == f"{75 * 10**9 // 1024}Ki"
    assert int(res.allocatable["ephemeral-storage"]) == 75 * 10**9 - 1024**3 - 75 * 10**9 // 10
    for itype, raid0 in ((M5D_LARGE, False), (C3_LARGE, True), (M5_LARGE, True)):
        root = node_resources(itype, root_volume_gib=20, instance_store_raid0=raid0)
        assert root.capacity["ephemeral-storage"] == f"{20 * 1024 * 1024}Ki"
