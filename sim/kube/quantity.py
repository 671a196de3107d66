"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as exact milli-units."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Any

_SUFFIXES = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


class QuantityError(ValueError):
    """A quantity string that does not parse."""


_PATTERN = re.compile(r"^([+-]?[0-9]*\.?[0-9]+|[+-]?[0-9]+\.)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][-+]?[0-9]+)?$")


@lru_cache(maxsize=4096)
def _parse(text: str) -> int:
    match = _PATTERN.match(text.strip())
    if not match:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    number, suffix = match.group(1), match.group(2) or ""
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        value = Decimal(number + suffix)
    else:
        value = Decimal(number) * _SUFFIXES[suffix]
    # Fractions of a milli-unit round up, as the API server rounds requests.
    return int((value * 1000).to_integral_value(rounding=ROUND_CEILING))


def milli(value: Any) -> int:
    """A quantity in thousandths of its unit (cpu "250m" -> 250, memory "1Ki" -> 1024000)."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return int(Decimal(str(value)) * 1000)
    if not isinstance(value, str) or not value:
        raise QuantityError(f"not a quantity: {value!r}")
    return _parse(value)


def resource_list(values: dict[str, Any] | None) -> dict[str, int]:
    """Parse a ResourceList, skipping entries that do not parse (the API would have rejected them)."""
    parsed: dict[str, int] = {}
    for name, value in (values or {}).items():
        try:
            parsed[name] = milli(value)
        except QuantityError:
            continue
    return parsed
