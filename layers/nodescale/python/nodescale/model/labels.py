"""Well-known node label keys, and the deprecated aliases that mean the same thing."""

from __future__ import annotations

import re

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
ZONE_ID = "topology.k8s.aws/zone-id"
# Karpenter marks its nodes registered once it has synced its labels onto them, initialized once Ready.
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
# On the Nodes (and NodeClaims) nodescale launched: deleting one goes through nodescale's termination.
TERMINATION_FINALIZER = "karpenter.sh/termination"
# A terminating node leaves the cloud load balancers' targets first (Karpenter sets it, value "karpenter").
EXCLUDE_FROM_LOAD_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"

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
INSTANCE_EBS_BANDWIDTH = "karpenter.k8s.aws/instance-ebs-bandwidth"
INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
# Karpenter v1.15's newer type labels: the sustained all-core clock (MHz, an integer for Gt/Lt), whether
# Nitro Enclaves run on it, whether it is a "-flex" family, and the tenancies it may be launched with.
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
INSTANCE_NITRO_ENCLAVES = "karpenter.k8s.aws/nitro-sandbox"
INSTANCE_CAPABILITY_FLEX = "karpenter.k8s.aws/instance-capability-flex"
INSTANCE_TENANCY = "karpenter.k8s.aws/instance-tenancy"
# Where a node of a NodeClass with a placement group was put (Karpenter v1.15).
PLACEMENT_GROUP_ID = "karpenter.k8s.aws/placement-group-id"
PLACEMENT_GROUP_PARTITION = "karpenter.k8s.aws/placement-group-partition"

CAPACITY_SPOT = "spot"
CAPACITY_ON_DEMAND = "on-demand"
# On-demand capacity reservations (Karpenter v1.3+): a node launched into one is "reserved", and names it.
CAPACITY_RESERVED = "reserved"
CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"
# Labels of the offering a node was launched into, not of its instance type.
RESERVATION_KEYS = (CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE)

EBS_CSI_ZONE = "topology.ebs.csi.aws.com/zone"

# karpenter.sh/provisioner-name is not one of them: it names a v1alpha5 Provisioner's nodes, and
# karpenter.sh/nodepool a NodePool's (Karpenter v0.32-v0.33 ran both kinds side by side, apart).
# The kubelet and Karpenter still honour these; a requirement on one is a requirement on its GA key.
ALIASES = {
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    # The EBS CSI driver's zone key, as karpenter-provider-aws adds it to Karpenter's NormalizedLabels: a
    # volume's node affinity on it is a requirement on the zone a node is launched in (#31.1).
    EBS_CSI_ZONE: ZONE,
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
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        ZONE_ID,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_NITRO_ENCLAVES,
        INSTANCE_CAPABILITY_FLEX,
        INSTANCE_TENANCY,
        PLACEMENT_GROUP_ID,
        PLACEMENT_GROUP_PARTITION,
        *RESERVATION_KEYS,
    }
)
# Where Karpenter allows only some values in a requirement (a NodePool asking for another can never launch).
KNOWN_VALUES = {
    CAPACITY_TYPE: frozenset({CAPACITY_SPOT, CAPACITY_ON_DEMAND, CAPACITY_RESERVED}),
    INSTANCE_TENANCY: frozenset({"default", "dedicated"}),
}

# Label domains a NodePool may not set itself (Karpenter's restricted domains); the exceptions are allowed.
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")
# Sub-domains of the restricted ones that the kubelet never reads, so a NodePool may set them.
DOMAIN_EXCEPTIONS = ("node.kubernetes.io", "node-restriction.kubernetes.io", "kops.k8s.io")
ALLOWED_IN_RESTRICTED = frozenset(WELL_KNOWN - {HOSTNAME, NODEPOOL}) | {
    "karpenter.sh/do-not-disrupt",
}
# A NodePool may narrow its own name in requirements (Karpenter allows it) but never label nodes with it.
_ALLOWED_IN_REQUIREMENTS = ALLOWED_IN_RESTRICTED | {NODEPOOL, LEGACY_PROVISIONER}

_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def canonical(key: str) -> str:
    return ALIASES.get(key, key)


def _domain(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _in_domain(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


def _restricted_domain(key: str) -> bool:
    domain = _domain(key)
    if any(_in_domain(domain, d) for d in DOMAIN_EXCEPTIONS):
        return False
    return any(_in_domain(domain, d) for d in RESTRICTED_DOMAINS)


def is_restricted(key: str) -> bool:
    """True for label keys a user may not put in a NodePool's labels (the system owns them)."""
    key = canonical(key)
    if key in ALLOWED_IN_RESTRICTED:
        return False
    return key in (HOSTNAME, NODEPOOL, LEGACY_PROVISIONER) or _restricted_domain(key)


def is_restricted_requirement(key: str) -> bool:
    """True for label keys a NodePool may not constrain in its requirements."""
    key = canonical(key)
    if key in _ALLOWED_IN_REQUIREMENTS:
        return False
    return key == HOSTNAME or _restricted_domain(key)


def key_syntax_error(key: object) -> str | None:
    """Why ``key`` is not a valid label key (an optional DNS prefix, a slash, a name of at most 63), or None."""
    if not isinstance(key, str) or not key:
        return "a label key must be a non-empty string"
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} must be a lower-case DNS subdomain of at most 253 characters"
    if not name or len(name) > 63 or not _NAME.match(name):
        return (
            f"name {name!r} must be 1-63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def value_syntax_error(value: object) -> str | None:
    """Why ``value`` is not a valid label value (empty, or at most 63 name characters), or None."""
    if not isinstance(value, str):
        return "a label value must be a string"
    if value and (len(value) > 63 or not _NAME.match(value)):
        return (
            "a label value must be at most 63 characters of letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None
