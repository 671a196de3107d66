"""A PodDisruptionBudget as the core reads it: which pods it selects and how many evictions it allows now.

Parsed once where the world is read; a malformed budget is reported by name and left out there, so the
disruption guards never dig into a raw object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .pod import LabelSelector, Pod
from .requirements import RequirementError


class PdbError(ValueError):
    """A PodDisruptionBudget that cannot be read; ``str()`` names it, the field and what is allowed."""


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    # None: the budget has no selector and protects no pod (policy/v1); an empty selector selects every pod.
    selector: LabelSelector | None
    # status.disruptionsAllowed; None while the disruption controller has not reported it yet.
    disruptions_allowed: int | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and self.selector is not None and self.selector.matches(pod.labels)

    @property
    def at_zero(self) -> bool:
        """Allows no eviction now (a budget not yet reported on is not held against anyone)."""
        return self.disruptions_allowed is not None and self.disruptions_allowed <= 0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PodDisruptionBudget:
        if not isinstance(raw, Mapping):
            raise PdbError(f"PodDisruptionBudget: expected a mapping, got {type(raw).__name__}")
        meta = _mapping(raw.get("metadata"), "?", "metadata")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise PdbError("PodDisruptionBudget: metadata.name: a non-empty name is required")
        namespace = meta.get("namespace") or "default"
        where = f"PodDisruptionBudget {namespace}/{name}"
        if not isinstance(namespace, str):
            raise PdbError(f"{where}: metadata.namespace: expected a string")
        spec = _mapping(raw.get("spec"), where, "spec")
        status = _mapping(raw.get("status"), where, "status")
        selector = spec.get("selector")
        if selector is not None:
            try:
                selector = LabelSelector.from_dict(_mapping(selector, where, "spec.selector"))
            except (RequirementError, TypeError, ValueError, AttributeError) as exc:
                raise PdbError(f"{where}: spec.selector: {exc}") from None
        allowed = status.get("disruptionsAllowed")
        if allowed is not None and (isinstance(allowed, bool) or not isinstance(allowed, int)):
            raise PdbError(f"{where}: status.disruptionsAllowed: expected an integer, got {allowed!r}")
        return cls(namespace, name, selector, allowed)


def read_pdbs(raws: Iterable[Mapping[str, Any]]) -> tuple[list[PodDisruptionBudget], list[str]]:
    """The budgets that can be read, and why each of the others cannot (one line each, naming it)."""
    out: list[PodDisruptionBudget] = []
    errors: list[str] = []
    for raw in raws:
        try:
            out.append(PodDisruptionBudget.from_dict(raw))
        except PdbError as exc:
            errors.append(str(exc))
    return out, errors


def _mapping(value: object, where: str, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PdbError(f"{where}: {path}: expected a mapping, got {type(value).__name__}")
    return value
