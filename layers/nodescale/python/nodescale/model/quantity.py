"""Kubernetes quantities ("500m", "1.5Gi", "2e3") as exact numbers."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


_LIMIT = Decimal(2) ** 63


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message says what was given and what is allowed."""


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity the way the API server does; ints and floats are taken as plain numbers."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity: expected a number or a string like '500m' or '4Gi'")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity: it must be finite")
        if abs(value) >= _LIMIT:
            raise QuantityError(f"{value!r} is out of range: a quantity must be below 2^63")
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity: expected a number or a string like '500m' or '4Gi'")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(
            f"{value!r} is not a quantity: expected a number with an optional suffix "
            "(m, k, M, G, T, Ki, Mi, Gi, Ti, or an exponent like 1e3)"
        )
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise QuantityError(f"{value!r} is not a quantity") from None
    if exponent:
        power = int(exponent[1:])
        if abs(power) > 30:  # far beyond any resource amount; also keeps Decimal from overflowing
            raise QuantityError(f"{value!r} is out of range: the exponent must be between -30 and 30")
        result = base * (Decimal(10) ** power)
    else:
        result = base * _SUFFIXES[suffix or ""]
    if abs(result) >= _LIMIT:
        raise QuantityError(f"{value!r} is out of range: a quantity must be below 2^63")
    return result


def to_milli(value: object) -> int:
    """CPU-style quantities in thousandths, rounded up (the API server never rounds a request down)."""
    return math.ceil(parse_quantity(value) * 1000)


def to_int(value: object) -> int:
    """Byte and count quantities as whole numbers, rounded up."""
    return math.ceil(parse_quantity(value))


def format_cpu(millis: int) -> str:
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def format_bytes(value: int) -> str:
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)
