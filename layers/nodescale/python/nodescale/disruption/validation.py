"""Validation: a command re-checked against the world read just before it is acted on.

After Karpenter's disruption validation: between the decision and the act the cluster moves on (a
pod lands on a candidate, a PodDisruptionBudget tightens, another invocation disrupts a node, a
launch fills a zone's capacity), so each command is checked again before anything is launched or
tainted. Its candidates must still exist and not be under way elsewhere; the guards (do-not-disrupt,
PodDisruptionBudgets) and budgets the method applied must still let them go; and the scheduling
simulation, run again, must give the same answer: no pod left without a place, the same number of
new nodes in the same NodePools, each decided node's instance types a subset of what the simulation
now offers (so the command launches nothing dearer than what is needed now); and its new nodes must fit
in their NodePools' limits beside every node that pool has, the nodes they replace included (those run
until their replacements are up). A command that fails is dropped with the reason; the next pass decides
again from the world as it is.

Pure: the use-case reads the world and builds the simulator; :class:`Validator` checks commands in the
order they are acted on, counting each valid one against the budgets the next ones see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from ..config.nodepools import V1
from ..model import resources as res
from ..model.currency import Message, Money, Priced
from ..model.instancetype import InstanceType
from ..model.nodepool import NodePool
from ..scheduling.templates import limit_vector, most_of, nodes_within, remaining_limits
from .budgets import Tally
from .decisions import Action, Decision, Reason
from .guards import node_blocks, pdb_blocks
from .nodes import NodeView
from .replacement import Replacement, Simulator


class Invalidation(StrEnum):
    """Why a command is no longer valid."""

    GONE = "candidate-gone"  # a candidate node is no longer in the cluster (or no longer this system's)
    IN_PROGRESS = "in-progress"  # a candidate is being disrupted already (another invocation took it)
    DO_NOT_DISRUPT = "do-not-disrupt"
    PDB = "pdb"
    BUDGET = "budget"
    UNSCHEDULABLE = "unschedulable"  # a pod of the candidates would now have nowhere to go
    CHANGED = "simulation-changed"  # the simulation now asks for other new nodes (or none, or some)
    LIMITS = "nodepool-limits"  # a new node would take its NodePool past its limits, the replaced nodes still running


@dataclass(frozen=True, slots=True)
class Invalid:
    kind: Invalidation
    why: Message
    nodepool: str = ""  # the NodePool whose limits a LIMITS invalidation names

    @property
    def message(self) -> Message:
        return f"command no longer valid ({self.kind}): " + self.why


@dataclass
class ActTime:
    """The world as read just before acting."""

    now: datetime
    nodepools: Mapping[str, NodePool]
    views: Sequence[NodeView]
    simulate: Simulator
    in_progress: frozenset[str] = frozenset()  # being drained or waiting for their replacement
    pdbs: Sequence[Mapping] = field(default_factory=tuple)
    # What each pool's nodes (candidates and in-flight nodes included) count against its limits
    # (``scheduling.templates.pool_usage``), and the types each pool launches, to count its new nodes.
    usage: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    types: Mapping[str, Sequence[InstanceType]] = field(default_factory=dict)


# Karpenter's guards hold these voluntary reasons; drift and pre-v1 expiry as their methods apply them.
_GUARDED = frozenset({Reason.EMPTY, Reason.UNDERUTILIZED})
_BUDGETED = frozenset({Reason.EMPTY, Reason.UNDERUTILIZED, Reason.DRIFTED})


class Validator:
    """Checks commands in acting order; a valid one takes its nodes from the budgets, as acting on it will."""

    def __init__(self, at: ActTime) -> None:
        self.at = at
        self.by_name = {v.name: v for v in at.views}
        self.budgets = Tally(at.now, at.nodepools, at.views, at.in_progress)
        # Nodes earlier valid commands remove: no destination for a later consolidation's pods (as planned).
        self.gone: list[NodeView] = []
        # Limits usage, with the new nodes of earlier valid commands added as they are accepted.
        self.usage: dict[str, dict[str, int]] = {pool: dict(used) for pool, used in at.usage.items()}

    def validate(self, cmd: Decision) -> Invalid | None:
        """None when ``cmd`` may be acted on as decided, else why not."""
        nodes: list[NodeView] = []
        for name in cmd.nodes:
            view = self.by_name.get(name)
            if view is None:
                return Invalid(Invalidation.GONE, f"node {name} is gone")
            if name in self.at.in_progress or view.disrupting:
                return Invalid(Invalidation.IN_PROGRESS, f"node {name} is being disrupted already")
            nodes.append(view)
        invalid = (self._guards(cmd, nodes) or self._budget(cmd, nodes) or self._simulation(cmd, nodes)
                   or self._limits(cmd))
        if invalid is None:
            self._accept(cmd, nodes)
        return invalid

    def _pool(self, view: NodeView) -> NodePool | None:
        return self.at.nodepools.get(view.nodepool)

    def _guarded(self, cmd: Decision, view: NodeView) -> bool:
        pool = self._pool(view)
        if cmd.reason in _GUARDED:
            return True
        if pool is None:
            return False
        if cmd.reason == Reason.DRIFTED:
            return pool.disruption.termination_grace_period_seconds is None
        return cmd.reason == Reason.EXPIRED and pool.api_version != V1

    def _guards(self, cmd: Decision, nodes: Sequence[NodeView]) -> Invalid | None:
        for view in nodes:
            if not self._guarded(cmd, view):
                continue
            pool = self._pool(view)
            hold = node_blocks(view, self.at.now, pool is not None and pool.legacy_annotations)
            if hold is not None:
                return Invalid(Invalidation.DO_NOT_DISRUPT, hold.why)
            hold = pdb_blocks(view.pods, self.at.pdbs)
            if hold is not None:
                return Invalid(Invalidation.PDB, hold.why)
        return None

    def _budgeted(self, cmd: Decision, view: NodeView) -> bool:
        pool = self._pool(view)
        return pool is not None and (cmd.reason in _BUDGETED or (cmd.reason == Reason.EXPIRED and pool.api_version != V1))

    def _budget(self, cmd: Decision, nodes: Sequence[NodeView]) -> Invalid | None:
        wanted: dict[str, int] = {}
        for view in nodes:
            if self._budgeted(cmd, view):
                wanted[view.nodepool] = wanted.get(view.nodepool, 0) + 1
        for pool, count in sorted(wanted.items()):
            allowance = self.budgets.allowance(pool, cmd.reason)
            if allowance.allowed < count:
                return Invalid(Invalidation.BUDGET, allowance.why)
        return None

    def _simulation(self, cmd: Decision, nodes: Sequence[NodeView]) -> Invalid | None:
        with_pods = [v for v in nodes if v.pods]
        if cmd.reason == Reason.EMPTY and with_pods:
            return Invalid(Invalidation.CHANGED, f"node {with_pods[0].name} is no longer empty")
        if not with_pods and not cmd.replacements:
            return None
        gone = self.gone if cmd.reason == Reason.UNDERUTILIZED else []
        sim = self.at.simulate([*gone, *nodes])
        if sim.unschedulable:
            pod, why = sim.unschedulable[0]
            return Invalid(Invalidation.UNSCHEDULABLE, f"pod {pod} would have nowhere to go: {why}")
        if cmd.reason == Reason.UNDERUTILIZED and sim.blocked:
            return Invalid(Invalidation.CHANGED, sim.blocked)
        return same_or_cheaper(cmd.replacements, sim.replacements)

    def _limits(self, cmd: Decision) -> Invalid | None:
        """Whether the new nodes fit in their pools' limits beside every node the pools have, the candidates
        included: they run until their replacements are up (Karpenter: a NodePool at its limits launches no
        replacement; before the commands carried their claims, the act's re-plan refused it the same way)."""
        usage = {pool: dict(used) for pool, used in self.usage.items()}
        return next(filter(None, (self._count(usage, r) for r in cmd.replacements)), None)

    def _count(self, usage: dict[str, dict[str, int]], r: Replacement) -> Invalid | None:
        """Count the new node in ``usage`` at worst (its largest option, as the solver reserves it), or why its
        pool's limits leave no room for it."""
        pool = self.at.nodepools.get(r.nodepool)
        if pool is None or not pool.limits:
            return None
        keys = tuple(sorted(pool.limits))
        by_name = {t.name: t for t in self.at.types.get(r.nodepool, ())}
        vectors = [limit_vector(by_name[n], keys) for n in r.instance_types if n in by_name]
        if not vectors:
            return None
        reserve, used = most_of(vectors), usage.setdefault(r.nodepool, {})
        remaining = remaining_limits(pool, used) or []
        if nodes_within(reserve, remaining) < 1:
            key, need = next((k, need) for k, need, left in zip(keys, reserve, remaining, strict=True)
                             if need and left < need)
            return Invalid(Invalidation.LIMITS, _over_limit(pool, key, used.get(key, 0), need), pool.name)
        for k, need in zip(keys, reserve, strict=True):
            used[k] = used.get(k, 0) + need
        return None

    def _accept(self, cmd: Decision, nodes: Sequence[NodeView]) -> None:
        for r in cmd.replacements:
            self._count(self.usage, r)  # its new nodes count against the limits the next commands see
        for view in nodes:
            if self._budgeted(cmd, view):
                self.budgets.take(view.nodepool, 1, moves_pods=bool(view.pods))
        if cmd.reason == Reason.UNDERUTILIZED:
            if cmd.action == Action.DELETE:
                self.gone.extend(nodes)
        else:
            self.gone.extend(v for v in nodes if not v.pods)


def _over_limit(pool: NodePool, key: str, used: int, need: int) -> str:
    def show(v: int) -> str:
        return res.format_resources({key: v})[key]

    return (f"the new node would take NodePool {pool.name} past its limits.{key} ({show(pool.limits[key])}): its "
            f"nodes, those being replaced included, count {show(used)} and the new node up to {show(need)} more")


def same_or_cheaper(decided: Sequence[Replacement], now: Sequence[Replacement]) -> Invalid | None:
    """Whether the decided new nodes are still what the simulation asks for: as many, in the same NodePools,
    each decided node's instance types among those the simulation now allows (Karpenter's subset rule: the
    simulation does no price filtering, so a decided cheaper subset stays valid; a simulation that now needs
    a dearer type does not)."""
    if len(decided) != len(now):
        if not now:
            return Invalid(Invalidation.CHANGED, "the pods now fit on other nodes: no new node is needed")
        return Invalid(Invalidation.CHANGED, f"the pods would now need {len(now)} new node(s), not {len(decided)}")

    def order(r: Replacement) -> tuple:
        return (r.nodepool, r.price, r.instance_type)

    for d, n in zip(sorted(decided, key=order), sorted(now, key=order), strict=True):
        if d.nodepool != n.nodepool or not set(d.instance_types) <= set(n.instance_types):
            return Invalid(
                Invalidation.CHANGED,
                Priced.of(f"the simulation now asks for {n.instance_type or 'no type'} in NodePool {n.nodepool} (",
                          Money(n.price), f"/h), not {d.instance_type} in NodePool {d.nodepool} (", Money(d.price),
                          "/h)"),
            )
    return None
