"""What the launch needs to know about the EKS cluster, from one DescribeCluster call."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any


class ClusterError(ValueError):
    """The cluster cannot be described, or lacks what a node needs to join it."""


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    version: str  # Kubernetes "major.minor", e.g. "1.31"
    endpoint: str
    ca_data: str  # base64 PEM bundle, as EKS returns it
    service_cidr: str | None = None
    ip_family: str = "ipv4"

    @property
    def dns_ip(self) -> str | None:
        """The cluster DNS service address: the tenth address of the service range, as on EKS."""
        return dns_ip_for(self.service_cidr)


def dns_ip_for(service_cidr: str | None) -> str | None:
    if not service_cidr:
        return None
    try:
        net = ipaddress.ip_network(service_cidr, strict=False)
    except ValueError:
        return None
    return str(net.network_address + 10)


def describe(eks: Any, name: str) -> ClusterInfo:
    try:
        raw = eks.describe_cluster(name=name)["cluster"]
    except Exception as exc:  # botocore ClientError and connection errors alike
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
        raise ClusterError(f"cannot describe EKS cluster {name!r} ({code}): check CLUSTER_NAME and the region") from exc
    net = raw.get("kubernetesNetworkConfig") or {}
    family = net.get("ipFamily") or "ipv4"
    cidr = net.get("serviceIpv6Cidr") if family == "ipv6" else net.get("serviceIpv4Cidr")
    endpoint = raw.get("endpoint") or ""
    ca = (raw.get("certificateAuthority") or {}).get("data") or ""
    version = str(raw.get("version") or "")
    if not version:
        raise ClusterError(f"EKS cluster {name!r} reports no Kubernetes version")
    return ClusterInfo(name, version, endpoint, ca, cidr or None, family)
