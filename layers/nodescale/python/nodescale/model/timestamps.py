"""Timestamps as Kubernetes and EC2 write them (RFC 3339), parsed to aware datetimes and back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def parse_timestamp(value: object) -> datetime | None:
    """A Kubernetes/EC2 timestamp (RFC 3339 string or datetime) as an aware datetime."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shifted(moment: datetime, seconds: float) -> datetime:
    """``moment`` plus ``seconds``, held at the calendar's first or last instant instead of overflowing.

    Durations are bounded (about 292 years), but the timestamps they are added to come from objects
    others write; no sum of the two may raise where a decision is made.
    """
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        edge = datetime.max if seconds > 0 else datetime.min
        return edge.replace(tzinfo=moment.tzinfo)
