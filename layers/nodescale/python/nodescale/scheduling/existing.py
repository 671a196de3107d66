"""The cluster's nodes as the bin-packer sees them: each registered Node (Ready or not) with its pods,
then the stand-ins for capacity in flight (``inflight``). Pure: the snapshot's fields in, nodes out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model import labels as wk
from ..model import nodelabels
from ..model.instance import ManagedInstance
from ..model.node import ClusterNode
from ..model.nodepool import NodePool
from ..model.pod import Pod
from ..model.taints import UNREGISTERED_TAINT_KEY
from .inflight import in_flight_instance, startup_keys
from .plan import ExistingNode

# The annotation that marks a Node as capacity on its way (a stand-in written by hand, or by sim/).
IN_FLIGHT_ANNOTATION = "nodescale.io/in-flight"


def existing_nodes(
    nodes: Iterable[ClusterNode],
    pods_by_node: Mapping[str, Sequence[Pod]],
    nodepools: Mapping[str, NodePool],
    instances: Mapping[str, ManagedInstance],
    prices: Mapping[str, float],
    in_flight: Iterable[ExistingNode] = (),
    exclude: Iterable[str] = (),
    volume_limits: Mapping[str, Mapping[str, int]] | None = None,
) -> tuple[list[ExistingNode], dict[str, str]]:
    """Registered nodes, then ``in_flight`` stand-ins; and the nodes left out because they cannot be read
    (name -> why).

    ``instances`` maps a Node's name to the instance it is trusted for, ``prices`` an instance id to its
    price. ``exclude`` holds node names or instance ids to leave out (a node being replaced, an instance
    about to be terminated). ``volume_limits`` gives a node's CSINode counts per driver. Nodes not yet Ready are marked in flight; the taints they carry only while
    starting are dropped, since pods will not wait for them.
    """
    skip = set(exclude)
    out: list[ExistingNode] = []
    unreadable: dict[str, str] = {}
    for view in nodes:
        if view.name in skip or (view.instance_id and view.instance_id in skip):
            continue
        if view.resources.error:
            unreadable[view.name] = f"Node {view.name}: {view.resources.error}"
            continue
        node = _planned(view)
        node.pods = list(pods_by_node.get(view.name, []))
        node.pool = nodelabels.pool_key(node.labels, nodepools)
        node.volume_limits = dict((volume_limits or {}).get(view.name) or {})
        inst = instances.get(view.name)
        # A node nodescale launched that still carries karpenter.sh/unregistered is registering (Karpenter's
        # ephemeral taints on a managed node not initialized): capacity on its way, not a tainted node.
        if not view.ready or (inst is not None and _registering(node)):
            node.in_flight = True
            keys = startup_keys(nodepools.get(node.nodepool))
            node.taints = tuple(t for t in node.taints if t.key not in keys)
        if inst is not None:
            node.price = prices.get(inst.instance_id, 0.0)
            # Registered before the provisioner synced its labels: the instance says what it is (as for
            # capacity in flight), which a pool's on-demand minimum counts.
            if inst.capacity_type and wk.CAPACITY_TYPE not in node.labels:
                node.labels[wk.CAPACITY_TYPE] = inst.capacity_type
        if view.deleting:
            node.unschedulable = True
        out.append(node)
    out.extend(n for n in in_flight if (in_flight_instance(n.name) or n.name) not in skip)
    return out, unreadable


def _registering(node: ExistingNode) -> bool:
    return any(t.key == UNREGISTERED_TAINT_KEY for t in node.taints)


def _planned(view: ClusterNode) -> ExistingNode:
    """The registered Node as the bin-packer takes it, from its typed fields."""
    found = view.resources
    return ExistingNode(
        name=view.name,
        labels={str(k): str(v) for k, v in view.labels.items()},
        allocatable=dict(found.allocatable or found.capacity),
        taints=found.taints,
        capacity=dict(found.capacity or found.allocatable),
        unschedulable=view.unschedulable,
        in_flight=str(view.annotations.get(IN_FLIGHT_ANNOTATION, "")).lower() == "true",
    )
