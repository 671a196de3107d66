"""Resource lists in canonical integer units: cpu in millicores, memory and storage in bytes, the rest as counts.

A resource list is a plain ``dict[str, int]``: cheap to copy, hash-friendly as a sorted tuple, and
fast enough for the bin-packer's inner loops.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .quantity import QuantityError, format_bytes, format_cpu, to_int, to_milli

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
NEURON = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
HABANA_GAUDI = "habana.ai/gaudi"
EFA = "vpc.amazonaws.com/efa"
# Security groups for pods: branch interfaces the VPC resource controller gives a trunking-capable node.
POD_ENI = "vpc.amazonaws.com/pod-eni"
# Windows pods on EKS request one (the VPC resource controller's webhook adds it); Windows nodes advertise
# how many they hold: the primary interface's IPv4 addresses less the node's own.
PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"

Resources = dict[str, int]

# A host port a pod's container asks for, as a resource every node holds one of: two pods asking for the
# same protocol and port never share a node, as kube-scheduler's NodePorts filter keeps them apart. The host
# IP is not part of the name, so two pods bound to different single addresses are kept apart too (stricter
# than kube-scheduler, which lets them share; never looser).
HOST_PORT_PREFIX = "host port "


def host_port(protocol: str, port: int) -> str:
    return f"{HOST_PORT_PREFIX}{protocol}/{port}"


def is_host_port(name: str) -> bool:
    return name.startswith(HOST_PORT_PREFIX)


def node_holds(allocatable: Mapping[str, int], name: str) -> int:
    """How much of ``name`` a node with ``allocatable`` offers: every node has each host port once."""
    return allocatable.get(name, 1 if is_host_port(name) else 0)

_BYTE_RESOURCES = {MEMORY, EPHEMERAL_STORAGE}


def parse_resource_list(raw: Mapping[str, object] | None, where: str = "resources") -> Resources:
    """Convert a Kubernetes ResourceList; ``where`` names the field in the error message."""
    out: Resources = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = to_milli(value) if name == CPU else to_int(value)
        except QuantityError as exc:
            raise QuantityError(f"{where}.{name}: {exc}") from None
        if out[name] < 0:
            raise QuantityError(f"{where}.{name}: {value!r} is negative; a resource amount must be 0 or more")
    return out


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def merge_max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    out = dict(a)
    for k, v in b.items():
        if v > out.get(k, 0):
            out[k] = v
    return out


def total(lists: Iterable[Mapping[str, int]]) -> Resources:
    out: Resources = {}
    for item in lists:
        for k, v in item.items():
            out[k] = out.get(k, 0) + v
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested amount is available (a resource the node lacks counts as 0)."""
    return all(v <= available.get(k, 0) for k, v in requests.items() if v > 0)


def exceeded(requests: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """The resource names that do not fit, for messages a person can act on."""
    return sorted(k for k, v in requests.items() if v > 0 and v > available.get(k, 0))


def format_resources(res: Mapping[str, int]) -> dict[str, str]:
    out = {}
    for k, v in sorted(res.items()):
        if k == CPU:
            out[k] = format_cpu(v)
        elif k in _BYTE_RESOURCES:
            out[k] = format_bytes(v)
        else:
            out[k] = str(v)
    return out
