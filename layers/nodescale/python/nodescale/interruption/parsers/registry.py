"""The registry of event parsers, keyed by (source, detail-type): one module per event kind (parsers/).

Adding an event kind is a parser module (``SOURCE``, ``DETAIL_TYPE`` or, for a family of events one
parser reads, ``DETAIL_TYPES``, and ``parse``) and a line in ``_KINDS``; nothing else reads the detail-type.
"""

from __future__ import annotations

from ..intents import Ignored, Parsed
from . import capacity_reservation, health, rebalance, spot, state_change, zonal_shift
from .base import Envelope, Parser, shown

_KINDS = (spot, rebalance, state_change, health, zonal_shift, capacity_reservation)

PARSERS: dict[tuple[str, str], Parser] = {
    (kind.SOURCE, detail_type): kind.parse
    for kind in _KINDS
    for detail_type in getattr(kind, "DETAIL_TYPES", (getattr(kind, "DETAIL_TYPE", None),))
}


def dispatch(event: Envelope) -> Parsed:
    """The intents of an envelope, from the parser registered for its source and detail-type."""
    parser = PARSERS.get((event.source, event.detail_type))
    if parser is not None:
        return parser(event)
    sources = sorted(source for source, detail_type in PARSERS if detail_type == event.detail_type)
    if not sources:
        return Ignored(f"unknown detail-type {shown(event.detail_type)}", event.event_id)
    expected = " or ".join(sources)
    return Ignored(f"{event.detail_type} from source {shown(event.source)}, expected {expected}", event.event_id)

