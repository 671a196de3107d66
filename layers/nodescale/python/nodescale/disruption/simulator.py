"""The consolidation simulator: what becomes of the pods of some nodes were those nodes gone.

Pure: the bin-packer (``scheduling.solve``) is run over the candidates' pods (and the pods still
pending) with every other node as existing capacity; its answer says which pods would have nowhere to
go and which new nodes they would need. The disruption use-case builds it from the world it read; the
convergence benchmark (``bench/convergence.py``) from its in-memory cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod
from ..scheduling import ExistingNode, NodeClaim, solve
from .consolidation import Replacement, Simulation, Simulator
from .nodes import NodeView


def bin_packing_simulator(
    existing: Sequence[ExistingNode],
    pools: Sequence[NodePool],
    types: Mapping[str, Sequence[InstanceType]],
    daemons: Sequence[Pod] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    pending: Sequence[Pod] = (),
    node_labels_by_pool: Mapping[str, Mapping[str, str]] | None = None,
) -> Simulator:
    """A simulator over ``existing`` (nodes being disrupted already left out)."""
    unavailable = set(unavailable)
    pending = list(pending)

    def simulate(nodes: Sequence[NodeView]) -> Simulation:
        gone = {n.name for n in nodes}
        pods = [p for n in nodes for p in n.pods]
        mine = {p.uid or p.key for p in pods}
        plan = solve(
            pods + pending, pools, types, [e for e in existing if e.name not in gone], daemons,
            unavailable, node_labels_by_pool=node_labels_by_pool,
        )
        sim = Simulation()
        sim.unschedulable = [(u.pod.key, u.reason) for u in plan.unschedulable if (u.pod.uid or u.pod.key) in mine]
        for claim in plan.node_claims:
            if not any((p.uid or p.key) in mine for p in claim.pods):
                continue  # capacity for pending pods: the provisioner's business
            sim.replacements.append(replacement_from_claim(claim, types.get(claim.nodepool, [])))
        return sim

    return simulate


def replacement_from_claim(claim: NodeClaim, types: Sequence[InstanceType]) -> Replacement:
    """The claim's options as (type, price, capacity type), cheapest first, within its zones and capacity types."""
    by_name = {t.name: t for t in types}
    options: list[tuple[str, float, str]] = []
    zones, cts = set(claim.zones), set(claim.capacity_types)
    for name in claim.instance_types:
        it = by_name.get(name)
        if it is None:
            continue
        for o in it.offerings:
            if o.available and o.zone in zones and o.capacity_type in cts:
                options.append((name, o.price, o.capacity_type))
    options.sort(key=lambda x: (x[1], x[0]))
    best: dict[tuple[str, str], tuple[str, float, str]] = {}
    for opt in options:
        best.setdefault((opt[0], opt[2]), opt)
    ordered = sorted(best.values(), key=lambda x: (x[1], x[0]))
    return Replacement(claim.nodepool, claim.price, ordered, list(claim.capacity_types), [p.key for p in claim.pods])
