"""The requirements algebra: node selector requirements as sets that can be intersected and tested.

A Requirement is a set of allowed values for one label key: either a finite set (``In``), or the
complement of a finite set (``NotIn``, ``Exists``), optionally bounded by ``Gt``/``Lt`` for integer
values. Karpenter v1.x's ``Gte``/``Lte`` (bounds included) are the same bounds one step wider: over the
integers ``Gte 4`` is ``Gt 3`` and ``Lte 8`` is ``Lt 9``, so they are kept as exclusive bounds and
printed as ``Gt``/``Lt``. ``DoesNotExist`` is the empty finite set. Intersecting two requirements on the same key
narrows the set; an empty result means nothing can satisfy both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from . import labels as wk

# Kubernetes' NodeSelectorOperator (pod node affinity and node selector terms take only these).
CORE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
# Karpenter's NodePool, NodeClaim and NodeOverlay requirements also take Gte and Lte (karpenter v1.x,
# designs/gte-lte-operators.md): bounds included.
OPERATORS = (*CORE_OPERATORS, "Gte", "Lte")
# Each bound operator as the exclusive bound it stands for: (which side, how far the value moves).
_BOUNDS = {"Gt": ("greater_than", 0), "Lt": ("less_than", 0), "Gte": ("greater_than", -1), "Lte": ("less_than", 1)}


class RequirementError(ValueError):
    """A node selector requirement that is not valid; the message says which part and what is allowed."""


_INTEGER = re.compile(r"^[+-]?[0-9]+$")


def _as_int(value: str) -> int | None:
    """The value as an integer the way Kubernetes reads Gt/Lt operands (no spaces, underscores or decimals)."""
    if isinstance(value, str) and _INTEGER.match(value):
        return int(value)
    return None


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    complement: bool
    values: frozenset[str]
    greater_than: int | None = None
    less_than: int | None = None
    min_values: int | None = None
    # Whether a node without the label satisfies it (NotIn, DoesNotExist). None: derived from the
    # other fields the way the operators set it; an intersection keeps it only when both sides allow it,
    # which is what tells In [a] + NotIn [a] (impossible) from DoesNotExist (satisfied by absence).
    absent: bool | None = None

    def __post_init__(self) -> None:
        if self.absent is None:
            if self.complement:
                derived = bool(self.values) and self.greater_than is None and self.less_than is None
            else:
                derived = not self.values
            object.__setattr__(self, "absent", derived)

    @classmethod
    def create(
        cls, key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        """Build from a NodeSelectorRequirement; raises RequirementError for what the API server rejects."""
        key = wk.canonical(key)
        vals = [str(v) for v in (values or [])]
        if operator == "In":
            if not vals:
                raise RequirementError(f"{key}: operator In needs at least one value")
            req = cls(key, False, frozenset(vals))
        elif operator == "NotIn":
            if not vals:
                raise RequirementError(f"{key}: operator NotIn needs at least one value")
            req = cls(key, True, frozenset(vals))
        elif operator == "Exists":
            if vals:
                raise RequirementError(f"{key}: operator Exists takes no values, got {vals}")
            req = cls(key, True, frozenset())
        elif operator == "DoesNotExist":
            if vals:
                raise RequirementError(f"{key}: operator DoesNotExist takes no values, got {vals}")
            req = cls(key, False, frozenset())
        elif operator in _BOUNDS:
            if len(vals) != 1 or _as_int(vals[0]) is None:
                raise RequirementError(f"{key}: operator {operator} needs exactly one integer value, got {vals}")
            side, step = _BOUNDS[operator]
            req = cls(key, True, frozenset(), **{side: int(vals[0]) + step})
        else:
            raise RequirementError(f"{key}: unknown operator {operator!r}; allowed are {', '.join(OPERATORS)}")
        if min_values is not None:
            if not isinstance(min_values, int) or isinstance(min_values, bool) or not 1 <= min_values <= 50:
                raise RequirementError(f"{key}: minValues must be an integer from 1 to 50, got {min_values!r}")
            if operator == "In" and min_values > len(vals):
                raise RequirementError(
                    f"{key}: minValues {min_values} is more than the {len(vals)} values the requirement allows"
                )
            req = cls(req.key, req.complement, req.values, req.greater_than, req.less_than, min_values)
        return req

    @classmethod
    def any(cls, key: str) -> Requirement:
        return cls(key, True, frozenset())

    @classmethod
    def exactly(cls, key: str, *values: str) -> Requirement:
        return cls(key, False, frozenset(values))

    def _in_bounds(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        n = _as_int(value)
        if n is None:
            return False
        if self.greater_than is not None and n <= self.greater_than:
            return False
        return not (self.less_than is not None and n >= self.less_than)

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values and self._in_bounds(value)

    @property
    def allows_absent(self) -> bool:
        """A node that lacks the label satisfies it (NotIn, DoesNotExist)."""
        return bool(self.absent)

    def is_impossible(self) -> bool:
        """No node satisfies it: no value is allowed and neither is leaving the label off."""
        return self.is_empty() and not self.absent

    def is_empty(self) -> bool:
        """No label value satisfies it (a DoesNotExist, or an intersection that ruled out every value)."""
        if self.complement:
            lo, hi = self.greater_than, self.less_than
            if lo is None or hi is None:
                return False
            if hi - lo - 1 > len(self.values):
                return False
            # A bounded range no wider than the excluded values: check each integer in it.
            return all(str(n) in self.values for n in range(lo + 1, hi))
        return not self.values

    @property
    def operator(self) -> str:
        if self.complement:
            if self.greater_than is not None and self.less_than is None and not self.values:
                return "Gt"
            if self.less_than is not None and self.greater_than is None and not self.values:
                return "Lt"
            return "NotIn" if self.values else "Exists"
        if self.values:
            return "In"
        return "DoesNotExist" if self.absent else "In"  # an In with nothing left: impossible

    def allowed_values(self) -> frozenset[str] | None:
        """The finite set of allowed values, or None when infinitely many are allowed."""
        return None if self.complement else self.values

    def intersect(self, other: Requirement) -> Requirement:
        lo = _max_opt(self.greater_than, other.greater_than)
        hi = _min_opt(self.less_than, other.less_than)
        mv = _max_opt(self.min_values, other.min_values)
        absent = bool(self.absent and other.absent)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, lo, hi, mv, absent)
        if self.complement:
            vals = other.values - self.values
        elif other.complement:
            vals = self.values - other.values
        else:
            vals = self.values & other.values
        probe = Requirement(self.key, True, frozenset(), lo, hi)
        return Requirement(self.key, False, frozenset(v for v in vals if probe._in_bounds(v)), None, None, mv, absent)

    def intersects(self, other: Requirement) -> bool:
        """Some node satisfies both (counting a node without the label when both accept that)."""
        return not self.intersect(other).is_impossible()

    def to_node_selector_requirements(self) -> list[dict]:
        """The requirement as NodeSelectorRequirements (a bounded NotIn needs up to three of them)."""
        if not self.complement or (self.greater_than is None and self.less_than is None):
            if self.complement and self.values and not self.absent:
                return [self.to_dict(), {"key": self.key, "operator": "Exists"}]
            return [self.to_dict()]
        out: list[dict] = []
        if self.values:
            out.append({"key": self.key, "operator": "NotIn", "values": sorted(self.values)})
        if self.greater_than is not None:
            out.append({"key": self.key, "operator": "Gt", "values": [str(self.greater_than)]})
        if self.less_than is not None:
            out.append({"key": self.key, "operator": "Lt", "values": [str(self.less_than)]})
        if self.min_values is not None:
            out[0]["minValues"] = self.min_values
        return out

    def to_dict(self) -> dict:
        """The requirement as one NodeSelectorRequirement; bounds beyond the first operator are dropped."""
        op = self.operator
        if op in ("Gt", "Lt"):
            values = [str(self.greater_than if op == "Gt" else self.less_than)]
        else:
            values = sorted(self.values)
        out: dict = {"key": self.key, "operator": op}
        if op not in ("Exists", "DoesNotExist"):
            out["values"] = values
        if self.min_values is not None:
            out["minValues"] = self.min_values
        return out

    def __str__(self) -> str:
        parts = []
        for d in self.to_node_selector_requirements():
            if "values" in d:
                parts.append(f"{self.key} {d['operator']} [{', '.join(d['values'])}]")
            else:
                parts.append(f"{self.key} {d['operator']}")
        return " and ".join(parts)


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


class Requirements(Mapping[str, Requirement]):
    """Requirements on several keys, all of which must hold (a NodeSelectorTerm)."""

    __slots__ = ("_reqs",)

    def __init__(self, reqs: Iterable[Requirement] = ()) -> None:
        self._reqs: dict[str, Requirement] = {}
        for r in reqs:
            self._add(r)

    def _add(self, req: Requirement) -> None:
        existing = self._reqs.get(req.key)
        self._reqs[req.key] = req if existing is None else existing.intersect(req)

    @classmethod
    def from_node_selector_requirements(
        cls, items: Iterable[Mapping], where: str = "requirements", operators: tuple[str, ...] = OPERATORS
    ) -> Requirements:
        """Requirements from NodeSelectorRequirements; ``operators`` are the ones the source allows
        (CORE_OPERATORS for a pod's node affinity, which Kubernetes holds to its own six)."""
        reqs = []
        for i, item in enumerate(items or []):
            if not isinstance(item, Mapping):
                raise RequirementError(f"{where}[{i}]: expected a mapping with key, operator, values")
            key = item.get("key")
            if not isinstance(key, str) or not key:
                raise RequirementError(f"{where}[{i}].key: a non-empty label key is required")
            values = item.get("values") or []
            if not isinstance(values, list):
                raise RequirementError(f"{where}[{i}].values: expected a list of strings, got {values!r}")
            operator = str(item.get("operator"))
            if operator in OPERATORS and operator not in operators:
                raise RequirementError(
                    f"{where}[{i}]: operator {operator!r} is not allowed here; allowed are {', '.join(operators)}"
                )
            try:
                reqs.append(
                    Requirement.create(key, operator, values, item.get("minValues"))
                )
            except RequirementError as exc:
                raise RequirementError(f"{where}[{i}]: {exc}") from None
        return cls(reqs)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        return cls(Requirement.exactly(wk.canonical(k), str(v)) for k, v in labels.items())

    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def __repr__(self) -> str:
        return f"Requirements({', '.join(str(r) for r in self._reqs.values())})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self._reqs == other._reqs

    def __hash__(self) -> int:
        return hash(frozenset(self._reqs.items()))

    def with_requirement(self, req: Requirement) -> Requirements:
        out = Requirements()
        out._reqs = dict(self._reqs)
        out._add(req)
        return out

    def intersect(self, other: Requirements) -> Requirements:
        out = Requirements()
        out._reqs = dict(self._reqs)
        for r in other._reqs.values():
            out._add(r)
        return out

    def empty_keys(self) -> list[str]:
        """Keys whose requirement nothing can satisfy: the set as a whole is impossible."""
        return [k for k, r in self._reqs.items() if r.is_impossible()]

    def incompatibility(self, other: Requirements, allow_undefined: frozenset[str] = wk.WELL_KNOWN) -> str | None:
        """Why ``other`` (e.g. a pod's) cannot be met by these (e.g. a NodePool's), or None when it can.

        A key ``other`` requires that these leave undefined is fine only for well-known labels
        (every instance has them) or when ``other`` merely excludes values.
        """
        for key, theirs in other._reqs.items():
            mine = self._reqs.get(key)
            if mine is None:
                if key in allow_undefined or theirs.allows_absent:
                    continue  # an absent label satisfies NotIn and DoesNotExist
                return f"label {key} is not defined here, so {theirs} cannot be met"
            # A node without the label satisfies both when both accept that (NotIn, DoesNotExist).
            if not mine.intersects(theirs):
                return f"{theirs} conflicts with {mine}"
        return None

    def compatible(self, other: Requirements, allow_undefined: frozenset[str] = wk.WELL_KNOWN) -> bool:
        return self.incompatibility(other, allow_undefined) is None

    def labels(self) -> dict[str, str]:
        """The labels these requirements pin to one value (what a node made for them would carry)."""
        out = {}
        for key, r in self._reqs.items():
            if not r.complement and len(r.values) == 1:
                out[key] = next(iter(r.values))
        return out

    def to_list(self) -> list[dict]:
        return [d for r in self._reqs.values() for d in r.to_node_selector_requirements()]
