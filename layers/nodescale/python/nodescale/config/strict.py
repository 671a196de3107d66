"""Strict manifests: every field of a configuration object must exist in its generation's schema, and a
kind that looks like a misspelled Karpenter kind is named with its right spelling.

This restates what `kubectl apply --validate=strict` does against Karpenter's CRDs (unknown fields are
errors, not pruned away in silence): `requirments:` would otherwise leave a pool without requirements,
and `ttlSecondAfterEmpty:` a pool that never removes empty nodes. The field table is in schema.py;
what each value may be is checked by the converters, so a field of the wrong type is left to them here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError
from .schema import SCHEMAS, Refused, Schema

# Every kind Karpenter configuration comes in: a kind close to one of these is a misspelling, never a workload.
KARPENTER_KINDS = ("Provisioner", "NodePool", "EC2NodeClass", "AWSNodeTemplate", "NodeOverlay")
# How alike (difflib ratio, case ignored) a name must be to count as a misspelling. Kinds need more than
# fields: Node and NodePool are 0.67 alike and both real.
_FIELD_CUTOFF = 0.75
_KIND_CUTOFF = 0.8


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A field the schema lacks: where, the message, and the path of the field it likely misspells."""

    path: str
    message: str
    meant: str | None = None  # "spec.requirements" for "spec.requirments", when spec has no requirements


def check_fields(doc: Mapping, source: str) -> list[ConfigError]:
    """Every field of ``doc`` its (apiVersion, kind) does not have, each with its full path and, where
    a valid name is close, that name. An (apiVersion, kind) without a schema gives no errors here."""
    return [ConfigError(source, u.path, u.message) for u in unknown_fields(doc)]


def unknown_fields(doc: Mapping) -> list[UnknownField]:
    """check_fields' findings, with the path each misspelling was likely meant to be."""
    api, kind = doc.get("apiVersion"), doc.get("kind")
    schema = SCHEMAS.get((api, kind)) if isinstance(api, str) and isinstance(kind, str) else None
    found: list[UnknownField] = []
    if schema is not None:
        _walk(doc, schema, "", found)
    return found


def _walk(value: object, schema: Schema, path: str, found: list[UnknownField]) -> None:
    # Recursion follows the schema, not the document, so it is at most as deep as schema.py's table.
    if isinstance(schema, dict) and isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            sub = schema.get(key) if isinstance(key, str) else None
            if not isinstance(key, str) or key not in schema:
                allowed = [k for k, v in schema.items() if not isinstance(v, Refused)]
                close = suggest(str(key), allowed, _FIELD_CUTOFF)
                # Only an absent field was meant: what the converters say of one that is there still counts.
                meant = (f"{path}.{close}" if path else close) if close and close not in value else None
                found.append(UnknownField(where, _unknown_message(close, allowed), meant))
            elif isinstance(sub, Refused):
                found.append(UnknownField(where, sub.message))
            else:
                _walk(item, sub, where, found)
    elif isinstance(schema, list) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, schema[0], f"{path}[{i}]", found)
    # SCALAR, FREE and ANY hold whatever they hold; a value of the wrong shape is the converters' to name.


def _unknown_message(close: str | None, allowed: list[str]) -> str:
    """``unknown field; did you mean X?`` or, with nothing close, the fields allowed there."""
    if close:
        return f"unknown field; did you mean {close}?"
    return f"unknown field; allowed are {', '.join(sorted(allowed))}"


def suggest(word: str, choices: list[str] | tuple[str, ...], cutoff: float = _FIELD_CUTOFF) -> str | None:
    """The choice ``word`` most likely misspells (case ignored), or None when none is close."""
    by_lower = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[match[0]] if match else None


def misspelled_kind(kind: object) -> str | None:
    """The Karpenter kind ``kind`` misspells (``Provisoner`` -> ``Provisioner``); None for a correct one or
    for anything not close to one."""
    if not isinstance(kind, str) or kind in KARPENTER_KINDS:
        return None
    return suggest(kind, KARPENTER_KINDS, _KIND_CUTOFF)


def is_karpenter_kind(kind: object) -> bool:
    """A Karpenter kind, spelled right or nearly so."""
    return kind in KARPENTER_KINDS or misspelled_kind(kind) is not None
