"""What every event parser receives (an ``Envelope`` whose common fields are checked) and the field readers they share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ..intents import Parsed

# The longest time string read (an RFC 1123 or ISO 8601 time is about 30 characters) and the years kept, so
# a deadline (a time plus a notice) or a conversion to UTC cannot overflow datetime's range.
_MAX_TIME_CHARACTERS = 64
_YEARS = (2, 9998)


@dataclass(frozen=True, slots=True)
class Envelope:
    """An EventBridge event whose id, source, detail-type, account, region and detail are well-formed."""

    event_id: str
    source: str
    detail_type: str
    time: datetime | None
    detail: Mapping
    resources: tuple[str, ...] = ()  # the envelope's resources (ARNs or identifiers), strings only


# A parser turns the envelope of its (source, detail-type) into intents; it never raises.
Parser = Callable[[Envelope], Parsed]


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def parse_time(value: object) -> datetime | None:
    """EventBridge uses ISO 8601; AWS Health's startTime uses RFC 1123 ("Sat, 21 Nov 2026 15:10:09 GMT").
    In UTC; None when absent, unreadable, or so near the ends of the calendar that adding a notice to it or
    converting it would overflow (``9999-12-31T23:59:59Z``)."""
    if not isinstance(value, str) or not value or len(value) > _MAX_TIME_CHARACTERS:
        return None
    try:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = parsedate_to_datetime(value)
        parsed = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).astimezone(UTC)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return parsed if _YEARS[0] <= parsed.year <= _YEARS[1] else None


def shown(value: object, limit: int = 64, *, quote: bool = True) -> str:
    """A value from an event, for a reason or a log line: its repr (escapes and all), cut to ``limit`` characters;
    with ``quote=False`` a short printable string as it is."""
    if not quote and isinstance(value, str) and len(value) <= limit and value.isprintable():
        return value
    try:
        text_ = repr(value) if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    except ValueError:  # an int past Python's 4,300-digit str limit
        text_ = "a number too long to show"
    return text_ if len(text_) <= limit else f"{text_[:limit]}... ({len(text_)} characters)"
