"""The consolidation simulator: what becomes of the pods of some nodes were those nodes gone.

Pure: the bin-packer (``scheduling.solve``) is run over the pods still pending, then the candidates' pods,
with every other node as existing capacity; its answer says which pods would have nowhere to
go and which new nodes they would need. The disruption use-case builds it from the world it read; the
convergence benchmark (``bench/convergence.py``) from its in-memory cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..model import labels as wk
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..model.pod import Pod
from ..scheduling.capacity_split import split_refusal
from ..scheduling.plan import ExistingNode
from ..scheduling.scheduler import solve
from .nodes import NodeView
from .replacement import Simulation, Simulator, replacement_from_claim


def bin_packing_simulator(
    existing: Sequence[ExistingNode],
    pools: Sequence[NodePool],
    types: Mapping[str, Sequence[InstanceType]],
    daemons: Sequence[Pod] = (),
    unavailable: Iterable[tuple[str, str, str]] = (),
    pending: Sequence[Pod] = (),
    node_labels_by_pool: Mapping[str, Mapping[str, str]] | None = None,
    held: Sequence[Pod] = (),
    repack: bool = True,
) -> Simulator:
    """A simulator over ``existing`` (nodes being disrupted already left out).

    The CapacityBuffer pods that have room now (``held``) must keep it: they are planned with the
    candidates' pods (after them, at the lowest priority), so a consolidation that leaves them nowhere
    to go, or needs a new node for them, is judged as it would be for real pods."""
    unavailable = set(unavailable)
    pending, buffered = list(pending), list(held)
    by_name = {p.name: p for p in pools}

    def simulate(nodes: Sequence[NodeView]) -> Simulation:
        gone = {n.name for n in nodes}
        pods = [p for n in nodes for p in n.pods]
        mine = {p.uid or p.key for p in pods + buffered}
        # The pending pods first (Karpenter's SimulateScheduling): the room launched for them is theirs, and a
        # candidate's pod that takes it would push them onto a new node the move does not count.
        plan = solve(
            pending + pods + buffered, pools, types, [e for e in existing if e.name not in gone], daemons,
            unavailable, node_labels_by_pool=node_labels_by_pool, repack=repack,
        )
        sim = Simulation()
        sim.unschedulable = [(u.pod.key, u.reason) for u in plan.unschedulable if (u.pod.uid or u.pod.key) in mine]
        for claim in plan.node_claims:
            if not any((p.uid or p.key) in mine for p in claim.pods):
                continue  # capacity for pending pods: the provisioner's business
            sim.replacements.append(replacement_from_claim(claim, types.get(claim.nodepool, [])))
        sim.blocked = split_blocked(nodes, sim)
        return sim

    def split_blocked(nodes: Sequence[NodeView], sim: Simulation) -> str:
        """Why the move would take a pool under its on-demand minimum (a replacement allowing spot counts as spot)."""
        gone = {n.name for n in nodes}
        for name in sorted({n.nodepool for n in nodes}):
            pool = by_name.get(name)
            if pool is None or not pool.on_demand_min_percent:
                continue
            before = [e.labels.get(wk.CAPACITY_TYPE, "") for e in existing if e.nodepool == name and not e.unschedulable]
            after = [e.labels.get(wk.CAPACITY_TYPE, "") for e in existing
                     if e.nodepool == name and not e.unschedulable and e.name not in gone]
            after += [wk.CAPACITY_SPOT if wk.CAPACITY_SPOT in r.capacity_types else wk.CAPACITY_ON_DEMAND
                      for r in sim.replacements if r.nodepool == name]
            refusal = split_refusal(pool, before, after)
            if refusal is not None:
                return refusal.why
        return ""

    return simulate
