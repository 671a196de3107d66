"""Readers for single fields of a manifest; each raises FieldError naming the path, the value and what is allowed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from ..model import labels as wk
from ..model.durations import MAX_SECONDS, MAX_TEXT, MAX_WHOLE_SECONDS, DurationError, parse_nanoseconds
from ..model.quantity import QuantityError, to_int
from .errors import Collector, show

T = TypeVar("T")

NEVER = "Never"


class FieldError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def attempt(c: Collector, fn: Callable[..., T], *args: object, default: T | None = None, **kwargs: object) -> T | None:
    """Run one field reader; a FieldError is recorded in ``c`` and ``default`` returned instead."""
    try:
        return fn(*args, **kwargs)
    except FieldError as exc:
        c.fail(exc.path, exc.message)
        return default


def mapping(value: object, path: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"{show(value)} is not allowed; expected a mapping of fields")
    return value


def items(value: object, path: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(path, f"{show(value)} is not allowed; expected a list")
    return value


def string(value: object, path: str, allowed: tuple[str, ...] | None = None, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise FieldError(path, "is required" + (f"; allowed are {', '.join(allowed)}" if allowed else ""))
        return None
    if not isinstance(value, str) or (required and not value):
        raise FieldError(path, f"{show(value)} is not allowed; expected a non-empty string")
    if allowed is not None and value not in allowed:
        raise FieldError(path, f"{show(value)} is not allowed; allowed are {', '.join(allowed)}")
    return value


def integer(value: object, path: str, lo: int | None = None, hi: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        # Past 4300 digits int() itself refuses (ValueError); no field takes a number that long anyway.
        if isinstance(value, str) and len(value) <= 4300 and re.fullmatch(r"[+-]?\d+", value.strip()):
            value = int(value)
        else:
            raise FieldError(path, f"{show(value)} is not allowed; expected a whole number{_range(lo, hi)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise FieldError(path, f"{show(value)} is not allowed; expected a whole number{_range(lo, hi)}")
    return value


def _range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None:
        return f" from {lo} to {hi}"
    if lo is not None:
        return f" of at least {lo}"
    return f" of at most {hi}" if hi is not None else ""


def boolean(value: object, path: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise FieldError(path, f"{show(value)} is not allowed; expected true or false")


def string_map(value: object, path: str) -> dict[str, str]:
    """A map[string]string (tags, annotations); numbers are rejected as the API server would."""
    out: dict[str, str] = {}
    for k, v in mapping(value, path).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise FieldError(f"{path}.{k}", f"{show(v)} is not allowed; keys and values must be strings (quote them)")
        out[k] = v
    return out


def label_map(value: object, path: str) -> dict[str, str]:
    """Node labels a NodePool sets: valid syntax, and none the system owns."""
    out = string_map(value, path)
    for k, v in out.items():
        problem = wk.key_syntax_error(k) or wk.value_syntax_error(v)
        if problem:
            raise FieldError(f"{path}.{k}", f"{show(v)} is not allowed; {problem}")
        if wk.is_restricted(k):
            raise FieldError(
                f"{path}.{k}",
                f"label {show(k)} is restricted; use a well-known label or a custom label outside the "
                f"{', '.join(wk.RESTRICTED_DOMAINS)} domains",
            )
    return out


def duration(value: object, path: str, allow_never: bool = True) -> float | None:
    """Seconds from "720h", "1m0s", "90s", an int of seconds, or None for "Never" (when allowed).

    A string is read by Go's rules (``model.durations``), so what Karpenter refuses, including anything
    past its int64 of nanoseconds (about 2562047h), is refused here; a number of seconds has the same
    bound. A negative duration is refused: no field of a NodePool takes one.
    """
    if isinstance(value, bool):
        raise FieldError(path, _duration_help(value, allow_never))
    if isinstance(value, int | float):
        if not 0 <= value <= MAX_SECONDS:  # NaN fails this too
            raise FieldError(path, _duration_help(value, allow_never))
        return float(value)
    if isinstance(value, str):
        if value == NEVER and allow_never:
            return None
        try:
            ns = parse_nanoseconds(value)
        except DurationError as exc:
            raise FieldError(path, f"{exc}; {_duration_allowed(allow_never)}") from None
        if ns >= 0:
            return ns / 1e9
    raise FieldError(path, _duration_help(value, allow_never))


def _duration_help(value: object, allow_never: bool) -> str:
    return f"{show(value)} is not allowed; {_duration_allowed(allow_never)}"


def _duration_allowed(allow_never: bool) -> str:
    never = ", or Never" if allow_never else ""
    return (f"expected a duration like 30s, 1m0s or 720h (from 0 to {MAX_TEXT}), "
            f"a number of seconds up to {MAX_WHOLE_SECONDS}{never}")


def bytes_quantity(value: object, path: str) -> int:
    try:
        return to_int(value)
    except Exception as exc:  # QuantityError, and Decimal errors for absurd exponents
        msg = str(exc) if isinstance(exc, QuantityError) else f"{show(value)} is not a quantity"
        raise FieldError(path, msg) from None
