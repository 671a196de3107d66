"""Nodes already in the cluster, and capacity in flight, as bins the packer fills before opening claims."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..model import labels as wk
from ..model.pod import Pod
from ..model.taints import tolerates_all
from .groups import Group, Level
from .plan import ExistingNode
from .templates import fit_count, labels_satisfy
from .topology import Topology
from .volumeusage import VolumeUsage

Vector = Callable[[Mapping[str, int]], tuple[int, ...]]


class NodeBin:
    """An existing or in-flight node: what it has, what its pods use, and which groups it holds."""

    __slots__ = ("node", "alloc", "used", "counts", "pods", "zone", "capacity_type", "open", "volumes")

    def __init__(self, node: ExistingNode, alloc: tuple[int, ...], used: list[int], counts: dict[int, int]) -> None:
        self.node = node
        self.alloc = alloc
        self.used = used
        self.counts = counts  # pods per group, bound ones included
        self.pods: list[Pod] = []  # pods this solve adds
        self.zone: str | None = node.labels.get(wk.ZONE) or None
        self.capacity_type: str | None = node.labels.get(wk.CAPACITY_TYPE) or None
        self.open = not node.unschedulable
        # Only a node with known volume limits counts its pods' claims: the others take any pod (as Karpenter).
        self.volumes = VolumeUsage(node.volume_limits, (p for p in node.pods if not p.finished)) \
            if node.volume_limits else None

    def accepts(self, group: Group, level: Level) -> bool:
        """Whether the group's pods tolerate the node's taints and the level's requirements hold on it."""
        if tolerates_all(group.tolerations, self.node.taints) is not None:
            return False
        return labels_satisfy(self.node.labels, level.requirements)

    def add(self, pods: Sequence[Pod], req: Sequence[int], added: int) -> None:
        used = self.used
        for j, wanted in enumerate(req):
            used[j] += wanted * added
        self.pods.extend(pods)


def existing_bins(
    nodes: Sequence[ExistingNode], vector: Vector, group_of: Mapping[int, int], topology: Topology, room: Vector
) -> list[NodeBin]:
    """A bin per node, its running pods counted (``group_of`` maps a bound pod's id to its group id); ``room``
    gives a node's allocatable in the solve's order, ``vector`` a pod's requests."""
    bins = []
    for node in nodes:
        used = [0] * len(vector({}))
        counts: dict[int, int] = {}
        for pod in node.pods:
            if pod.finished:
                continue
            for j, wanted in enumerate(vector(pod.requests)):
                used[j] += wanted
            group_id = group_of[id(pod)]
            counts[group_id] = counts.get(group_id, 0) + 1
        node_bin = NodeBin(node, room(node.allocatable), used, counts)
        bins.append(node_bin)
        topology.record_node(counts, node_bin.zone, node_bin.capacity_type)
    return bins


class NodeRoom:
    """The nodes that accept a level's pods, and how many of its largest pod they still take per domain:
    a domain only existing nodes offer takes no more pods than that, whatever a spread's quota says."""

    __slots__ = ("nodes", "req", "_by_key")

    def __init__(self, nodes: Sequence[NodeBin], req: tuple[int, ...]) -> None:
        self.nodes = nodes
        self.req = req
        self._by_key: dict[str, dict[str, int]] = {}

    def per_domain(self, key: str) -> dict[str, int]:
        hit = self._by_key.get(key)
        if hit is None:
            hit = self._by_key[key] = {}
            for node in self.nodes:
                domain = node.zone if key == wk.ZONE else node.node.labels.get(key)
                if domain is not None:
                    hit[domain] = hit.get(domain, 0) + fit_count(node.alloc, node.used, self.req)
        return hit
