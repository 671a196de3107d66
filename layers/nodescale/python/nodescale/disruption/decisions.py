"""What a disruption plan says: the reasons, actions and guards as enums, and the decisions and refusals.

The enums are ``StrEnum``s whose values are the strings logs, events, metrics and JSON summaries have
always carried, so they read the same; code compares members, never message wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from ..model.currency import Message
from .replacement import Replacement

if TYPE_CHECKING:
    from .drift import DriftKind


class Reason(StrEnum):
    """Why a node is disrupted, as Karpenter names it (budgets refer to the first three)."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"
    EXPIRED = "Expired"
    UNHEALTHY = "Unhealthy"
    INTERRUPTED = "Interrupted"
    ORPHANED = "Orphaned"  # an instance with no node, or a node with no instance
    SCALED_DOWN = "ScaledDown"  # nodescale's name: a static pool above its spec.replicas (methods/static.py)
    # Its capacity block ends within 40 minutes (Karpenter's capacityreservation expiration controller).
    CAPACITY_BLOCK_EXPIRING = "CapacityBlockExpiring"


class Action(StrEnum):
    DELETE = "delete"  # the pods fit elsewhere (or there are none)
    REPLACE = "replace"  # launch first, then drain
    NONE = "none"  # decided, but the replacement could not be launched


class Blocker(StrEnum):
    """The kind of guard behind a refusal, for the metrics (BudgetBlocked / DoNotDisruptBlocked) and summary."""

    BUDGET = "budget"
    DO_NOT_DISRUPT = "do-not-disrupt"
    PDB = "pdb"
    HEALTH = "unhealthy-share"
    NOT_CONSOLIDATABLE = "not-consolidatable"
    ONE_AT_A_TIME = "one-at-a-time"  # a v1alpha5 pool's disruption under way (Karpenter v0.2x's pace)
    ZONAL_SHIFT = "zonal-shift"  # the node's zone is under an ARC zonal shift (disruption/zonalshift.py)
    CAPACITY_SPLIT = "capacity-split"  # the pool's nodescale.io/on-demand-min-percent would be broken


# The names the rest of the code has long used for the reasons.
EMPTY = Reason.EMPTY
DRIFTED = Reason.DRIFTED
UNDERUTILIZED = Reason.UNDERUTILIZED
EXPIRED = Reason.EXPIRED
UNHEALTHY = Reason.UNHEALTHY
INTERRUPTED = Reason.INTERRUPTED
ORPHANED = Reason.ORPHANED

_VERB = {
    Reason.EMPTY: "not removed (empty)",
    Reason.DRIFTED: "not replaced (drifted)",
    Reason.EXPIRED: "not replaced (expired)",
    Reason.UNDERUTILIZED: "not consolidated",
    Reason.UNHEALTHY: "not repaired",
    Reason.SCALED_DOWN: "not removed (static pool above spec.replicas)",
}


@dataclass(slots=True)
class Decision:
    nodes: list[str]
    reason: Reason
    detail: Message  # Priced when it names a price: rendered in the region's currency where it is shown
    action: Action = Action.DELETE
    saving_per_hour: float = 0.0
    pods: list[str] = field(default_factory=list)
    score: float | None = None  # the Balanced consolidation score, when a Balanced pool's nodes are taken
    drift: DriftKind | None = None  # for Drifted: the field that drifted
    # What REPLACE launches, exactly: the claims the simulation produced (none: the pods fit on other nodes).
    replacements: list[Replacement] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Hold:
    """A guard's answer when it holds a voluntary disruption: which kind of guard, and why (the message)."""

    kind: Blocker
    why: str

    def __str__(self) -> str:
        return self.why


@dataclass(slots=True)
class Refusal:
    nodes: list[str]
    reason: Reason
    why: Message


@dataclass(slots=True)
class Blocked(Refusal):
    """A refusal with the kind of guard that made it."""

    kind: Blocker

    @property
    def message(self) -> Message:
        return f"{_VERB.get(self.reason, 'not disrupted')}: " + self.why
