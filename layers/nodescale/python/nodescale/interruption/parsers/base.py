"""What every event parser receives (an ``Envelope`` whose common fields are checked) and the field readers they share."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ..intents import Parsed

_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


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


def instance_id(value: object) -> str | None:
    return value if isinstance(value, str) and _INSTANCE_ID.match(value) else None


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def parse_time(value: object) -> datetime | None:
    """EventBridge uses ISO 8601; AWS Health's startTime uses RFC 1123 ("Sat, 21 Nov 2026 15:10:09 GMT")."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
