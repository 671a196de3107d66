"""Canonical digests of the core's two decisions (#29, "plans stay identical"): the bin-packer's Plan
(``scheduling.solve``) and the disruption planner's Outcome (``disruption.planner.plan``).

An output digest is a sha256 of sorted JSON of plain values, projected on what a plan decides (pool,
instance types in order, zones, capacity types, pods per claim, bindings, reasons, replacements), so a
refactor that changes types but not decisions keeps it. An input digest covers every argument, with
generic canonical forms (dataclasses by class name and field, a field at its default left out, mappings
and sets sorted), so a recorded call can be recognised again. Nothing depends on object ids, insertion
order of mappings, set order or the wall clock (``solve_seconds`` is left out).

Generated names (uuids, EC2 instance ids, ip-a-b-c-d host names) are renamed in order of first appearance
within one call, input and output alike, so a call whose only difference is such a name has the same
digests. A refactor that changes a result type updates the projections here (``plan_view``,
``outcome_view``), not the recordings.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from nodescale.model.currency import USD, render

# Fields that are measurements, not decisions.
_SKIP_FIELDS = frozenset({"solve_seconds"})
_GENERATED = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # uuid
    r"|\bi-[0-9a-f]{8,17}\b"  # EC2 instance id
    r"|\bip-\d+-\d+-\d+-\d+"  # EC2 private DNS host name
)
# Canonical forms of frozen dataclasses (pods, pools, offerings) and instance types (never changed once a
# catalog is built) by id, the object kept alive with it so its id is not reused: the suite hands the same
# catalog and pods to thousands of calls. tests/plan_recorder.py empties it before each test.
_CACHE: dict[int, tuple[object, Any]] = {}
_CACHED_TYPES = frozenset({"InstanceType"})


def forget() -> None:
    _CACHE.clear()


def _num(x: float) -> str:
    return format(x, ".9g")


def _sort_key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _dataclass(x: Any) -> Any:
    out: dict[str, Any] = {"@": type(x).__name__}
    for f in dataclasses.fields(x):
        if f.name in _SKIP_FIELDS:
            continue
        value = getattr(x, f.name)
        default = _default(f)
        # A field at its default is left out: a new optional field does not change old digests.
        if default is not dataclasses.MISSING and _safe_eq(value, default):
            continue
        out[f.name] = canon(value)
    return out


def _safe_eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - an exotic __eq__ only means "not provably the default"
        return False


def _function(fn: Callable) -> Any:
    """A function by name and what its closure holds (the consolidation simulator over a world)."""
    out: dict[str, Any] = {"@fn": getattr(fn, "__qualname__", type(fn).__name__)}
    cells = getattr(fn, "__closure__", None) or ()
    names = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    for name, cell in zip(names, cells, strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value) and getattr(value, "__closure__", None) is None and inspect.isfunction(value):
            out[name] = {"@fn": value.__qualname__}
        elif not inspect.ismodule(value) and not isinstance(value, type):
            out[name] = canon(value)
    return out


def canon(x: Any) -> Any:
    """``x`` as plain JSON values, the same for equal inputs whatever their identity or insertion order."""
    if x is None or isinstance(x, bool | int | str):
        return x.value if isinstance(x, enum.Enum) else x
    if isinstance(x, enum.Enum):
        return canon(x.value)
    if isinstance(x, float):
        return _num(x)
    if isinstance(x, datetime | date):
        return x.isoformat()
    if isinstance(x, timedelta):
        return _num(x.total_seconds())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        if type(x).__dataclass_params__.frozen or type(x).__name__ in _CACHED_TYPES:
            hit = _CACHE.get(id(x))
            if hit is not None and hit[0] is x:
                return hit[1]
            value = _dataclass(x)
            _CACHE[id(x)] = (x, value)
            return value
        return _dataclass(x)
    if isinstance(x, Mapping):
        items = [[canon(k), canon(v)] for k, v in x.items()]
        return {"@map": sorted(items, key=_sort_key)}
    if isinstance(x, set | frozenset):
        return {"@set": sorted((canon(v) for v in x), key=_sort_key)}
    if isinstance(x, list | tuple):
        return [canon(v) for v in x]
    if callable(x):
        return _function(x)
    slots = getattr(type(x), "__slots__", None)
    if slots:
        return {"@": type(x).__name__, **{s: canon(getattr(x, s)) for s in slots if hasattr(x, s)}}
    if hasattr(x, "__dict__"):
        return {"@": type(x).__name__, **{k: canon(v) for k, v in sorted(vars(x).items())}}
    return repr(x)


# -- projections of the outputs on what they decide -------------------------------------------------------


def _requirements(reqs: Any) -> Any:
    return canon({k: r for k, r in reqs.items()}) if isinstance(reqs, Mapping) else canon(reqs)


def claim_view(c: Any) -> dict:
    return {
        "pool": c.nodepool, "instance_types": list(c.instance_types), "zones": list(c.zones),
        "capacity_types": list(c.capacity_types), "labels": canon(c.labels), "taints": canon(c.taints),
        "startup_taints": canon(c.startup_taints), "requirements": _requirements(c.requirements),
        "pods": [p.key for p in c.pods], "price": _num(c.price), "requests": canon(c.requests),
        "overlays": list(c.overlays), "key": c.key,
    }


def plan_view(plan: Any) -> dict:
    return {
        "claims": [claim_view(c) for c in plan.node_claims],
        "existing": [{"node": e.node, "in_flight": e.in_flight, "pods": [p.key for p in e.pods]} for e in plan.existing],
        "unschedulable": [{"pod": u.pod.key, "reason": u.reason, "kind": canon(u.kind),
                           "limited_pools": list(u.limited_pools)} for u in plan.unschedulable],
        "pods": plan.pods, "buffers": canon(plan.buffers),
    }


def replacement_view(r: Any) -> Any:
    if r is None:
        return None
    return {"pool": r.nodepool, "price": _num(r.price), "options": canon(r.options),
            "capacity_types": list(r.capacity_types), "pods": list(r.pods)}


def decision_view(d: Any) -> dict:
    # #29.3: detail and why are Priced messages when they name a price, viewed as the USD text they were.
    return {
        "nodes": list(d.nodes), "reason": canon(d.reason), "detail": render(d.detail, USD), "action": canon(d.action),
        "saving": _num(d.saving_per_hour),
        # #29.2: one list of replacements; viewed as the recording's "the first" plus "every one, when several"
        "replacement": replacement_view(d.replacements[0]) if d.replacements else None, "pods": list(d.pods),
        "score": canon(d.score), "drift": canon(d.drift),
        "replacements": [replacement_view(r) for r in d.replacements] if len(d.replacements) > 1 else [],
    }


def refusal_view(r: Any) -> dict:
    return {"nodes": list(r.nodes), "reason": canon(r.reason), "why": render(r.why, USD), "kind": canon(getattr(r, "kind", None))}


def outcome_view(out: Any) -> dict:
    search = out.consolidation
    return {
        "decisions": [decision_view(d) for d in out.decisions],
        "refusals": [refusal_view(r) for r in out.refusals],
        "mark_empty": sorted(out.mark_empty), "clear_empty": sorted(out.clear_empty),
        "mark_pods": canon(out.mark_pods), "notes": list(out.notes),
        "consolidation": None if search is None else {
            "decision": None if search.decision is None else decision_view(search.decision),
            "refusals": [refusal_view(r) for r in search.refusals], "simulations": search.simulations,
            "timed_out": search.timed_out,
        },
    }


# -- digests ---------------------------------------------------------------------------------------------


def _dumps(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _renamed(texts: list[str]) -> list[str]:
    """Generated names renamed ``<g0>``, ``<g1>``... in order of first appearance across ``texts``."""
    names: dict[str, str] = {}

    def sub(m: re.Match) -> str:
        return names.setdefault(m.group(0), f"<g{len(names)}>")

    return [_GENERATED.sub(sub, t) for t in texts]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def bound_arguments(fn: Callable, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name, those left at their default omitted."""
    sig = inspect.signature(fn)
    bound = sig.bind(*args, **kwargs)
    out = {}
    for name, value in bound.arguments.items():
        default = sig.parameters[name].default
        if default is not inspect.Parameter.empty and _safe_eq(value, default):
            continue
        out[name] = value
    return out


def digests(kind: str, arguments: Mapping[str, Any], result: Any) -> tuple[str, str, str]:
    """(input digest, output digest, output JSON) of one call of ``kind`` ("solve" or "plan")."""
    view = plan_view(result) if kind == "solve" else outcome_view(result)
    inputs, output = _renamed([_dumps({"kind": kind, "args": canon(dict(arguments))}), _dumps(view)])
    return _sha(inputs), _sha(output), output


def summary(kind: str, result: Any) -> str:
    """A short human line of what a plan decides, for a failure's diff."""
    if kind == "solve":
        claims = "; ".join(f"{c.nodepool}:{c.instance_types[0] if c.instance_types else '-'}"
                           f"[{len(c.instance_types)}]x{len(c.pods)}@{_num(c.price)}" for c in result.node_claims)
        bound = sum(len(e.pods) for e in result.existing)
        return f"claims {len(result.node_claims)} ({claims}) | bound {bound} | unschedulable {len(result.unschedulable)}"
    decisions = "; ".join(
        f"{d.reason}/{d.action} {','.join(d.nodes)}"
        + (f" -> {d.replacements[0].nodepool}:{d.replacements[0].instance_type}" if d.replacements else "")
        for d in result.decisions)
    return f"decisions [{decisions}] | refusals {len(result.refusals)} | empty +{len(result.mark_empty)}"
