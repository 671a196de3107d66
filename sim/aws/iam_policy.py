"""AWS's evaluation of identity-based policies, for one request: pure, no I/O.

A request is an action, one resource ARN and a request context (condition keys to values). The answer
follows the IAM User Guide's "Policy evaluation logic" for a principal with identity policies only:
an explicit Deny in any statement wins; otherwise some Allow must match the action, the resource and
every condition; otherwise the request is implicitly denied.

Conditions follow "IAM JSON policy elements: Condition operators" and "Single-valued vs. multivalued
context keys": the values of one key are ORed, keys and operators are ANDed; a key missing from the
context fails the operator, except `Null`, an `...IfExists` operator, and `ForAllValues:` (vacuously true).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

ALLOW = "allowed"
EXPLICIT_DENY = "explicit deny"
IMPLICIT_DENY = "no identity-based policy allows"

Context = Mapping[str, Sequence[str]]  # condition key (lower-cased) -> its values


@dataclass(frozen=True)
class Decision:
    verdict: str  # ALLOW, EXPLICIT_DENY or IMPLICIT_DENY
    statement: str = ""  # the Sid (or index) that decided, when one did

    @property
    def allowed(self) -> bool:
        return self.verdict == ALLOW


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


@lru_cache(maxsize=4096)
def _glob(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    # IAM's wildcards: * any run of characters (including ':' and '/'), ? one character.
    # (No character classes: '[' is literal in IAM, unlike fnmatch.)
    flags = re.DOTALL | (0 if case_sensitive else re.IGNORECASE)
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(regex, flags)


def matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    return _glob(pattern, case_sensitive).fullmatch(value) is not None


def _action_matches(patterns: Iterable[str], action: str) -> bool:
    return any(matches(p, action, case_sensitive=False) for p in patterns)


def _resource_matches(patterns: Iterable[str], resource: str) -> bool:
    return any(p == "*" or matches(p, resource) for p in patterns)


# --- condition operators -------------------------------------------------------------------------------------
def _string_equals(policy: str, value: str) -> bool:
    return policy == value


def _string_equals_ignore_case(policy: str, value: str) -> bool:
    return policy.lower() == value.lower()


def _string_like(policy: str, value: str) -> bool:
    return matches(policy, value)


def _arn_like(policy: str, value: str) -> bool:
    # ARNs compare part by part (six colon-separated parts), each with wildcards.
    p_parts, v_parts = policy.split(":", 5), value.split(":", 5)
    if len(p_parts) != 6 or len(v_parts) != 6:
        return False
    return all(matches(p, v) for p, v in zip(p_parts, v_parts, strict=True))


def _numeric(compare: Any) -> Any:
    def check(policy: str, value: str) -> bool:
        try:
            return bool(compare(float(value), float(policy)))
        except ValueError:
            return False

    return check


def _bool(policy: str, value: str) -> bool:
    return str(policy).lower() == str(value).lower()


_POSITIVE = {
    "stringequals": _string_equals,
    "stringequalsignorecase": _string_equals_ignore_case,
    "stringlike": _string_like,
    "arnequals": _arn_like,
    "arnlike": _arn_like,
    "numericequals": _numeric(lambda v, p: v == p),
    "numericlessthan": _numeric(lambda v, p: v < p),
    "numericlessthanequals": _numeric(lambda v, p: v <= p),
    "numericgreaterthan": _numeric(lambda v, p: v > p),
    "numericgreaterthanequals": _numeric(lambda v, p: v >= p),
    "bool": _bool,
}
# Negated operators: true when the value matches none of the policy's values.
_NEGATED = {
    "stringnotequals": _string_equals,
    "stringnotequalsignorecase": _string_equals_ignore_case,
    "stringnotlike": _string_like,
    "arnnotequals": _arn_like,
    "arnnotlike": _arn_like,
    "numericnotequals": _numeric(lambda v, p: v == p),
}


class UnsupportedCondition(ValueError):
    """A condition operator this evaluator does not know: the policy is refused rather than guessed at."""


def _condition_holds(operator: str, key: str, policy_values: list[str], context: Context) -> bool:
    op = operator.lower()
    qualifier = ""
    if op.startswith(("forallvalues:", "foranyvalue:")):
        qualifier, op = op.split(":", 1)
    if_exists = op.endswith("ifexists")
    if if_exists:
        op = op[: -len("ifexists")]
    if op != "null" and op not in _POSITIVE and op not in _NEGATED:
        raise UnsupportedCondition(f"condition operator {operator!r} is not supported by sim's IAM evaluator")
    values = context.get(key.lower())
    if op == "null":
        want_missing = str(policy_values[0]).lower() == "true"
        return (values is None or len(values) == 0) == want_missing
    if values is None or len(values) == 0:
        if qualifier == "forallvalues":
            return True
        return if_exists
    if op in _POSITIVE:
        test = _POSITIVE[op]

        def one(value: str) -> bool:
            return any(test(str(p), value) for p in policy_values)
    elif op in _NEGATED:
        test = _NEGATED[op]

        def one(value: str) -> bool:
            return not any(test(str(p), value) for p in policy_values)
    else:
        raise UnsupportedCondition(f"condition operator {operator!r} is not supported by sim's IAM evaluator")
    if qualifier == "forallvalues":
        return all(one(v) for v in values)
    # ForAnyValue, and a single-valued key (its one value) alike: some value satisfies the operator.
    return any(one(v) for v in values)


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Context) -> bool:
    return all(
        _condition_holds(operator, key, [str(v) for v in _as_list(values)], context)
        for operator, keys in conditions.items()
        for key, values in keys.items()
    )


def _statement_applies(statement: Mapping[str, Any], action: str, resource: str, context: Context) -> bool:
    if "Action" in statement:
        if not _action_matches(_as_list(statement["Action"]), action):
            return False
    elif "NotAction" in statement:
        if _action_matches(_as_list(statement["NotAction"]), action):
            return False
    else:
        return False
    if "Resource" in statement:
        if not _resource_matches(_as_list(statement["Resource"]), resource):
            return False
    elif "NotResource" in statement:
        if _resource_matches(_as_list(statement["NotResource"]), resource):
            return False
    else:
        return False
    return _conditions_hold(statement.get("Condition") or {}, context)


def evaluate(statements: Sequence[Mapping[str, Any]], action: str, resource: str, context: Context) -> Decision:
    """The decision for one action on one resource; `context` keys lower-cased, values lists of strings."""
    allowed_by = ""
    for index, statement in enumerate(statements):
        if not _statement_applies(statement, action, resource, context):
            continue
        sid = str(statement.get("Sid") or index)
        if statement.get("Effect") == "Deny":
            return Decision(EXPLICIT_DENY, sid)
        if statement.get("Effect") == "Allow" and not allowed_by:
            allowed_by = sid
    return Decision(ALLOW, allowed_by) if allowed_by else Decision(IMPLICIT_DENY)


def context_of(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """A request context from `{key: value or [values]}`, keys lower-cased as IAM compares them."""
    return {k.lower(): [str(v) for v in _as_list(value)] for k, value in values.items()}
