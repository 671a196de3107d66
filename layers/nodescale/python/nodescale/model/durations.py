"""Go durations ("30s", "1m0s", "720h", "1h30m", "-1.5h"), read as Karpenter reads them: Go's ``time.ParseDuration``.

The grammar: an optional sign, then "0" alone or one or more parts, each a decimal number (digits, a
fraction, or both) and a unit (ns, us, µs, μs, ms, s, m, h). The range: the total is an int64 of
nanoseconds, so at most 2562047h47m16.854775807s either way; past that Go refuses the duration, and so
do we (a tenant's "99999999999999999h" must not reach date arithmetic). Parsing is integer nanoseconds
throughout, as Go's is: a number too long for the range is refused on its twentieth digit, never
converted, so a 401-digit duration costs no more than a short one.
"""

from __future__ import annotations

import re

MAX_NANOSECONDS = (1 << 63) - 1
MIN_NANOSECONDS = -(1 << 63)
MAX_SECONDS = MAX_NANOSECONDS / 1e9
MAX_WHOLE_SECONDS = MAX_NANOSECONDS // 1_000_000_000
MAX_TEXT = "2562047h47m16.854775807s"

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_LIMIT = 1 << 63  # the magnitude a sum may reach before the sign is applied
# One part: digits, an optional fraction, and the unit (whatever runs up to the next digit or dot).
_PART = re.compile(r"([0-9]*)(?:(\.)([0-9]*))?([^0-9.]*)")
_MAX_DIGITS = len(str(_LIMIT))


class DurationError(ValueError):
    """Why a text is not a duration Go would accept."""


def parse_nanoseconds(text: str) -> int:
    """The duration in nanoseconds; DurationError (saying what is wrong) when Go's ParseDuration refuses it."""
    s = text
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"{_show(text)} is not a duration")
    total = 0
    pos = 0
    while pos < len(s):
        match = _PART.match(s, pos)
        assert match is not None  # every group may be empty, so the pattern always matches
        whole, dot, fraction, unit = match.groups()
        pos = match.end()
        if not whole and not fraction:
            raise DurationError(f"{_show(text)} is not a duration")
        if not unit:
            raise DurationError(f"{_show(text)} is not a duration: a number has no unit (ns, us, ms, s, m or h)")
        scale = _UNIT_NS.get(unit)
        if scale is None:
            raise DurationError(f"{_show(text)} is not a duration: unknown unit {_show(unit)} (allowed: ns, us, µs, ms, s, m, h)")
        total += _part_nanoseconds(text, whole, fraction if dot else "", scale)
        if total > _LIMIT:
            raise _out_of_range(text)
    if negative:
        return -total
    if total > MAX_NANOSECONDS:
        raise _out_of_range(text)
    return total


def _part_nanoseconds(text: str, whole: str, fraction: str, unit: int) -> int:
    """One part's nanoseconds, rounded as Go rounds it (the fraction through a float64, truncated)."""
    digits = whole.lstrip("0")
    if len(digits) > _MAX_DIGITS:
        raise _out_of_range(text)
    value = int(digits) if digits else 0
    if value > _LIMIT or value > _LIMIT // unit:
        raise _out_of_range(text)
    value *= unit
    numerator, scale = _fraction(fraction)
    if numerator > 0:
        value += int(float(numerator) * (float(unit) / scale))
        if value > _LIMIT:
            raise _out_of_range(text)
    return value


def _fraction(digits: str) -> tuple[int, float]:
    """The fraction's digits as Go keeps them: as many as fit an int64, and the float power of ten they make.

    Digits past that are read but change nothing; once the scale is infinite no digit adds a nanosecond,
    so the loop stops there (at most some 330 rounds whatever the length).
    """
    numerator = 0
    scale = 1.0
    for char in digits:
        if numerator > MAX_NANOSECONDS // 10 or scale == float("inf"):
            break
        following = numerator * 10 + ord(char) - 48
        if following > _LIMIT:
            break
        numerator = following
        scale *= 10
    return numerator, scale


def _out_of_range(text: str) -> DurationError:
    return DurationError(f"{_show(text)} is out of range: a duration is at most {MAX_TEXT} either way")


def _show(text: str) -> str:
    """The text quoted, cut short: a message names a tenant's 256 KB annotation without repeating it."""
    return repr(text) if len(text) <= 64 else repr(text[:61] + "...")


def go_duration_ns(text: str) -> int | None:
    """Nanoseconds, or None when Go's ParseDuration refuses ``text`` (not a duration, or out of range)."""
    try:
        return parse_nanoseconds(text)
    except DurationError:
        return None


def go_duration_seconds(text: str) -> float | None:
    """Seconds, or None when Go's ParseDuration refuses ``text`` (not a duration, or out of range)."""
    ns = go_duration_ns(text)
    return None if ns is None else ns / 1e9
