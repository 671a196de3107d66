"""Node capacity and the kubelet's reservations, computed the way Karpenter and the EKS AMIs do.

Figures and where they come from:
- Memory capacity: EC2's MiB minus 64 MiB on Graviton (reserved for the kernel's CMA), minus a
  7.5 % VM overhead (Karpenter's default ``VM_MEMORY_OVERHEAD_PERCENT``: the hypervisor and kernel keep
  that much, so a node reports less than the instance type's nominal memory).
- Max pods: the VPC CNI's ENI limit ``enis * (ipv4PerEni - 1) + 2`` (the EKS AMI's eni-max-pods table),
  not capped: Karpenter writes this number into the kubelet's configuration itself, so the AMI's own
  110/250 cap (which the EKS max-pods calculator applies only with prefix delegation) never applies.
  ``maxPods`` in the kubelet settings replaces it; ``podsPerCore`` lowers it to podsPerCore x vCPUs.
  Windows nodes take pod addresses from the primary interface only (the VPC resource controller hands
  them out as ``vpc.amazonaws.com/PrivateIPv4Address``): IPv4 addresses per interface less one, which is
  both their max pods and their count of that resource.
- kube-reserved: memory 11 MiB per pod + 255 MiB, cpu 6 % of the first core, 1 % of the second, 0.5 % of
  cores 3-4 and 0.25 % of the rest, ephemeral-storage 1 Gi. On AL2/AL2023 the memory term uses the
  ENI-limited pod count even when maxPods is set (what their bootstrap does); Bottlerocket and Windows
  use the node's max pods.
- Eviction threshold: memory.available 100 Mi and nodefs.available 10 %, unless evictionHard /
  evictionSoft say otherwise (the larger of the two wins; Bottlerocket ignores evictionSoft).
- Ephemeral storage: the root volume, 20 Gi by default (50 Gi for Windows), or the node class's size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..model import resources as res
from ..model.nodepool import KubeletSettings
from ..model.quantity import QuantityError, parse_quantity

MIB = 2**20
GIB = 2**30
VM_MEMORY_OVERHEAD_PERCENT = 0.075
GRAVITON_CMA_MIB = 64
DEFAULT_EPHEMERAL_STORAGE = 20 * GIB
WINDOWS_EPHEMERAL_STORAGE = 50 * GIB
DEFAULT_MAX_PODS = 110
KUBE_RESERVED_EPHEMERAL_STORAGE = GIB
EVICTION_MEMORY_AVAILABLE = 100 * MIB
EVICTION_NODEFS_PERCENT = 10.0
MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"

# (start millicores, end millicores, fraction reserved) of the EKS AMIs' kube-reserved CPU formula.
_CPU_RESERVED_STEPS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 40, 0.0025))


@dataclass(frozen=True, slots=True)
class AmiBehaviour:
    """How an AMI family's bootstrap turns kubelet settings into reservations."""

    eni_limited_memory_overhead: bool = True
    pods_per_core: bool = True
    eviction_soft: bool = True
    eni_limited_density: bool = True
    primary_interface_density: bool = False  # Windows: pods get the primary interface's addresses only
    default_ephemeral_storage: int = DEFAULT_EPHEMERAL_STORAGE
    # Security groups for pods (vpc.amazonaws.com/pod-eni): EKS gives Windows nodes no branch interfaces.
    branch_interfaces: bool = True


_BOTTLEROCKET = AmiBehaviour(eni_limited_memory_overhead=False, pods_per_core=False, eviction_soft=False)
_WINDOWS = AmiBehaviour(
    eni_limited_memory_overhead=False,
    eni_limited_density=False,
    primary_interface_density=True,
    default_ephemeral_storage=WINDOWS_EPHEMERAL_STORAGE,
    branch_interfaces=False,
)
_DEFAULT = AmiBehaviour()


def ami_behaviour(ami_family: str | None) -> AmiBehaviour:
    """AL2, AL2023, Custom and unknown families behave like AL2; Bottlerocket and Windows differ."""
    family = (ami_family or "").lower()
    if family.startswith("bottlerocket"):
        return _BOTTLEROCKET
    if family.startswith("windows"):
        return _WINDOWS
    return _DEFAULT


def memory_capacity(memory_mib: int, kube_arch: str | None) -> int:
    """Bytes of memory a node of this size reports, after the Graviton CMA and the VM overhead."""
    mib = memory_mib - (GRAVITON_CMA_MIB if kube_arch == "arm64" else 0)
    return (mib - math.ceil(mib * VM_MEMORY_OVERHEAD_PERCENT)) * MIB


def eni_limited_pods(max_enis: int, ipv4_per_eni: int) -> int:
    if max_enis <= 0:
        return 0
    return max_enis * (ipv4_per_eni - 1) + 2


def primary_interface_addresses(ipv4_per_eni: int) -> int:
    """Pod addresses a Windows node has: its primary interface's IPv4 addresses less its own."""
    return max(ipv4_per_eni - 1, 0)


def max_pods(
    vcpu: int, eni_pods: int, kubelet: KubeletSettings | None, ami: AmiBehaviour, ipv4_per_eni: int = 0
) -> int:
    if kubelet is not None and kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif ami.primary_interface_density:
        count = primary_interface_addresses(ipv4_per_eni)
    elif ami.eni_limited_density:
        count = eni_pods
    else:
        count = DEFAULT_MAX_PODS
    if kubelet is not None and kubelet.pods_per_core and ami.pods_per_core:
        count = min(count, kubelet.pods_per_core * vcpu)
    return count


def kube_reserved_cpu(cpu_millis: int) -> int:
    total = 0
    for start, end, fraction in _CPU_RESERVED_STEPS:
        if cpu_millis > start:
            total += int((min(cpu_millis, end) - start) * fraction)
    return total


def kube_reserved(
    cpu_millis: int, pods: int, eni_pods: int, kubelet: KubeletSettings | None, ami: AmiBehaviour
) -> res.Resources:
    pods_for_memory = eni_pods if ami.eni_limited_memory_overhead else pods
    out: res.Resources = {
        res.CPU: kube_reserved_cpu(cpu_millis),
        res.MEMORY: (11 * pods_for_memory + 255) * MIB,
        res.EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_STORAGE,
    }
    if kubelet is not None:
        out.update(kubelet.kube_reserved)
    return out


def eviction_signal(capacity: int, value: str, where: str) -> int:
    """An eviction threshold in bytes: a quantity, or a percentage of the capacity (100 % disables it)."""
    text = str(value).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not 0 <= percent <= 100:
                raise ValueError
            return 0 if percent == 100 else math.ceil(capacity / 100 * percent)
        return math.ceil(parse_quantity(text))
    except (ValueError, QuantityError):
        raise QuantityError(
            f"{where}: {value!r} is not an eviction threshold; use a quantity like '100Mi' or a percentage like '10%'"
        ) from None


def eviction_threshold(
    memory: int, storage: int, kubelet: KubeletSettings | None, ami: AmiBehaviour
) -> res.Resources:
    out: res.Resources = {
        res.MEMORY: EVICTION_MEMORY_AVAILABLE,
        res.EPHEMERAL_STORAGE: math.ceil(storage / 100 * EVICTION_NODEFS_PERCENT),
    }
    if kubelet is None:
        return out
    signals: list[tuple[str, Mapping[str, str]]] = []
    if kubelet.eviction_hard:
        signals.append(("evictionHard", kubelet.eviction_hard))
    if kubelet.eviction_soft and ami.eviction_soft:
        signals.append(("evictionSoft", kubelet.eviction_soft))
    override: res.Resources = {}
    for where, signal in signals:
        found: res.Resources = {}
        if MEMORY_AVAILABLE in signal:
            found[res.MEMORY] = eviction_signal(
                memory, signal[MEMORY_AVAILABLE], f"kubelet.{where}.{MEMORY_AVAILABLE}"
            )
        if NODEFS_AVAILABLE in signal:
            found[res.EPHEMERAL_STORAGE] = eviction_signal(
                storage, signal[NODEFS_AVAILABLE], f"kubelet.{where}.{NODEFS_AVAILABLE}"
            )
        override = res.merge_max(override, found)
    out.update(override)
    return out


def node_overhead(
    cpu_millis: int,
    memory: int,
    storage: int,
    pods: int,
    eni_pods: int,
    kubelet: KubeletSettings | None,
    ami: AmiBehaviour,
) -> res.Resources:
    """kube-reserved + system-reserved + eviction threshold: capacity minus this is allocatable."""
    system = dict(kubelet.system_reserved) if kubelet is not None else {}
    return res.total(
        (
            kube_reserved(cpu_millis, pods, eni_pods, kubelet, ami),
            system,
            eviction_threshold(memory, storage, kubelet, ami),
        )
    )
