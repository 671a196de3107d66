"""Well-known node label keys, and the deprecated aliases that mean the same thing."""

from __future__ import annotations

ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
LEGACY_PROVISIONER = "karpenter.sh/provisioner-name"
NODECLASS = "karpenter.k8s.aws/ec2nodeclass"

INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
INSTANCE_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
INSTANCE_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
INSTANCE_ENCRYPTION_IN_TRANSIT = "karpenter.k8s.aws/instance-encryption-in-transit-supported"

CAPACITY_SPOT = "spot"
CAPACITY_ON_DEMAND = "on-demand"

# The kubelet and Karpenter still honour these; a requirement on one is a requirement on its GA key.
ALIASES = {
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    LEGACY_PROVISIONER: NODEPOOL,
}

# Labels every instance type or offering defines, so a pod may constrain them even when a NodePool does not.
WELL_KNOWN = frozenset(
    {
        ARCH,
        OS,
        INSTANCE_TYPE,
        ZONE,
        REGION,
        WINDOWS_BUILD,
        CAPACITY_TYPE,
        NODEPOOL,
        HOSTNAME,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_MEMORY,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_MEMORY,
        INSTANCE_HYPERVISOR,
        INSTANCE_LOCAL_NVME,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_ENCRYPTION_IN_TRANSIT,
    }
)

# Label domains a NodePool may not set itself (Karpenter's restricted domains); the exceptions are allowed.
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")
ALLOWED_IN_RESTRICTED = frozenset(WELL_KNOWN - {HOSTNAME, NODEPOOL}) | {
    "karpenter.sh/do-not-disrupt",
}


def canonical(key: str) -> str:
    return ALIASES.get(key, key)


def is_restricted(key: str) -> bool:
    """True for label keys a user may not put in a NodePool's labels (the system owns them)."""
    if key in ALLOWED_IN_RESTRICTED or key.startswith("node-restriction.kubernetes.io/"):
        return False
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_DOMAINS)
