"""One disruption plan's data: what it is given (``Inputs``), what it returns (``Outcome``), and the
state its methods share while it runs (``Context``: the candidates, the budgets taken, the nodes
already decided, and the guards every voluntary method applies the same way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..model.currency import Message
from ..model.featuregates import FeatureGates
from ..model.nodepool import NodePool
from ..model.pdb import PodDisruptionBudget
from . import zonalshift
from .budgets import Tally
from .consolidation import SearchResult
from .decisions import Blocked, Blocker, Decision, Hold, Reason
from .drift import Drifted
from .guards import node_blocks, pdb_blocks
from .nodes import NodeView


@dataclass
class Inputs:
    now: datetime
    nodepools: Mapping[str, NodePool]
    views: Sequence[NodeView]  # this system's nodes (in a known NodePool), in-progress ones included
    in_progress: frozenset[str] = frozenset()  # being drained or waiting for their replacement
    protected: frozenset[str] = frozenset()  # replacements still coming up: never candidates
    cloud_drift: Mapping[str, Drifted] = field(default_factory=dict)  # node -> why (Launcher.drift)
    impaired_since: Mapping[str, datetime] = field(default_factory=dict)  # node -> failing status checks since
    pdbs: Sequence[PodDisruptionBudget] = ()
    repair_threshold_seconds: float = 600.0  # EC2 status checks failing this long (node conditions: REPAIR_POLICIES)
    consolidation_seconds: float = 30.0
    shifted_zones: frozenset[str] = frozenset()  # zone names under an ARC zonal shift (disruption/zonalshift.py)
    # Capacity blocks within 40 minutes of their end (CapacityReservation.expiring): their nodes are drained.
    expiring_reservations: Mapping[str, datetime] = field(default_factory=dict)  # reservation id -> end
    # A sliced pass (usecases/disrupt_slices): only these pools' nodes are candidates; every node stays a
    # destination for the candidates' pods. None: every pool.
    candidate_pools: frozenset[str] | None = None
    gates: FeatureGates = field(default_factory=FeatureGates)  # the deployment's FEATURE_GATES
    # Pools an earlier pass's single-node consolidation ran out of time before reaching: dealt out first.
    unseen_pools: tuple[str, ...] = ()


@dataclass
class Outcome:
    decisions: list[Decision] = field(default_factory=list)
    refusals: list[Blocked] = field(default_factory=list)
    mark_empty: list[str] = field(default_factory=list)  # first seen empty now: record empty-since
    clear_empty: list[str] = field(default_factory=list)  # no longer empty: drop empty-since
    mark_pods: dict[str, str] = field(default_factory=dict)  # node -> new PODS_CHANGED annotation value
    consolidation: SearchResult | None = None
    notes: list[str] = field(default_factory=list)  # pool-level reasons (e.g. budget holding consolidation)


class Context:
    """The state the methods of one plan share; a node decided (or refused) by one is not offered to the next."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.now = inputs.now
        self.out = Outcome()
        self.budgets = Tally(inputs.now, inputs.nodepools, inputs.views, inputs.in_progress)
        self.decided: set[str] = set()
        # Nodes being disrupted, and the replacements their pods go to, are never candidates.
        self.candidates = [
            v for v in inputs.views
            if v.name not in inputs.in_progress and v.name not in inputs.protected and v.nodepool in inputs.nodepools
            and (inputs.candidate_pools is None or v.nodepool in inputs.candidate_pools)
        ]
        self.by_pool: dict[str, list[NodeView]] = {}
        for v in inputs.views:
            self.by_pool.setdefault(v.nodepool, []).append(v)

    def pool(self, view: NodeView) -> NodePool:
        return self.inputs.nodepools[view.nodepool]

    def undecided(self) -> list[NodeView]:
        return [v for v in self.candidates if v.name not in self.decided]

    def refuse(self, nodes: list[str], reason: Reason, why: Message, kind: Blocker) -> None:
        self.out.refusals.append(Blocked(nodes, reason, why, kind))

    def hold(self, nodes: list[str], reason: Reason, hold: Hold) -> None:
        """Refuses ``nodes`` for what a guard answered."""
        self.refuse(nodes, reason, hold.why, hold.kind)

    def take(self, decision: Decision, pool: str) -> None:
        self.out.decisions.append(decision)
        self.decided.update(decision.nodes)
        self.budgets.take(pool, len(decision.nodes), moves_pods=bool(decision.pods))

    def guarded(self, v: NodeView, reason: Reason) -> bool:
        """Refuses (and says so) a node that do-not-disrupt or a PodDisruptionBudget at zero holds."""
        hold = node_blocks(v, self.now, self.pool(v).legacy_annotations) or pdb_blocks(v.pods, self.inputs.pdbs)
        if hold:
            self.hold([v.name], reason, hold)
        return hold is not None

    def zone_held(self, v: NodeView, reason: Reason) -> bool:
        """Refuses (and says so) a node in a zone under an ARC zonal shift, unless its pool opted in to replacing."""
        hold = zonalshift.held(v, self.pool(v), self.inputs.shifted_zones)
        if hold:
            self.hold([v.name], reason, hold)
        return hold is not None

    def voluntary_ok(self, v: NodeView, reason: Reason, guards: bool = True) -> bool:
        """Whether a voluntary disruption of ``v`` may go ahead: its zone not under a zonal shift, the guards
        (unless ``guards`` is False), then the pool's budget for ``reason``."""
        if self.zone_held(v, reason) or (guards and self.guarded(v, reason)):
            return False
        allowance = self.budgets.allowance(v.nodepool, reason)
        if allowance.allowed < 1:
            self.refuse([v.name], reason, allowance.why, Blocker.BUDGET)
            return False
        return not (v.pods and self.wait_turn(v, reason))

    def wait_turn(self, v: NodeView, reason: Reason) -> bool:
        """Refuses (and says so) a node whose one-at-a-time pool (v1alpha5) has a disruption under way."""
        hold = self.budgets.wait_turn(v.nodepool)
        if hold:
            self.hold([v.name], reason, hold)
        return hold is not None
