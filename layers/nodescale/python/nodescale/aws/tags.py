"""The tags that mark what nodescale created in EC2, and the filters that find it again.

Ownership is decided by ``nodescale.io/cluster`` alone: nothing without it is ever changed. It is
deliberately not Karpenter's own ``karpenter.sh/managed-by``/``kubernetes.io/cluster`` pair, so that
both can run side by side during a migration without adopting each other's instances.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

CLUSTER = "nodescale.io/cluster"
NODEPOOL = "karpenter.sh/nodepool"
# What Karpenter v0.32 tags a v1alpha5 Provisioner's instances with instead (nodelabels.pool_key reads both).
PROVISIONER = "karpenter.sh/provisioner-name"
NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
# Tags Karpenter also writes for AWS's own tools and cost reports: they never decide ownership here.
NODECLAIM = "karpenter.sh/nodeclaim"
EKS_CLUSTER = "eks:eks-cluster-name"
# The launch (fleet client token) an instance came from: ties an instance to its planned node.
LAUNCH = "nodescale.io/launch"
# The launch template configuration an instance was made with (see launchtemplates): drift detection.
CONFIG_HASH = "nodescale.io/config-hash"
NAME = "Name"

# Keys a node class may not set: they decide ownership, and a user value would hand instances to
# another cluster or pool.
RESERVED = frozenset({CLUSTER, NODEPOOL, PROVISIONER, NODECLASS, NODECLAIM, EKS_CLUSTER, LAUNCH, CONFIG_HASH})

TagList = list[dict[str, str]]


def ownership(
    cluster: str, nodepool: str | None = None, nodeclass: str | None = None, pool_tag: str = NODEPOOL
) -> dict[str, str]:
    """``pool_tag`` is the pool's own label key (``NodePool.label_key``): PROVISIONER for a Provisioner."""
    tags = {CLUSTER: cluster}
    if nodepool:
        tags[pool_tag] = nodepool
    if nodeclass:
        tags[NODECLASS] = nodeclass
    return tags


def resource_tags(
    cluster: str,
    nodepool: str | None = None,
    nodeclass: str | None = None,
    extra: Mapping[str, str] | None = None,
    pool_tag: str = NODEPOOL,
) -> dict[str, str]:
    """The node class's own tags plus ours; ours win on the reserved keys, a user ``Name`` is kept.
    ``eks:eks-cluster-name`` is written as Karpenter does (``cluster`` is the EKS cluster's name)."""
    tags = {k: str(v) for k, v in (extra or {}).items() if k not in RESERVED}
    tags.setdefault(NAME, f"nodescale/{cluster}/{nodepool}" if nodepool else f"nodescale/{cluster}")
    tags.update(ownership(cluster, nodepool, nodeclass, pool_tag))
    tags[EKS_CLUSTER] = cluster
    return tags


def to_list(tags: Mapping[str, str]) -> TagList:
    return [{"Key": k, "Value": str(v)} for k, v in sorted(tags.items())]


def to_dict(tags: Iterable[Mapping[str, str]] | Mapping[str, str] | None) -> dict[str, str]:
    """EC2's ``[{"Key":..., "Value":...}]`` (or an already-flat mapping) as a dict."""
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    return {t["Key"]: t.get("Value", "") for t in tags}


def specifications(resource_types: Iterable[str], tags: Mapping[str, str]) -> list[dict]:
    listed = to_list(tags)
    return [{"ResourceType": rt, "Tags": list(listed)} for rt in resource_types]


def cluster_filters(cluster: str, nodepool: str | None = None) -> list[dict]:
    """EC2 ``Filters`` that select only this cluster's resources (and one pool's, when given)."""
    filters = [{"Name": f"tag:{CLUSTER}", "Values": [cluster]}]
    if nodepool:
        filters.append({"Name": f"tag:{NODEPOOL}", "Values": [nodepool]})
    return filters


def is_managed(tags: Iterable[Mapping[str, str]] | Mapping[str, str] | None, cluster: str) -> bool:
    """True only when the resource carries this cluster's ownership tag with exactly this value."""
    return bool(cluster) and to_dict(tags).get(CLUSTER) == cluster
