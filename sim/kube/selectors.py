"""Label and field selectors, parsed once and matched many times.

Grammar as the real API server accepts it: label requirements `k=v`, `k==v`, `k!=v`,
`k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by commas; field requirements `path=v`,
`path==v`, `path!=v` over dotted object paths (`metadata.name`, `spec.nodeName`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ApiError, bad_request

_KEY = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")

LabelMatcher = Callable[[Mapping[str, str]], bool]
ObjectMatcher = Callable[[dict[str, Any]], bool]


def _match_all(_: Any) -> bool:
    return True


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts]


def _check_key(key: str, selector: str) -> str:
    if not key or len(key) > 316 or not _KEY.match(key):
        raise bad_request(
            f'unable to parse requirement: invalid label key "{key}" in selector "{selector}": name part must '
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return key


def _check_value(value: str, selector: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise bad_request(
            f'unable to parse requirement: invalid label value: "{value}" in selector "{selector}": a valid label '
            "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character"
        )
    return value


_SET_OP = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


def _label_requirement(text: str, selector: str) -> LabelMatcher:
    set_match = _SET_OP.match(text)
    if set_match:
        key = _check_key(set_match["key"], selector)
        values = frozenset(_check_value(v.strip(), selector) for v in set_match["values"].split(","))
        if set_match["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for op in ("!=", "==", "="):
        if op in text:
            raw_key, _, raw_value = text.partition(op)
            key = _check_key(raw_key.strip(), selector)
            value = _check_value(raw_value.strip(), selector)
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if text.startswith("!"):
        key = _check_key(text[1:].strip(), selector)
        return lambda labels: key not in labels
    if re.search(r"\s", text) or "(" in text or ")" in text:
        raise bad_request(f'unable to parse requirement: found \'{text}\', expected: \'=\', \'!=\', \'==\', \'in\', notin\' in selector "{selector}"')
    key = _check_key(text, selector)
    return lambda labels: key in labels


def parse_label_selector(selector: str | None) -> LabelMatcher:
    """Compile a label selector string; raises 400 BadRequest when it does not parse."""
    if not selector or not selector.strip():
        return _match_all
    requirements = []
    for part in _split_top_level(selector):
        if not part:
            raise bad_request(f'unable to parse requirement: found \'\', expected: identifier in selector "{selector}"')
        requirements.append(_label_requirement(part, selector))
    if len(requirements) == 1:
        return requirements[0]
    return lambda labels: all(req(labels) for req in requirements)


def labels_of(obj: dict[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string form of a dotted path in an object ('' when absent), as field selectors see it."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, dict):
            return ""
        current = current.get(part)
        if current is None:
            return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, dict | list):
        return ""
    return str(current)


def parse_field_selector(selector: str | None) -> ObjectMatcher:
    """Compile a field selector string; raises 400 BadRequest when it does not parse."""
    if not selector or not selector.strip():
        return _match_all
    requirements: list[tuple[str, str, bool]] = []
    for part in _split_top_level(selector):
        for op in ("!=", "==", "="):
            if op in part:
                path, _, value = part.partition(op)
                path = path.strip()
                if not path or not re.match(r"^[A-Za-z0-9_.-]+$", path):
                    raise bad_request(f'invalid selector: \'{selector}\'; can\'t understand \'{part}\'')
                requirements.append((path, value.strip(), op == "!="))
                break
        else:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")

    def matches(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, path) == value) != negate for path, value, negate in requirements)

    return matches


def field_equals(selector: str | None, path: str) -> str | None:
    """The value a selector pins `path` to with `=`/`==`, if it does (lets callers use an index)."""
    if not selector:
        return None
    for part in _split_top_level(selector):
        if "!=" in part:
            continue
        for op in ("==", "="):
            if op in part:
                key, _, value = part.partition(op)
                if key.strip() == path:
                    return value.strip()
                break
    return None


def compile_label_selector_object(selector: dict[str, Any] | None, empty_matches_all: bool = True) -> LabelMatcher:
    """Compile a `LabelSelector` object (matchLabels + matchExpressions) as workloads and PDBs use."""
    if selector is None:
        return _match_all if empty_matches_all else (lambda _labels: False)
    checks: list[LabelMatcher] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        checks.append(lambda labels, k=key, v=value: labels.get(k) == v)
    for expr in selector.get("matchExpressions") or []:
        key = expr.get("key", "")
        op = expr.get("operator", "")
        values = frozenset(expr.get("values") or ())
        if op == "In":
            checks.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
        elif op == "NotIn":
            checks.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif op == "Exists":
            checks.append(lambda labels, k=key: k in labels)
        elif op == "DoesNotExist":
            checks.append(lambda labels, k=key: k not in labels)
        else:
            raise ApiError(422, "Invalid", f'"{op}" is not a valid label selector operator')
    if not checks:
        return _match_all if empty_matches_all else (lambda _labels: False)
    return lambda labels: all(check(labels) for check in checks)
