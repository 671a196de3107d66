"""The one internal model every Karpenter API generation is converted to."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import labels as wk
from . import resources as res
from .requirements import Requirements
from .taints import Taint


@dataclass(frozen=True, slots=True)
class Budget:
    """A disruption budget: at most ``nodes`` (a count or "N%") at once, optionally in a cron window."""

    nodes: str
    schedule: str | None = None
    duration_seconds: float | None = None
    reasons: tuple[str, ...] = ()  # empty: every reason (Empty, Drifted, Underutilized)


# Karpenter's default when a NodePool names no budget: 10% of its nodes at once.
DEFAULT_BUDGETS = (Budget(nodes="10%"),)
# Karpenter v0.2x (the v1alpha5 API) had no budgets: every node may go, so a budget never holds.
NO_BUDGETS = (Budget(nodes="100%"),)


@dataclass(frozen=True, slots=True)
class Disruption:
    consolidation_policy: str = "WhenEmptyOrUnderutilized"  # | "WhenEmpty" | "Balanced"
    consolidation_threshold: float = 2.0  # Balanced only: a move needs score >= 1 / this
    consolidate_after_seconds: float | None = 0.0  # None: "Never"
    expire_after_seconds: float | None = 720 * 3600.0  # None: "Never"
    budgets: tuple[Budget, ...] = (Budget(nodes="10%"),)
    termination_grace_period_seconds: float | None = None
    # Karpenter v0.2x (v1alpha5) ran one deprovisioning action at a time and waited for it to finish:
    # True there, so a disruption that moves pods (replacing, draining or consolidating a node with
    # pods) waits while any node of the pool is being disrupted, and a run starts at most one per
    # pool. Nodes without pods are not held: v0.2x deleted every one of them at once.
    one_at_a_time: bool = False


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: res.Resources = field(default_factory=dict)
    kube_reserved: res.Resources = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)
    cluster_dns: tuple[str, ...] = ()
    raw: dict = field(default_factory=dict)  # every field as given, for the user data


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    requirements: Requirements
    node_class: str
    weight: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: res.Resources = field(default_factory=dict)
    disruption: Disruption = field(default_factory=Disruption)
    kubelet: KubeletSettings | None = None
    api_version: str = "karpenter.sh/v1"
    source: str = ""  # where it was defined, for messages ("ssm:/nodescale/demo/nodepools/a#0")
    node_class_kind: str = "EC2NodeClass"  # "AWSNodeTemplate" for a v1alpha5 Provisioner's providerRef
    # The object's own name, when ``name`` (the key it is known by) differs: a Provisioner named like a
    # NodePool is keyed ``provisioner/<name>`` (see ``qualified``). Labels, tags and events use this one.
    object_name: str = ""
    # karpenter.sh/v1 static capacity (Karpenter v1.8+): keep this many nodes whether or not pods are
    # pending; such nodes are never consolidated and only ``limits.nodes`` applies. None: a dynamic pool.
    replicas: int | None = None
    # nodescale.io/on-demand-min-percent (a NodePool annotation): at least this share of the pool's nodes
    # are not spot (scheduling/capacity_split.py). None: no split.
    on_demand_min_percent: int | None = None

    @property
    def real_name(self) -> str:
        return self.object_name or self.name

    @property
    def static(self) -> bool:
        return self.replicas is not None

    @property
    def kind(self) -> str:
        return PROVISIONER if self.api_version == V1ALPHA5 else "NodePool"

    @property
    def legacy_annotations(self) -> bool:
        """Whether karpenter.sh/do-not-evict (pods) and do-not-consolidate (nodes) hold this pool's nodes: Karpenter
        honoured them up to v0.37 (the v1alpha5 and v1beta1 APIs) and dropped them in v1.0."""
        return self.api_version != "karpenter.sh/v1"

    @property
    def label_key(self) -> str:
        """The node label (and EC2 tag) that names the pool on its nodes, as Karpenter of its generation sets it."""
        return wk.LEGACY_PROVISIONER if self.kind == PROVISIONER else wk.NODEPOOL


PROVISIONER = "Provisioner"
# The NodePool (or Provisioner) annotation asking for a spot/on-demand split: "30" keeps at least 30% of
# the pool's nodes off spot (scheduling/capacity_split.py).
ON_DEMAND_MIN_PERCENT = "nodescale.io/on-demand-min-percent"
V1ALPHA5 = "karpenter.sh/v1alpha5"
AWS_NODE_TEMPLATE = "AWSNodeTemplate"


def qualified(kind: str, name: str) -> str:
    """The key of a v1alpha5 object whose name a newer kind's object also has: ``provisioner/default``,
    ``awsnodetemplate/default``. A slash is never in an object's name, so no key collides."""
    return f"{kind.lower()}/{name}"


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One subnet / security group / AMI selector term: tags (ANDed), or an id, name, owner or alias."""

    tags: dict[str, str] = field(default_factory=dict)
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class CapacityReservationTerm:
    """One capacityReservationSelectorTerms term: an id alone, or tags (ANDed; "*" any value) with an
    optional owner account and instanceMatchCriteria (open | targeted)."""

    id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    owner_id: str | None = None
    instance_match_criteria: str | None = None


# v1 `alias: family@version` selector terms: the family part names the AMI family.
AMI_ALIASES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
WINDOWS_FAMILIES = ("Windows2019", "Windows2022", "Windows2025")


@dataclass(frozen=True, slots=True)
class NodeClass:
    name: str
    ami_family: str | None  # AL2 | AL2023 | Bottlerocket | Windows2019 | Windows2022 | Custom
    ami_selector_terms: tuple[SelectorTerm, ...] = ()
    subnet_selector_terms: tuple[SelectorTerm, ...] = ()
    security_group_selector_terms: tuple[SelectorTerm, ...] = ()
    role: str | None = None
    instance_profile: str | None = None
    user_data: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # httpEndpoint, httpProtocolIPv6, httpPutResponseHopLimit, httpTokens; defaults of the API generation filled in.
    metadata_options: dict[str, object] = field(default_factory=dict)
    # In the EC2 launch template shape: {"DeviceName", "Ebs": {"VolumeSize" (GiB), "VolumeType", "Iops",
    # "Throughput", "Encrypted", "KmsKeyId", "DeleteOnTermination", "SnapshotId"}}; see root_volume_device.
    block_device_mappings: tuple[dict, ...] = ()
    root_volume_device: str | None = None  # the mapping marked rootVolume (v1beta1/v1), if any
    kubelet: KubeletSettings | None = None
    associate_public_ip_address: bool | None = None
    detailed_monitoring: bool = False
    api_version: str = "karpenter.k8s.aws/v1"
    source: str = ""
    kind: str = "EC2NodeClass"  # | "AWSNodeTemplate" (v1alpha1)
    instance_store_policy: str | None = None  # "RAID0": local NVMe becomes the node's ephemeral storage
    context: str | None = None  # EC2 Fleet's reserved "Context" field, passed through
    # On-demand capacity reservations its nodes may launch into (ORed terms); none: no reserved capacity.
    capacity_reservation_selector_terms: tuple[CapacityReservationTerm, ...] = ()
    object_name: str = ""  # the object's own name when ``name`` is its qualified key (see NodePool)

    @property
    def real_name(self) -> str:
        return self.object_name or self.name
