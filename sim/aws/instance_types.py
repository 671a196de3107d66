"""Instance types moto's recording lacks but real accounts have, added to the moto child process.

moto's DescribeInstanceTypes recording has no P3 types, which the GPU example of Karpenter users asks
for by name. Their specifications are AWS's published ones (instance type page, ENI/IP limits table).
"""

from __future__ import annotations

from typing import Any

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f")

# name, vCPU, memory GiB, V100 GPUs, network description, ENIs, IPv4 per ENI
_P3 = (
    ("p3.2xlarge", 8, 61, 1, "Up to 10 Gigabit", 4, 15),
    ("p3.8xlarge", 32, 244, 4, "10 Gigabit", 8, 30),
    ("p3.16xlarge", 64, 488, 8, "25 Gigabit", 8, 30),
)


def _describe(name: str, vcpu: int, memory_gib: int, gpus: int, network: str, enis: int, ipv4: int) -> dict[str, Any]:
    return {
        "InstanceType": name,
        "CurrentGeneration": True,
        "FreeTierEligible": False,
        "SupportedUsageClasses": ["on-demand", "spot"],
        "SupportedRootDeviceTypes": ["ebs"],
        "SupportedVirtualizationTypes": ["hvm"],
        "BareMetal": False,
        "Hypervisor": "xen",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"], "SustainedClockSpeedInGhz": 2.3, "Manufacturer": "Intel"},
        "VCpuInfo": {"DefaultVCpus": vcpu, "DefaultCores": vcpu // 2, "DefaultThreadsPerCore": 2},
        "MemoryInfo": {"SizeInMiB": memory_gib * 1024},
        "InstanceStorageSupported": False,
        "EbsInfo": {"EbsOptimizedSupport": "default", "EncryptionSupport": "supported", "NvmeSupport": "unsupported"},
        "NetworkInfo": {
            "NetworkPerformance": network,
            "MaximumNetworkInterfaces": enis,
            "MaximumNetworkCards": 1,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"NetworkCardIndex": 0, "NetworkPerformance": network, "MaximumNetworkInterfaces": enis}],
            "Ipv4AddressesPerInterface": ipv4,
            "Ipv6AddressesPerInterface": ipv4,
            "Ipv6Supported": True,
            "EnaSupport": "required",
            "EfaSupported": False,
        },
        "GpuInfo": {
            "Gpus": [{"Name": "V100", "Manufacturer": "NVIDIA", "Count": gpus, "MemoryInfo": {"SizeInMiB": 16384}}],
            "TotalGpuMemoryInMiB": 16384 * gpus,
        },
        "PlacementGroupInfo": {"SupportedStrategies": ["cluster", "partition", "spread"]},
        "HibernationSupported": False,
        "BurstablePerformanceSupported": False,
        "DedicatedHostsSupported": True,
        "AutoRecoverySupported": True,
        "SupportedBootModes": ["legacy-bios", "uefi"],
    }


def install(region: str = "us-east-1") -> None:
    """Add the missing types and their us-east-1 offerings to moto's in-memory tables, and, for a ``region``
    moto has no offerings recorded for (cn-north-1...), the bundled catalog's offerings there."""
    from moto.ec2.models import instance_types as moto_types

    for spec in _P3:
        if spec[0] not in moto_types.INSTANCE_TYPES:
            moto_types.INSTANCE_TYPES[spec[0]] = _describe(*spec)
            # The backend keeps its own list, built when moto was imported.
            moto_types.InstanceTypeBackend.instance_types.append(moto_types.InstanceType(spec[0]))
    offerings = moto_types.INSTANCE_TYPE_OFFERINGS
    zone_list = offerings.get("availability-zone", {}).setdefault("us-east-1", [])
    region_list = offerings.get("region", {}).setdefault("us-east-1", [])
    known = {(o["InstanceType"], o["Location"]) for o in zone_list}
    for name, *_ in _P3:
        for zone in ZONES:
            if (name, zone) not in known:
                zone_list.append({"InstanceType": name, "Location": zone, "LocationType": "availability-zone"})
        if not any(o["InstanceType"] == name for o in region_list):
            region_list.append({"InstanceType": name, "Location": "us-east-1", "LocationType": "region"})
    if region != "us-east-1":
        _install_region(moto_types.INSTANCE_TYPES, offerings, region)


def _install_region(known_types: dict[str, Any], offerings: dict[str, Any], region: str) -> None:
    """Offerings of ``region`` as the bundled catalog has them (types moto can describe only), unless moto
    recorded some: moto's recording covers the commercial regions, not aws-cn or aws-us-gov."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    from nodescale.aws.catalog import bundled_zones

    zone_list = offerings.get("availability-zone", {}).setdefault(region, [])
    region_list = offerings.get("region", {}).setdefault(region, [])
    if zone_list:
        return
    zones = {z.name for z in RegionsAndZonesBackend.zones.get(region, [])}
    for name, where in sorted(bundled_zones(region).items()):
        if name not in known_types:
            continue
        zone_list += [{"InstanceType": name, "Location": z, "LocationType": "availability-zone"}
                      for z in sorted(where) if z in zones]
        region_list.append({"InstanceType": name, "Location": region, "LocationType": "region"})
