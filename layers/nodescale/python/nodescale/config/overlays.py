"""Karpenter's NodeOverlay (karpenter.sh/v1alpha1) read and checked as its CRD and webhook check it
(kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay.go, nodeoverlay_validation.go)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..model import resources as res
from ..model.overlays import NodeOverlay
from ..model.quantity import QuantityError, to_int
from ..model.requirements import OPERATORS
from .errors import Collector, ConfigError, show
from .fields import FieldError, attempt, integer, mapping, string
from .requirement_rules import parse_requirements

V1ALPHA1 = "karpenter.sh/v1alpha1"
MAX_REQUIREMENTS = 100
# The CRD's patterns: a price is an unsigned decimal; an adjustment a signed amount, an increase in
# percent, or a decrease of less than 100 % (or exactly -100%).
_PRICE = re.compile(r"^\d+(\.\d+)?$")
_ADJUSTMENT = re.compile(r"^(([+-]\d*\.?\d+)|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$")
# Capacity adds extended resources only (the CEL rule and the webhook refuse these).
_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


def convert_nodeoverlay(doc: Mapping, source: str) -> tuple[NodeOverlay | None, list[ConfigError]]:
    c = Collector(source)
    meta = attempt(c, mapping, doc.get("metadata"), "metadata", default={}) or {}
    name = attempt(c, string, meta.get("name"), "metadata.name", required=True)
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    raw_reqs = spec.get("requirements")
    reqs = None
    if raw_reqs is None:
        c.fail("spec.requirements", "is required; use [] to match every instance type")
    elif isinstance(raw_reqs, list) and len(raw_reqs) > MAX_REQUIREMENTS:
        c.fail("spec.requirements", f"{len(raw_reqs)} items; at most {MAX_REQUIREMENTS} are allowed")
    else:
        reqs = attempt(c, parse_requirements, raw_reqs, "spec.requirements", OPERATORS)
    price = attempt(c, _pattern, spec.get("price"), "spec.price", _PRICE, "an unsigned decimal such as 0.05")
    adjustment = attempt(
        c, _pattern, spec.get("priceAdjustment"), "spec.priceAdjustment", _ADJUSTMENT,
        'a signed amount ("+0.1", "-0.05") or percent ("+10%", "-50%", at most -100%)',
    )
    if price is not None and adjustment is not None:
        c.fail("spec", "cannot set both 'price' and 'priceAdjustment'")
    capacity = attempt(c, _capacity, spec.get("capacity"), "spec.capacity", default={}) or {}
    weight = attempt(c, integer, spec.get("weight"), "spec.weight", 1, 10000)
    if not c.ok or name is None or reqs is None:
        return None, c.errors
    overlay = NodeOverlay(
        name=name, requirements=reqs, price=price, price_adjustment=adjustment,
        capacity=capacity, weight=weight or 0, source=source,
    )
    return overlay, c.errors


def _pattern(value: object, path: str, pattern: re.Pattern[str], what: str) -> str | None:
    if value is None:
        return None
    text = str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not pattern.match(text):
        raise FieldError(path, f"{show(value)} is not allowed; expected {what}")
    return text


def _capacity(raw: object, path: str) -> res.Resources:
    out: res.Resources = {}
    for key, value in mapping(raw, path).items():
        if key in _STANDARD_RESOURCES:
            raise FieldError(f"{path}.{key}", f"{show(key)} is restricted; capacity adds extended resources only")
        try:
            out[str(key)] = to_int(value)
        except QuantityError as exc:
            raise FieldError(f"{path}.{key}", str(exc)) from None
    return out
