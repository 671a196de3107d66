"""Chaos switch for the Kubernetes API: make a chosen share of calls fail like an unhealthy server."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError

KINDS = ("500", "429", "409", "timeout")
VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"})


class FaultSpecError(ValueError):
    """A fault request the control API rejects, with a message naming the field."""


@dataclass
class FaultRule:
    """Fail `fraction` of the calls that match `verbs`/`resources` (all when empty), at most `count` times."""

    kind: str
    fraction: float = 1.0
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    count: int | None = None
    delay_seconds: float = 5.0
    injected: int = 0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def matches(self, verb: str, resource: str) -> bool:
        if self.verbs and verb not in self.verbs:
            return False
        if self.resources and resource not in self.resources and resource.split("/")[0] not in self.resources:
            return False
        return not (self.count is not None and self.injected >= self.count)

    def describe(self) -> dict[str, Any]:
        return {
            "status": self.kind,
            "fraction": self.fraction,
            "verbs": sorted(self.verbs),
            "resources": sorted(self.resources),
            "count": self.count,
            "delaySeconds": self.delay_seconds,
            "injected": self.injected,
        }


def parse_rule(spec: Any) -> FaultRule:
    if not isinstance(spec, dict):
        raise FaultSpecError("fault body must be a JSON object like {\"status\": 500, \"fraction\": 0.5}")
    kind = str(spec.get("status", spec.get("kind", "")))
    if kind not in KINDS:
        raise FaultSpecError(f"status: must be one of {', '.join(KINDS)}, got {spec.get('status')!r}")
    fraction = spec.get("fraction", 1.0)
    if not isinstance(fraction, int | float) or not 0 <= fraction <= 1:
        raise FaultSpecError(f"fraction: must be a number from 0 to 1, got {fraction!r}")
    verbs = spec.get("verbs") or []
    if not isinstance(verbs, list) or not set(verbs) <= VERBS:
        raise FaultSpecError(f"verbs: must be a list drawn from {', '.join(sorted(VERBS))}, got {verbs!r}")
    resources = spec.get("resources") or []
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        raise FaultSpecError(f"resources: must be a list of resource names like \"pods\", got {resources!r}")
    count = spec.get("count")
    if count is not None and (not isinstance(count, int) or count < 0):
        raise FaultSpecError(f"count: must be a non-negative integer, got {count!r}")
    delay = spec.get("delaySeconds", 5.0)
    if not isinstance(delay, int | float) or delay < 0:
        raise FaultSpecError(f"delaySeconds: must be a non-negative number, got {delay!r}")
    seed = spec.get("seed")
    return FaultRule(
        kind=kind,
        fraction=float(fraction),
        verbs=frozenset(verbs),
        resources=frozenset(resources),
        count=count,
        delay_seconds=float(delay),
        rng=random.Random(seed),
    )


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(self, spec: Any) -> dict[str, Any]:
        rule = parse_rule(spec)
        with self._lock:
            self._rules.append(rule)
            return {"id": len(self._rules) - 1, **rule.describe()}

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def report(self) -> dict[str, Any]:
        with self._lock:
            rules = [rule.describe() for rule in self._rules]
        return {"rules": rules, "injected": sum(r["injected"] for r in rules)}

    def pick(self, verb: str, resource: str) -> FaultRule | None:
        """The rule that fails this call, if any (and count it)."""
        with self._lock:
            for rule in self._rules:
                if rule.matches(verb, resource) and rule.rng.random() < rule.fraction:
                    rule.injected += 1
                    return rule
        return None


def fault_error(rule: FaultRule, resource: str, name: str) -> ApiError:
    if rule.kind == "429":
        return ApiError(
            429, "TooManyRequests", "the server has received too many requests and has asked us to try again later",
            {"retryAfterSeconds": 1}, headers={"Retry-After": "1"},
        )
    if rule.kind == "409":
        return ApiError(
            409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again", {"name": name, "kind": resource},
        )
    return ApiError(500, "InternalError", "Internal error occurred: injected fault (sim)", {"causes": [
        {"message": "injected fault (sim)"}]})
