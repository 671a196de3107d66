"""YAML/JSON text to Kubernetes objects, each tagged with where it came from."""

from __future__ import annotations

import json
from collections.abc import Mapping

import yaml

from .errors import ConfigError, DocumentError

# Bounds on one document, so that a broken or hostile parameter is an error of its own and never takes
# the parser (and with it every other pool) down. SSM parameter values are at most 8 KB (advanced tier)
# and Kubernetes objects at most about 1.5 MB (etcd's request limit); -f files may hold many objects,
# hence the larger text bound. Real manifests nest about 10 levels deep (a pod template's affinity
# terms); 64 leaves room for anything real and stays far below Python's recursion limit, which PyYAML
# and the json module would otherwise hit at a few hundred levels.
MAX_TEXT_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64


def parse_documents(text: str, source: str) -> list[tuple[str, dict]]:
    """Every object in ``text`` (YAML multi-document or JSON), as ``(f"{source}#{i}", object)``.

    ``i`` counts the documents from 0 as YAML does; empty documents are skipped; a ``kind: List``
    (what ``kubectl get -o yaml`` prints) or a JSON array is opened up into its items.
    Raises DocumentError naming the line and column when the text is not YAML or JSON.
    """
    if len(text) > MAX_TEXT_BYTES:
        raise DocumentError(ConfigError(source, "", f"{len(text)} characters: more than the {MAX_TEXT_BYTES} allowed"))
    depth = flow_depth(text)
    if depth > MAX_DEPTH:
        raise DocumentError(ConfigError(source, "", _too_deep(depth)))
    try:
        return _parse(text, source)
    except RecursionError:  # block-style nesting the bracket scan cannot see
        raise DocumentError(ConfigError(source, "", _too_deep(None))) from None


def _parse(text: str, source: str) -> list[tuple[str, dict]]:
    stripped = text.lstrip()
    parsed_json = False
    docs: list[object] = []
    if stripped[:1] in ("{", "["):
        try:
            value = json.loads(text)
        except ValueError:
            pass  # YAML is a superset of most JSON and reports errors with a line number
        else:
            docs, parsed_json = [value], True
    if not parsed_json:
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise DocumentError(ConfigError(source, "", _yaml_problem(exc))) from None
    out: list[tuple[str, dict]] = []
    for i, doc in enumerate(docs):
        where = f"{source}#{i}"
        if doc is None:
            continue
        depth = nesting_depth(doc)
        if depth > MAX_DEPTH:
            raise DocumentError(ConfigError(where, "", _too_deep(depth)))
        if isinstance(doc, list):
            out.extend(_items(doc, where, "[{}]"))
        elif not isinstance(doc, Mapping):
            raise DocumentError(
                ConfigError(where, "", f"expected a Kubernetes object (a mapping with apiVersion and kind), got {doc!r:.60}")
            )
        elif doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(_items(doc["items"], where, ".items[{}]"))
        else:
            out.append((where, dict(doc)))
    return out


def _items(values: list, where: str, fmt: str) -> list[tuple[str, dict]]:
    out = []
    for j, item in enumerate(values):
        if not isinstance(item, Mapping):
            raise DocumentError(
                ConfigError(where + fmt.format(j), "", f"expected a Kubernetes object, got {item!r:.60}")
            )
        out.append((where + fmt.format(j), dict(item)))
    return out


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    detail = f"{context}: {problem}" if context else problem
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: not valid YAML ({detail})"
    return f"not valid YAML ({detail})"


def flow_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest in ``text``, outside quoted strings: a scan with no recursion,
    done before a parser that recurses once per level sees the text."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def nesting_depth(value: object) -> int:
    """How deep mappings and lists nest in a parsed object, walked without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _too_deep(depth: int | None) -> str:
    found = f"nests {depth} levels deep" if depth is not None else "nests too deep to parse"
    return f"{found}: more than the {MAX_DEPTH} levels allowed (no NodePool or node class comes close)"
