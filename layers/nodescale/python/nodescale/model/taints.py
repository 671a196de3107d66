"""Taints and tolerations, with the matching rules of the Kubernetes scheduler."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"


class TaintError(ValueError):
    """A taint or toleration that is not valid."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping, where: str = "taints") -> Taint:
        if not isinstance(raw, Mapping):
            raise TaintError(f"{where}: expected a mapping with key, value, effect")
        key, effect = raw.get("key"), raw.get("effect")
        if not isinstance(key, str) or not key:
            raise TaintError(f"{where}.key: a non-empty key is required")
        if effect not in EFFECTS:
            raise TaintError(f"{where}.effect: {effect!r} is not allowed; allowed are {', '.join(EFFECTS)}")
        value = raw.get("value")
        return cls(key, effect, "" if value is None else str(value))

    def to_dict(self) -> dict:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


# Every node nodescale launches registers with it; registration removes it once the node carries its
# labels, so a pod cannot land (or stay) on the node before the labels it selects on (#30.4).
UNREGISTERED_TAINT = Taint(UNREGISTERED_TAINT_KEY, "NoExecute")


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping) -> Toleration:
        return cls(
            key=raw.get("key") or "",
            operator=raw.get("operator") or "Equal",
            value="" if raw.get("value") is None else str(raw.get("value")),
            effect=raw.get("effect") or "",
        )

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


def tolerates_all(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first scheduling-relevant taint not tolerated (PreferNoSchedule never blocks), or None."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect == "PreferNoSchedule":
            continue
        if not any(t.tolerates(taint) for t in tols):
            return taint
    return None
