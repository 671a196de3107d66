"""Repacking consolidation: several nodes replaced by cheaper ones, their pods packed together.

Karpenter's consolidation replaces nodes by at most one node. After a scale-down that leaves every
node full in one resource and half-empty in the other (memory-heavy pods on general-purpose nodes, say),
no single node is worth replacing and no prefix of nodes fits one replacement, so the cluster stays
dearer than a fresh plan would be. This pass takes the nodes that waste the most money first (price
times the share of cpu and memory nobody requests), and lets the bin-packer place their pods on the
other nodes and on new nodes of any shape and number, pods mixed (the scheduler's repack): a
consolidation when it saves at least ``MIN_SAVING`` of their price, so a cluster already close to a good
packing is left alone rather than churned for cents. The new nodes may outnumber the old (smaller types
of the right shape are often cheaper than a big general-purpose node half used): what counts is the price.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..model import labels as wk
from ..model import resources as res
from ..model.currency import Money, Priced
from .decisions import UNDERUTILIZED, Action, Decision, Refusal
from .nodes import NodeView
from .replacement import Replacement, Simulation

# A repack must save this share of the removed nodes' price: what is left is not worth moving pods for.
MIN_SAVING = 0.05


def waste(node: NodeView) -> float:
    """Price per hour of the node's cpu and memory no pod requests (DaemonSets count as requesting)."""
    shares = []
    for resource in (res.CPU, res.MEMORY):
        alloc = node.allocatable.get(resource, 0)
        if alloc <= 0:
            continue
        used = sum(p.requests.get(resource, 0) for p in (*node.pods, *node.daemon_pods))
        shares.append(max(0.0, 1.0 - used / alloc))
    return node.price * sum(shares) / len(shares) if shares else 0.0


def wasteful_first(candidates: Sequence[NodeView]) -> list[NodeView]:
    """Most money wasted first; then by name, so the order is stable."""
    return sorted(candidates, key=lambda n: (-waste(n), n.name))


def evaluate_repack(nodes: Sequence[NodeView], sim: Simulation, min_saving: float = MIN_SAVING) -> Decision | Refusal:
    """Whether removing ``nodes`` and launching what the bin-packer asks for is a repacking consolidation."""
    names = [n.name for n in nodes]
    if sim.blocked:
        return Refusal(names, UNDERUTILIZED, sim.blocked)
    if sim.unschedulable:
        pod, why = sim.unschedulable[0]
        return Refusal(names, UNDERUTILIZED, f"pod {pod} would have nowhere to go: {why}")
    current = sum(n.price for n in nodes)
    price = sum(r.price for r in sim.replacements)
    if price > current * (1 - min_saving) + 1e-9:
        return Refusal(names, UNDERUTILIZED, Priced.of("repacking saves ", Money(current - price), "/h of ",
                                                       Money(current), f"/h, less than {min_saving:.0%}"))
    if _spot_to_spot(nodes, sim.replacements):
        # Spot moves to spot one node at a time, where the fifteen-cheaper-types rule is checked.
        return Refusal(names, UNDERUTILIZED, "spot would be replaced by spot in a repack of several nodes")
    if len(sim.replacements) == 1 and without_same_type(nodes, sim.replacements[0]) is None:
        return Refusal(names, UNDERUTILIZED, "the replacement would be no cheaper than a node of the same type "
                                             "being removed: removing fewer nodes does the same")
    pods = [p.key for n in nodes for p in n.pods]
    if not sim.replacements:
        detail = Priced.of(f"underutilized: the pods of the {len(nodes)} nodes fit on other nodes (saves ",
                           Money(current), "/h)")
        return Decision(names, UNDERUTILIZED, detail, Action.DELETE, saving_per_hour=current, pods=pods)
    detail = Priced.of(f"underutilized: the {len(nodes)} nodes (", Money(current), "/h) can be repacked onto the "
                       f"other nodes and {len(sim.replacements)} new node(s) (", Money(price), "/h)")
    return Decision(names, UNDERUTILIZED, detail, Action.REPLACE, saving_per_hour=current - price,
                    pods=pods, replacements=list(sim.replacements))


def without_same_type(nodes: Sequence[NodeView], new: Replacement) -> Replacement | None:
    """A multi-node replacement whose options include a type being removed keeps only the options cheaper than
    that node (Karpenter's filterOutSameInstanceType): [big, big, small] -> one small is just deleting the two
    big ones, with fewer pods moved. None when no option is left."""
    price_of: dict[str, float] = {}
    for n in nodes:
        price_of[n.instance_type] = min(n.price, price_of.get(n.instance_type, n.price))
    ceiling = min((price_of[t] for t, _, _ in new.options if t in price_of), default=None)
    if ceiling is None:
        return new
    options = [o for o in new.options if o[1] < ceiling - 1e-12]
    return dataclasses.replace(new, price=options[0][1], options=options) if options else None


def _spot_to_spot(nodes: Sequence[NodeView], new: Sequence[Replacement]) -> bool:
    return all(n.capacity_type == wk.CAPACITY_SPOT for n in nodes) and any(
        r.options and r.options[0][2] == wk.CAPACITY_SPOT for r in new
    )
