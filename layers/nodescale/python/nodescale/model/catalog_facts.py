"""The facts about one EC2 instance type that scheduling needs, read from a DescribeInstanceTypes entry.

The same parser serves the live catalog (EC2's answer at run time) and ``scripts/build_catalog.py``
(moto's recorded answer, once, at build time), so both produce identical instance types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import astuple, dataclass, fields

# EC2 processor architectures and the Kubernetes architecture each one runs (macOS-only ones run none).
KUBE_ARCH = {"x86_64": "amd64", "i386": "amd64", "arm64": "arm64"}
_NETWORK_PERFORMANCE = re.compile(r"^(?:(\d+)x )?([\d.]+) Gigabit$")


@dataclass(frozen=True, slots=True)
class TypeFacts:
    name: str
    vcpu: int
    memory_mib: int
    architectures: tuple[str, ...]  # as EC2 names them: x86_64, arm64, i386, arm64_mac
    cpu_manufacturer: str  # as EC2 spells it: Intel, AMD, AWS, Apple ("" when not reported)
    hypervisor: str  # nitro | xen | "" (bare metal reports none)
    bare_metal: bool
    current_generation: bool
    windows: bool  # Windows Server AMIs can run on it (see ``windows_capable``)
    gpu_count: int
    gpu_manufacturer: str
    gpu_name: str
    gpu_memory_mib: int  # per GPU, as Karpenter's instance-gpu-memory label reports it
    local_nvme_gib: int  # total NVMe instance store, 0 when none
    network_mbps: int  # baseline bandwidth summed over network cards, 0 when EC2 does not say
    max_enis: int  # on the default network card: what the VPC CNI can use for pods
    ipv4_per_eni: int
    neuron_count: int  # Inferentia/Trainium devices (aws.amazon.com/neuron)
    encryption_in_transit: bool
    usage_classes: tuple[str, ...]  # "on-demand", "spot" (capacity-block is not something we launch)
    # Added later, so they default: rows of an older bundle, and hand-written facts, lack them.
    ebs_mbps: int = 0  # baseline EBS bandwidth (EBS-optimized), 0 when EC2 does not say
    accelerator_name: str = ""  # the one kind of Inferentia/Trainium device, as EC2 names it ("" for none)
    accelerator_manufacturer: str = ""
    accelerator_count: int = 0
    cpu_sustained_mhz: int = 0  # sustained all-core clock, rounded to MHz; 0 when EC2 does not say
    nitro_enclaves: bool = False  # NitroEnclavesSupport is "supported"
    efa_max: int = 0  # EFA interfaces it takes (vpc.amazonaws.com/efa)
    neuron_cores: int = 0  # NeuronCores over all its Neuron devices (aws.amazon.com/neuroncore)

    @property
    def kube_arch(self) -> str | None:
        """The kubernetes.io/arch value, or None for types no Kubernetes node can run on (Mac)."""
        for arch in self.architectures:
            if arch in KUBE_ARCH:
                return KUBE_ARCH[arch]
        return None

    def to_row(self) -> list:
        """A positional row for the bundled file (field order is ``FIELDS``); tuples become lists."""
        return [list(v) if isinstance(v, tuple) else v for v in astuple(self)]

    @classmethod
    def from_row(cls, row: list) -> TypeFacts:
        return cls(*(tuple(v) if isinstance(v, list) else v for v in row))


FIELDS = tuple(f.name for f in fields(TypeFacts))


class InstanceTypeDataError(ValueError):
    """A DescribeInstanceTypes entry lacks something every instance type has."""


def windows_capable(architectures: tuple[str, ...], virtualization: tuple[str, ...]) -> bool:
    """Whether EC2's Windows Server AMIs (what EKS Windows nodes use) can launch on a type.

    Windows AMIs are x86_64 and HVM-only; Mac types (``x86_64_mac``/``arm64_mac``) run only macOS;
    Graviton (arm64) has no Windows. Bare-metal x86 types do run Windows Server, so they count.
    """
    return "x86_64" in architectures and "hvm" in virtualization


def network_mbps(network: Mapping) -> int:
    """Baseline network bandwidth in Mbps: the sum over network cards, else the headline figure."""
    cards = network.get("NetworkCards") or []
    baselines = [c.get("BaselineBandwidthInGbps") for c in cards]
    if baselines and all(b is not None for b in baselines):
        return round(sum(baselines) * 1000)
    # Older recordings only carry the marketing string; "Up to N" is burst, not a baseline.
    match = _NETWORK_PERFORMANCE.match(str(network.get("NetworkPerformance") or ""))
    if not match:
        return 0
    return round(int(match.group(1) or 1) * float(match.group(2)) * 1000)


def facts_from_describe(info: Mapping) -> TypeFacts:
    """Parse one ``InstanceTypes[]`` entry of DescribeInstanceTypes (boto3's dict shape)."""
    name = info.get("InstanceType")
    if not isinstance(name, str) or not name:
        raise InstanceTypeDataError("DescribeInstanceTypes entry without InstanceType")
    try:
        vcpu = int(info["VCpuInfo"]["DefaultVCpus"])
        memory = int(info["MemoryInfo"]["SizeInMiB"])
        processor = info["ProcessorInfo"]
        architectures = tuple(processor["SupportedArchitectures"])
        network = info["NetworkInfo"]
    except (KeyError, TypeError, ValueError) as exc:
        raise InstanceTypeDataError(f"instance type {name}: missing or malformed field {exc}") from None
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    # Karpenter labels a GPU type only when it has one kind of GPU; capacity counts all of them.
    single = gpus[0] if len(gpus) == 1 else None
    storage = info.get("InstanceStorageInfo") or {}
    nvme = storage.get("NvmeSupport") not in (None, "unsupported")
    cards = network.get("NetworkCards") or []
    default_card = int(network.get("DefaultNetworkCardIndex") or 0)
    card = next((c for c in cards if int(c.get("NetworkCardIndex", 0)) == default_card), None)
    max_enis = int(
        (card or {}).get("MaximumNetworkInterfaces") or network.get("MaximumNetworkInterfaces") or 0
    )
    neuron_devices = (info.get("NeuronInfo") or {}).get("NeuronDevices")
    accelerator = _single_accelerator(info)
    if neuron_devices is not None:
        neurons = sum(int(d.get("Count") or 0) for d in neuron_devices)
    else:
        accelerators = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
        neurons = sum(int(a.get("Count") or 0) for a in accelerators if a.get("Manufacturer") == "AWS")
    return TypeFacts(
        name=name,
        vcpu=vcpu,
        memory_mib=memory,
        architectures=architectures,
        cpu_manufacturer=str(processor.get("Manufacturer") or ""),
        hypervisor=str(info.get("Hypervisor") or ""),
        bare_metal=bool(info.get("BareMetal")),
        current_generation=bool(info.get("CurrentGeneration")),
        windows=windows_capable(architectures, tuple(info.get("SupportedVirtualizationTypes") or ())),
        gpu_count=sum(int(g.get("Count") or 0) for g in gpus),
        gpu_manufacturer=str(single.get("Manufacturer") or "") if single else "",
        gpu_name=str(single.get("Name") or "") if single else "",
        gpu_memory_mib=int((single.get("MemoryInfo") or {}).get("SizeInMiB") or 0) if single else 0,
        local_nvme_gib=int(storage.get("TotalSizeInGB") or 0) if nvme else 0,
        network_mbps=network_mbps(network),
        max_enis=max_enis,
        ipv4_per_eni=int(network.get("Ipv4AddressesPerInterface") or 0),
        neuron_count=neurons,
        encryption_in_transit=bool(network.get("EncryptionInTransitSupported")),
        usage_classes=tuple(u for u in info.get("SupportedUsageClasses") or () if u in ("on-demand", "spot")),
        ebs_mbps=int(((info.get("EbsInfo") or {}).get("EbsOptimizedInfo") or {}).get("BaselineBandwidthInMbps") or 0),
        accelerator_name=str(accelerator.get("Name") or ""),
        accelerator_manufacturer=str(accelerator.get("Manufacturer") or ("AWS" if accelerator else "")),
        accelerator_count=int(accelerator.get("Count") or 0),
        cpu_sustained_mhz=round(float(processor.get("SustainedClockSpeedInGhz") or 0) * 1000),
        nitro_enclaves=info.get("NitroEnclavesSupport") == "supported",
        efa_max=int(((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces")) or 0),
        neuron_cores=_neuron_cores(neuron_devices),
    )


def _neuron_cores(devices: list | None) -> int:
    """NeuronCores the Neuron device plugin advertises: devices times cores per device. Like Karpenter, the
    cores per device are read from the first kind of device (EC2 lists one kind per type)."""
    if not devices:
        return 0
    first = devices[0]
    per_device = int((first.get("CoreInfo") or {}).get("Count") or 0)
    return int(first.get("Count") or 0) * per_device


def _single_accelerator(info: Mapping) -> Mapping:
    """The type's one kind of inference/training accelerator (Karpenter labels a type only when it has
    one kind), from NeuronInfo where EC2 gives it, else InferenceAcceleratorInfo; {} for none."""
    devices = (info.get("NeuronInfo") or {}).get("NeuronDevices")
    if devices is None:
        devices = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators")
    return devices[0] if devices and len(devices) == 1 else {}


def gpu_resource(facts: TypeFacts) -> str | None:
    """The extended resource name the device plugin advertises for the type's GPUs."""
    maker = facts.gpu_manufacturer.upper()
    if facts.gpu_count and maker == "NVIDIA":
        return "nvidia.com/gpu"
    if facts.gpu_count and maker == "AMD":
        return "amd.com/gpu"
    if facts.gpu_count and maker == "HABANA":
        return "habana.ai/gaudi"
    return None
