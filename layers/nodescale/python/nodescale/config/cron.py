"""Standard five-field cron schedules (minute hour day-of-month month day-of-week), as budgets use them.

Parsed into the set of values each field allows, so a schedule can be validated with a message that
names the bad field, and tested against a time (UTC, as Karpenter evaluates budget schedules).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# name, low, high, names (index + low is the value)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 6, _DAYS),
)


class CronError(ValueError):
    """Not a schedule; the message names the field and what it allows."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_star: bool  # cron ORs day-of-month and day-of-week unless one of them is "*"
    weekdays_star: bool

    def matches(self, when: datetime) -> bool:
        if when.minute not in self.minutes or when.hour not in self.hours or when.month not in self.months:
            return False
        dom = when.day in self.days
        dow = (when.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def parse_cron(expr: str) -> CronSchedule:
    if not isinstance(expr, str) or not expr.strip():
        raise CronError("a schedule needs five fields: minute hour day-of-month month day-of-week, or a macro")
    text = expr.strip()
    if text.startswith("@"):
        if text not in MACROS:
            raise CronError(f"unknown macro {text!r}; allowed are {', '.join(MACROS)}")
        text = MACROS[text]
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            f"{len(parts)} fields given; a schedule needs five: minute hour day-of-month month day-of-week"
        )
    sets = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
    return CronSchedule(
        *(frozenset(s) for s in sets),
        days_star=parts[2] in ("*", "?"),
        weekdays_star=parts[4] in ("*", "?"),
    )


def _field(text: str, name: str, lo: int, hi: int, names: tuple[str, ...]) -> set[int]:
    out: set[int] = set()
    for item in text.split(","):
        rng, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name} field {text!r}: step {step_text!r} must be a positive whole number")
            step = int(step_text)
        if rng in ("*", "?"):
            if rng == "?" and name not in ("day of month", "day of week"):
                raise CronError(f"{name} field {text!r}: '?' is only allowed for day of month or day of week")
            start, end = lo, hi
        elif "-" in rng:
            a, _, b = rng.partition("-")
            start, end = _value(a, text, name, lo, hi, names), _value(b, text, name, lo, hi, names)
            if start > end:
                raise CronError(f"{name} field {text!r}: range {rng!r} runs backwards")
        else:
            start = _value(rng, text, name, lo, hi, names)
            end = hi if step_text else start
        out.update(range(start, end + 1, step))
    return out


def _value(token: str, text: str, name: str, lo: int, hi: int, names: tuple[str, ...]) -> int:
    low = token.lower()
    if names and low in names:
        return names.index(low) + lo
    if token.isdigit() and lo <= int(token) <= hi:
        return int(token)
    allowed = f"{lo}-{hi}" + (f" or {names[0]}..{names[-1]}" if names else "")
    raise CronError(f"{name} field {text!r}: {token!r} is not allowed; allowed are {allowed}")
