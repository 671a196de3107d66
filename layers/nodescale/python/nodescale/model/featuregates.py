"""Feature gates: Karpenter's names and defaults, and nodescale's own, read from one ``Name=bool,...`` string.

The string is Karpenter's ``FEATURE_GATES`` (``--feature-gates``), read as Kubernetes component-base's
``MapStringBool`` reads it: pairs split on ",", empty pairs skipped, each pair split on its first "=",
name and value trimmed, the value one of Go's ``strconv.ParseBool`` spellings; a later pair for the same
gate wins. Karpenter ignores a name it does not know; nodescale refuses it, naming the gates it knows, so a
misspelt gate is not silently off.

Karpenter's defaults (kubernetes-sigs/karpenter pkg/operator/options/options.go, ``DefaultFeatureGates``):
NodeRepair, SpotToSpotConsolidation, NodeOverlay, StaticCapacity and CapacityBuffer off, ReservedCapacity
on. ``Repack`` is nodescale's own (its repacking passes, which Karpenter has not): on by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass


class FeatureGateError(ValueError):
    """A feature-gate string nodescale cannot use; the message names the gate and what is allowed."""


@dataclass(frozen=True)
class FeatureGates:
    node_repair: bool = False
    reserved_capacity: bool = True
    spot_to_spot_consolidation: bool = False
    node_overlay: bool = False
    static_capacity: bool = False
    capacity_buffer: bool = False
    repack: bool = True  # nodescale's, not Karpenter's

    def to_string(self) -> str:
        """The gates as a ``Name=bool,...`` string that ``parse_feature_gates`` reads back."""
        return ",".join(f"{name}={str(getattr(self, attr)).lower()}" for name, attr in GATE_NAMES.items())


# Gate name (as written in the string) -> field of FeatureGates.
GATE_NAMES: dict[str, str] = {
    "NodeRepair": "node_repair",
    "ReservedCapacity": "reserved_capacity",
    "SpotToSpotConsolidation": "spot_to_spot_consolidation",
    "NodeOverlay": "node_overlay",
    "StaticCapacity": "static_capacity",
    "CapacityBuffer": "capacity_buffer",
    "Repack": "repack",
}
KARPENTER_GATES = tuple(name for name in GATE_NAMES if name != "Repack")
ALL_ON = FeatureGates(**{attr: True for attr in GATE_NAMES.values()})

# Go's strconv.ParseBool: the only spellings it accepts.
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_feature_gates(text: str, where: str = "featureGates") -> FeatureGates:
    """The gates ``text`` sets over the defaults; ``where`` (the setting's name) starts every error message."""
    changes: dict[str, bool] = {}
    for pair in text.split(","):
        if not pair:
            continue
        if "=" not in pair:
            raise FeatureGateError(f"{where}: {pair.strip()!r} is not Name=true or Name=false "
                                   f"(gates: {', '.join(GATE_NAMES)})")
        name, value = (part.strip() for part in pair.split("=", 1))
        if name not in GATE_NAMES:
            raise FeatureGateError(f"{where}: unknown feature gate {name!r}: allowed are {', '.join(GATE_NAMES)}")
        if value not in _TRUE + _FALSE:
            raise FeatureGateError(f"{where}: {name}={value!r}: allowed are true or false "
                                   "(or 1, t, T, TRUE, True, 0, f, F, FALSE, False)")
        changes[GATE_NAMES[name]] = value in _TRUE
    return dataclasses.replace(FeatureGates(), **changes)


def ignored_by_gates(gates: FeatureGates, overlays: Collection[str], buffers: Collection[str],
                     turn_on: str = "FEATURE_GATES") -> list[str]:
    """One line per kind of object nodescale leaves unread because its gate is off, as Karpenter runs no
    NodeOverlay or CapacityBuffer controller then: the gate, how many objects and which, and where to turn it
    on (``turn_on``: the setting's name). Empty when nothing is ignored."""
    lines = []
    for gate, names in (("NodeOverlay", overlays), ("CapacityBuffer", buffers)):
        if names and not getattr(gates, GATE_NAMES[gate]):
            shown = ", ".join(sorted(names)[:10]) + (", ..." if len(names) > 10 else "")
            lines.append(f"the {gate} feature gate is off: {len(names)} {gate}(s) ignored ({shown}); "
                         f"set {gate}=true in {turn_on} to apply them")
    return lines
