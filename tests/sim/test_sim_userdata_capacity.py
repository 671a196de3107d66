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
