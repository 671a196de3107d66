"""AWS's evaluation of IAM policies for one request: pure, no I/O.

A request is an action, one resource ARN, a request context (condition keys to values) and, where a
resource-based policy takes part, the calling principal. The answer follows the IAM User Guide's
"Policy evaluation logic": an explicit Deny in any statement (identity or resource policy) wins;
otherwise some Allow must match the action, the resource, the principal (resource policies) and every
condition; otherwise the request is implicitly denied. Within one account an Allow in either the
identity or the resource policy suffices; across accounts both must allow.

Conditions follow "IAM JSON policy elements: Condition operators" and "Single-valued vs. multivalued
context keys": the values of one key are ORed (a negated operator: the value matches none), keys and
operators are ANDed. A key missing from the context fails a positive operator, and satisfies a negated one
("StringNotEquals", "ArnNotLike", "NotIpAddress"...), an `...IfExists` one and `ForAllValues:`; `Null`
tests presence; `ForAnyValue:` fails. Policy variables ("IAM policy elements: Variables and tags") are
substituted in Resource/NotResource and in string and ARN condition values.

`validate` refuses a policy AWS refuses when it is created (IAM's MalformedPolicyDocument), such as an action
without a service prefix: sim loads the stack's policies through it.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

ALLOW = "allowed"
EXPLICIT_DENY = "explicit deny"
IMPLICIT_DENY = "no identity-based policy allows"

IDENTITY = "identity-based"
RESOURCE = "resource-based"

Context = Mapping[str, Sequence[str]]  # condition key (lower-cased) -> its values


@dataclass(frozen=True)
class Decision:
    verdict: str  # ALLOW, EXPLICIT_DENY or IMPLICIT_DENY
    statement: str = ""  # the Sid (or index) that decided, when one did
    policy: str = IDENTITY  # which kind of policy held that statement

    @property
    def allowed(self) -> bool:
        return self.verdict == ALLOW


class MalformedPolicy(ValueError):
    """A policy AWS refuses when it is created or attached (MalformedPolicyDocument), named by what is wrong."""


class UnsupportedCondition(MalformedPolicy):
    """A condition operator AWS does not have: the policy is refused rather than guessed at."""


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _text(value: Any) -> str:
    # IAM reads condition values as strings: a JSON true is "true", a JSON 5 is "5".
    if isinstance(value, str):
        return value
    return json.dumps(value)


@lru_cache(maxsize=4096)
def _glob(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    # IAM's wildcards: * any run of characters (including ':' and '/'), ? one character.
    # (No character classes: '[' is literal in IAM, unlike fnmatch.)
    flags = re.DOTALL | (0 if case_sensitive else re.IGNORECASE)
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(regex, flags)


def matches(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    return _glob(pattern, case_sensitive).fullmatch(value) is not None


# --- policy variables ----------------------------------------------------------------------------------------
_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_DEFAULT = re.compile(r"^\s*([^,\s]+)\s*,\s*'([^']*)'\s*$")
_ESCAPES = {"*": "*", "?": "?", "$": "$"}


@dataclass(frozen=True)
class _Pattern:
    """A policy string after substitution: wildcard runs (policy text) and literal runs (variables' values,
    and ${*} ${?} ${$}, which stand for the character itself, never a wildcard)."""

    parts: tuple[tuple[bool, str], ...]  # (is policy text, text)

    @property
    def literal(self) -> str:
        return "".join(text for _, text in self.parts)

    def regex(self, case_sensitive: bool = True) -> re.Pattern[str]:
        return _part_regex(self.parts, case_sensitive)

    def fullmatch(self, value: str, case_sensitive: bool = True) -> bool:
        return self.regex(case_sensitive).fullmatch(value) is not None


@lru_cache(maxsize=4096)
def _part_regex(parts: tuple[tuple[bool, str], ...], case_sensitive: bool) -> re.Pattern[str]:
    regex = "".join(_glob(text, True).pattern if wild else re.escape(text) for wild, text in parts)
    return re.compile(regex, re.DOTALL | (0 if case_sensitive else re.IGNORECASE))


def substitute(text: str, context: Context) -> _Pattern | None:
    """`text` with its policy variables replaced from `context`; None when one has no value and no default
    (AWS: the element or condition with it then matches nothing)."""
    parts: list[tuple[bool, str]] = []
    last = 0
    for match in _VARIABLE.finditer(text):
        if match.start() > last:
            parts.append((True, text[last:match.start()]))
        last = match.end()
        inner = match.group(1)
        if inner in _ESCAPES:
            parts.append((False, _ESCAPES[inner]))
            continue
        default = _DEFAULT.match(inner)
        key, fallback = (default.group(1), default.group(2)) if default else (inner.strip(), None)
        values = context.get(key.lower())
        if values is not None and len(values) == 1:
            parts.append((False, str(values[0])))
        elif fallback is not None:
            parts.append((False, fallback))
        else:
            return None  # a missing (or multivalued) variable with no default
    if last < len(text):
        parts.append((True, text[last:]))
    return _Pattern(tuple(parts))


def _action_matches(patterns: Iterable[str], action: str) -> bool:
    return any(matches(p, action, case_sensitive=False) for p in patterns)


def _resource_matches(patterns: Iterable[str], resource: str, context: Context) -> bool:
    for pattern in patterns:
        if pattern == "*":
            return True
        resolved = substitute(str(pattern), context)
        if resolved is not None and resolved.fullmatch(resource):
            return True
    return False


# --- condition operators: each (policy value, request value) -> bool ----------------------------------------
Test = Callable[[Any, str], bool]  # policy value (a _Pattern for string/ARN operators, else text), request value


def _string_equals(policy: _Pattern, value: str) -> bool:
    return policy.literal == value


def _string_equals_ignore_case(policy: _Pattern, value: str) -> bool:
    return policy.literal.lower() == value.lower()


def _string_like(policy: _Pattern, value: str) -> bool:
    return policy.fullmatch(value)


def _arn_like(policy: _Pattern, value: str) -> bool:
    # ARNs compare part by part (six colon-separated parts), each with wildcards; ArnEquals is the same test.
    v_parts = value.split(":", 5)
    if len(v_parts) != 6:
        return False
    p_parts = _split_pattern(policy)
    if p_parts is None:
        return False
    return all(p.fullmatch(v) for p, v in zip(p_parts, v_parts, strict=True))


def _split_pattern(pattern: _Pattern) -> list[_Pattern] | None:
    """The pattern cut into six at the colons of its policy text (a variable's value is one part's text)."""
    out: list[list[tuple[bool, str]]] = [[]]
    for wild, text in pattern.parts:
        pieces = text.split(":") if wild else [text]
        for index, piece in enumerate(pieces):
            if index and len(out) < 6:
                out.append([])
            elif index:
                out[-1].append((wild, ":"))
            out[-1].append((wild, piece))
    return [_Pattern(tuple(p)) for p in out] if len(out) == 6 else None


def _number(text: str) -> float:
    if not re.fullmatch(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*", text):
        raise ValueError(text)
    return float(text)


def _numeric(compare: Callable[[float, float], bool]) -> Test:
    def check(policy: str, value: str) -> bool:
        try:
            return compare(_number(value), _number(policy))
        except ValueError:
            return False

    return check


def _date(text: str) -> datetime:
    text = text.strip()
    if re.fullmatch(r"[-+]?\d+(\.\d+)?", text):  # epoch seconds, which AWS accepts beside ISO 8601
        return datetime.fromtimestamp(float(text), UTC)
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _dates(compare: Callable[[datetime, datetime], bool]) -> Test:
    def check(policy: str, value: str) -> bool:
        try:
            return compare(_date(value), _date(policy))
        except (ValueError, OverflowError, OSError):
            return False

    return check


def _ip(policy: str, value: str) -> bool:
    try:
        return ipaddress.ip_address(value.strip()) in ipaddress.ip_network(policy.strip(), strict=False)
    except ValueError:
        return False


def _bool(policy: str, value: str) -> bool:
    return policy.lower() == value.lower()


# name -> (test, takes policy variables)
_POSITIVE: dict[str, tuple[Test, bool]] = {
    "stringequals": (_string_equals, True),
    "stringequalsignorecase": (_string_equals_ignore_case, True),
    "stringlike": (_string_like, True),
    "arnequals": (_arn_like, True),
    "arnlike": (_arn_like, True),
    "numericequals": (_numeric(lambda v, p: v == p), False),
    "numericlessthan": (_numeric(lambda v, p: v < p), False),
    "numericlessthanequals": (_numeric(lambda v, p: v <= p), False),
    "numericgreaterthan": (_numeric(lambda v, p: v > p), False),
    "numericgreaterthanequals": (_numeric(lambda v, p: v >= p), False),
    "dateequals": (_dates(lambda v, p: v == p), False),
    "datelessthan": (_dates(lambda v, p: v < p), False),
    "datelessthanequals": (_dates(lambda v, p: v <= p), False),
    "dategreaterthan": (_dates(lambda v, p: v > p), False),
    "dategreaterthanequals": (_dates(lambda v, p: v >= p), False),
    "bool": (_bool, False),
    "binaryequals": (lambda p, v: p == v, False),
    "ipaddress": (_ip, False),
}
# Negated operators: true when the request's value matches none of the policy's values, or has no value.
_NEGATED: dict[str, str] = {
    "stringnotequals": "stringequals",
    "stringnotequalsignorecase": "stringequalsignorecase",
    "stringnotlike": "stringlike",
    "arnnotequals": "arnequals",
    "arnnotlike": "arnlike",
    "numericnotequals": "numericequals",
    "datenotequals": "dateequals",
    "notipaddress": "ipaddress",
}
_QUALIFIERS = ("forallvalues", "foranyvalue")


@dataclass(frozen=True)
class _Operator:
    base: str  # a key of _POSITIVE, or "null"
    negated: bool
    if_exists: bool
    qualifier: str  # "", "forallvalues" or "foranyvalue"


def parse_operator(operator: str) -> _Operator:
    """The operator's parts; UnsupportedCondition for a name AWS does not have."""
    op = operator.lower()
    qualifier = ""
    if ":" in op:
        qualifier, _, op = op.partition(":")
        if qualifier not in _QUALIFIERS:
            raise UnsupportedCondition(f"condition operator {operator!r}: {qualifier!r} is not ForAllValues or ForAnyValue")
    if_exists = op.endswith("ifexists")
    if if_exists:
        op = op[: -len("ifexists")]
    if op == "null" and not if_exists:
        return _Operator("null", False, False, qualifier)
    if op in _NEGATED:
        return _Operator(_NEGATED[op], True, if_exists, qualifier)
    if op in _POSITIVE:
        return _Operator(op, False, if_exists, qualifier)
    raise UnsupportedCondition(f"condition operator {operator!r} is not an IAM condition operator")


def _condition_holds(operator: str, key: str, policy_values: list[Any], context: Context) -> bool:
    op = parse_operator(operator)
    values = context.get(key.lower())
    present = values is not None and len(values) > 0
    if op.base == "null":
        return (not present) == (_text(policy_values[0]).lower() == "true")
    if not present:
        if op.qualifier == "forallvalues":
            return True
        if op.qualifier == "foranyvalue":
            return False
        return op.if_exists or op.negated
    test, takes_variables = _POSITIVE[op.base]
    if takes_variables:
        resolved = [substitute(_text(p), context) for p in policy_values]
        patterns: list[Any] = [p for p in resolved if p is not None]
    else:
        patterns = [_text(p) for p in policy_values]

    def one(value: str) -> bool:
        hit = any(test(p, value) for p in patterns)
        return not hit if op.negated else hit

    assert values is not None
    if op.qualifier == "forallvalues":
        return all(one(v) for v in values)
    # ForAnyValue, and a single-valued key (its one value) alike: some value satisfies the operator.
    return any(one(v) for v in values)


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], context: Context) -> bool:
    return all(
        _condition_holds(operator, key, _as_list(values), context)
        for operator, keys in conditions.items()
        for key, values in keys.items()
    )


# --- principals (resource-based policies) --------------------------------------------------------------------
NO_MATCH, MATCH, ACCOUNT_MATCH = 0, 1, 2
_ASSUMED_ROLE = re.compile(r"^arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/[^/]+$")


def principal_account(principal: str) -> str | None:
    """The account of an IAM principal's ARN; None for a service principal."""
    parts = principal.split(":")
    return parts[4] if principal.startswith("arn:") and len(parts) > 5 and parts[4] else None


def _principal_value_matches(kind: str, value: str, principal: str) -> int:
    if value == "*" and kind == "AWS":
        return MATCH
    if kind == "Service":
        return MATCH if value == principal else NO_MATCH
    if kind != "AWS":
        return MATCH if value == principal else NO_MATCH
    if value == principal:
        return MATCH
    account = principal_account(principal)
    if account and (value == account or re.fullmatch(rf"arn:[^:]+:iam::{account}:root", value)):
        return ACCOUNT_MATCH
    session = _ASSUMED_ROLE.match(principal)
    if session:
        partition, acct, role = session.groups()
        if re.fullmatch(rf"arn:{partition}:iam::{acct}:role/(.*/)?{re.escape(role)}", value):
            return MATCH
    return NO_MATCH


def _principal_match(element: Any, principal: str) -> int:
    if element == "*":
        return MATCH
    if not isinstance(element, Mapping):
        return NO_MATCH
    best = NO_MATCH
    for kind, values in element.items():
        for value in _as_list(values):
            found = _principal_value_matches(kind, str(value), principal)
            best = MATCH if MATCH in (best, found) else max(best, found)
    return best


def _statement_principal(statement: Mapping[str, Any], principal: str | None) -> int:
    if "Principal" not in statement and "NotPrincipal" not in statement:
        return MATCH  # an identity policy's statement: it is the principal's own
    if principal is None:
        return NO_MATCH
    if "Principal" in statement:
        return _principal_match(statement["Principal"], principal)
    return NO_MATCH if _principal_match(statement["NotPrincipal"], principal) != NO_MATCH else MATCH


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
        if not _resource_matches(_as_list(statement["Resource"]), resource, context):
            return False
    elif "NotResource" in statement:
        if _resource_matches(_as_list(statement["NotResource"]), resource, context):
            return False
    else:
        return False
    return _conditions_hold(statement.get("Condition") or {}, context)


def _scan(statements: Sequence[Mapping[str, Any]], action: str, resource: str, context: Context,
          principal: str | None) -> tuple[str, str, bool]:
    """(deny Sid or "", allow Sid or "", whether that Allow names the principal itself, not just its account)."""
    allowed_by, allowed_fully = "", False
    for index, statement in enumerate(statements):
        named = _statement_principal(statement, principal)
        if named == NO_MATCH or not _statement_applies(statement, action, resource, context):
            continue
        sid = str(statement.get("Sid") or index)
        if statement.get("Effect") == "Deny":
            return sid, "", False
        if statement.get("Effect") == "Allow" and (not allowed_by or (named == MATCH and not allowed_fully)):
            allowed_by, allowed_fully = sid, named == MATCH
    return "", allowed_by, allowed_fully


def evaluate(statements: Sequence[Mapping[str, Any]], action: str, resource: str, context: Context) -> Decision:
    """The decision of identity policies for one action on one resource; `context` keys lower-cased, values lists
    of strings."""
    denied_by, allowed_by, _ = _scan(statements, action, resource, context, None)
    if denied_by:
        return Decision(EXPLICIT_DENY, denied_by)
    return Decision(ALLOW, allowed_by) if allowed_by else Decision(IMPLICIT_DENY)


def evaluate_with_resource_policy(
    identity: Sequence[Mapping[str, Any]] | None,
    resource_policy: Sequence[Mapping[str, Any]],
    action: str,
    resource: str,
    context: Context,
    principal: str,
    resource_account: str,
) -> Decision:
    """The decision for `principal` (an ARN, or a service principal such as "events.amazonaws.com", which has no
    identity policy) with its identity statements (None: unrestricted, as sim's administrator) and the
    resource's policy. An explicit Deny in either wins. In the resource's own account an Allow in either
    suffices, except that a resource policy naming only the account defers to the identity policy; across
    accounts both must allow."""
    denied_by, resource_allow, resource_names_principal = _scan(resource_policy, action, resource, context, principal)
    if denied_by:
        return Decision(EXPLICIT_DENY, denied_by, RESOURCE)
    if identity is None:
        return Decision(ALLOW, "administrator")
    decision = evaluate(identity, action, resource, context)
    if decision.verdict == EXPLICIT_DENY:
        return decision
    same_account = principal_account(principal) in (None, resource_account)
    if same_account and resource_allow and resource_names_principal:
        return Decision(ALLOW, resource_allow, RESOURCE)
    if decision.allowed and (same_account or resource_allow):
        return decision
    return Decision(IMPLICIT_DENY)


def statements_of(document: Any) -> list[dict[str, Any]]:
    """A policy document's statements (one statement may stand alone, not in a list); none for no document."""
    return [dict(s) for s in _as_list((document or {}).get("Statement"))]


def context_of(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """A request context from `{key: value or [values]}`, keys lower-cased as IAM compares them."""
    return {k.lower(): [_text(v) for v in _as_list(value)] for k, value in values.items()}


# --- validation, as IAM refuses a policy document ------------------------------------------------------------
_ACTION = re.compile(r"^[A-Za-z0-9-]+:[A-Za-z0-9*?]+$")


def validate(statements: Sequence[Mapping[str, Any]], *, resource_policy: bool = False, name: str = "policy") -> None:
    """Raise MalformedPolicy, naming the statement and the element, for what IAM refuses in a policy document."""
    for index, statement in enumerate(statements):
        where = f"{name}: statement {statement.get('Sid') or index}"
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise MalformedPolicy(f"{where}: Effect must be Allow or Deny, not {statement.get('Effect')!r}")
        if ("Action" in statement) == ("NotAction" in statement):
            raise MalformedPolicy(f"{where}: exactly one of Action and NotAction is required")
        for action in _as_list(statement.get("Action", statement.get("NotAction"))):
            if action != "*" and not (isinstance(action, str) and _ACTION.match(action)):
                raise MalformedPolicy(
                    f"{where}: action {action!r} must be '*' or 'service:action' (a service prefix such as ec2, "
                    "a colon and the action name, which may use * and ?)")
        if ("Resource" in statement) == ("NotResource" in statement):
            raise MalformedPolicy(f"{where}: exactly one of Resource and NotResource is required")
        has_principal = "Principal" in statement or "NotPrincipal" in statement
        if has_principal != resource_policy:
            wanted = "is required in a resource-based policy" if resource_policy else "is not allowed in an identity policy"
            raise MalformedPolicy(f"{where}: Principal {wanted}")
        for operator, keys in (statement.get("Condition") or {}).items():
            try:
                parse_operator(operator)
            except UnsupportedCondition as exc:
                raise UnsupportedCondition(f"{where}: {exc}") from None
            if not isinstance(keys, Mapping):
                raise MalformedPolicy(f"{where}: condition {operator!r} must map condition keys to values")
