"""A CRD's additionalPrinterColumns in `kubectl get`'s Table, as kube-apiserver's custom resource table
convertor fills them: each column's JSONPath is evaluated on the object, the first result is the cell
(nil when there is none); a `date` column shows the age of its timestamp, a `string` one the value as
text, `integer`/`number`/`boolean` the value when it has that type.

The JSONPath subset is the one CRD columns use: `.field` steps (a `\\.` inside a name is a dot of the key,
as in `.metadata.labels.node\\.kubernetes\\.io/instance-type`), `[N]` indexes and `[?(@.path=="value")]`
filters over a list.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

Step = tuple[str, Any]
_FILTER = re.compile(r'^\?\(@((?:\.(?:\\.|[^.=!\\])+)+)\s*(==|!=)\s*(?:"([^"]*)"|\'([^\']*)\'|([^)\s]+))\)$')


def _names(text: str) -> list[str]:
    """``.a.b\\.c`` -> ["a", "b.c"]."""
    out, current, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current += text[i + 1]
            i += 2
            continue
        if ch == ".":
            if current:
                out.append(current)
            current = ""
        else:
            current += ch
        i += 1
    if current:
        out.append(current)
    return out


def parse(path: str) -> list[Step]:
    """The steps of a column's JSONPath; ValueError for what this subset does not read."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[Step] = []
    while text:
        bracket = _unescaped_bracket(text)
        head, text = (text, "") if bracket < 0 else (text[:bracket], text[bracket:])
        steps.extend(("field", n) for n in _names(head))
        if not text:
            break
        end = text.index("]")
        inner, text = text[1:end], text[end + 1:]
        steps.append(_bracket(inner))
    return steps


def _unescaped_bracket(text: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "[":
            return i
        i += 1
    return -1


def _bracket(inner: str) -> Step:
    if inner.lstrip("-").isdigit():
        return ("index", int(inner))
    if inner == "*":
        return ("all", None)
    match = _FILTER.match(inner)
    if match is None:
        raise ValueError(f"unsupported JSONPath: [{inner}]")
    value = next(v for v in match.groups()[2:] if v is not None)
    return ("filter", (_names(match.group(1)), match.group(2), value))


def _get(value: Any, names: list[str]) -> Any:
    for name in names:
        if not isinstance(value, dict) or name not in value:
            return None
        value = value[name]
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def find(obj: Any, steps: list[Step]) -> list[Any]:
    """Every value the steps reach from ``obj``."""
    current = [obj]
    for kind, arg in steps:
        found: list[Any] = []
        for value in current:
            if kind == "field" and isinstance(value, dict) and arg in value or kind == "index" and isinstance(value, list) and -len(value) <= arg < len(value):
                found.append(value[arg])
            elif kind == "all" and isinstance(value, list):
                found.extend(value)
            elif kind == "filter" and isinstance(value, list):
                names, op, want = arg
                found.extend(x for x in value if (_text(_get(x, names)) == want) == (op == "=="))
        current = found
    return current


def cell(column: dict[str, Any], obj: dict[str, Any], now: datetime, age: Any) -> Any:
    """One column's cell for ``obj``: None when the path reaches nothing (kubectl prints it empty)."""
    try:
        results = find(obj, parse(str(column.get("jsonPath") or "")))
    except ValueError:
        return None
    if not results or results[0] is None:
        return None
    value, kind = results[0], column.get("type")
    if kind == "string":
        return _text(value)
    if kind == "date":
        return age(value, now) if isinstance(value, str) else None
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "number":
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    return None
