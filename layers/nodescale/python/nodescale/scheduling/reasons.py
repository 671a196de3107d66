"""Why pods find no place: the typed refusals the packer passes around, and their human wording.

A refusal is made of clauses, one per nodepool that could not take the pods, or of a single topology
sentence. Its text is what `Unschedulable.reason` reports; its kind and limited pools are what callers
read instead of parsing that text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .plan import UnschedulableKind
from .templates import Fit, PoolTemplate

Kind = UnschedulableKind

# For a refusal with several clauses: the first kind here present decides (the pool that came closest).
_PRECEDENCE = (Kind.LIMITS, Kind.MIN_VALUES, Kind.TOO_LARGE, Kind.NO_OFFERING, Kind.INCOMPATIBLE)


class Clause(NamedTuple):
    """Why one nodepool cannot take the pods."""

    pool: str
    kind: UnschedulableKind
    detail: str

    @property
    def text(self) -> str:
        return f"incompatible with nodepool {self.pool}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why some pods were not placed."""

    text: str
    kind: UnschedulableKind
    limited_pools: tuple[str, ...] = ()


def topology_refusal(text: str) -> Refusal:
    return Refusal(text, Kind.TOPOLOGY)


def over_limits(pool: str) -> Clause:
    return Clause(pool, Kind.LIMITS, "it would exceed the nodepool's limits")


def from_clauses(clauses: Sequence[Clause]) -> Refusal:
    kinds = {clause.kind for clause in clauses}
    kind = next((k for k in _PRECEDENCE if k in kinds), Kind.INCOMPATIBLE)
    limited = tuple(clause.pool for clause in clauses if clause.kind is Kind.LIMITS)
    return Refusal("; ".join(clause.text for clause in clauses) or "no node can take it", kind, limited)


def incompatibility(
    templates: Sequence[PoolTemplate], fits: Sequence[Fit | str], extra: Iterable[Clause] = ()
) -> Refusal:
    """Every pool's clause: first those whose requirements or taints rule them out, then ``extra``."""
    if not templates:
        return Refusal("no nodepool is defined and no existing node can take it", Kind.NO_NODEPOOL)
    clauses = [
        Clause(template.name, Kind.INCOMPATIBLE, fit)
        for template, fit in zip(templates, fits, strict=True)
        if isinstance(fit, str)
    ]
    clauses.extend(extra)
    return from_clauses(clauses)
