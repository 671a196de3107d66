"""YAML/JSON text to Kubernetes objects, each tagged with where it came from."""

from __future__ import annotations

import json
from collections.abc import Mapping

import yaml

from .errors import ConfigError, DocumentError


def parse_documents(text: str, source: str) -> list[tuple[str, dict]]:
    """Every object in ``text`` (YAML multi-document or JSON), as ``(f"{source}#{i}", object)``.

    ``i`` counts the documents from 0 as YAML does; empty documents are skipped; a ``kind: List``
    (what ``kubectl get -o yaml`` prints) or a JSON array is opened up into its items.
    Raises DocumentError naming the line and column when the text is not YAML or JSON.
    """
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
