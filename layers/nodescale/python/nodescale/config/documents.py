"""YAML/JSON text to Kubernetes objects, each tagged with where it came from."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping

import yaml

from . import boundedyaml
from .boundedyaml import flow_depth
from .errors import ConfigError, DocumentError, show

# Bounds on one source, so that a broken or hostile parameter is an error of its own and never takes
# the parser (and with it every other pool) down. SSM parameter values are at most 8 KB (advanced tier)
# and Kubernetes objects at most about 1.5 MB (etcd's request limit); -f files may hold many objects,
# hence the larger text bound. The bounds on one document (nesting, aliases, keys, integers) are
# boundedyaml's, the one YAML loader.
MAX_TEXT_BYTES = 64 * 1024 * 1024
MAX_DEPTH = boundedyaml.MAX_DEPTH
# A line that starts a YAML document: where the documents of a broken stream are told apart.
_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)


def parse_documents(text: str, source: str) -> list[tuple[str, dict]]:
    """Every object in ``text`` (YAML multi-document or JSON), as ``(f"{source}#{i}", object)``.

    ``i`` counts the documents from 0 as YAML does; empty documents are skipped; a ``kind: List``
    (what ``kubectl get -o yaml`` prints) or a JSON array is opened up into its items.
    Raises DocumentError for the first document that cannot be read (naming its line and column);
    read_documents gives the others as well.
    """
    docs, errors = read_documents(text, source)
    if errors:
        raise DocumentError(errors[0])
    return docs


def read_documents(text: str, source: str) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    """parse_documents, one document at a time: the objects of every good document, and an error for
    each bad one (not YAML, beyond a bound, not an object), so one bad document never hides the others."""
    if len(text) > MAX_TEXT_BYTES:
        return [], [ConfigError(source, "", f"{len(text)} characters: more than the {MAX_TEXT_BYTES} allowed")]
    if text.lstrip()[:1] in ("{", "["):
        value = _json(text)
        if value is not _NOT_JSON:
            return _objects([(f"{source}#0", value)])
    try:
        docs = list(boundedyaml.load_all(text))
    except (yaml.YAMLError, RecursionError):
        return _read_each(text, source)
    return _objects([(f"{source}#{i}", doc) for i, doc in enumerate(docs)])


_NOT_JSON = object()


def _json(text: str) -> object:
    """The JSON value of ``text``, or _NOT_JSON when YAML should read it: on an error (YAML's names the
    line), a key given twice or nesting too deep for the json module (YAML's loader refuses both by name)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key given twice")
    return out


def _read_each(text: str, source: str) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    """A stream with a bad document in it, read one document at a time: each part from a ``---`` line to
    the next is read on its own, and what is wrong is an error of that part alone."""
    starts = [m.start() for m in _DOCUMENT_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)  # what comes before the first ``---``: a document if it holds anything
    starts.append(len(text))
    several = len(starts) > 2
    docs: list[tuple[str, object]] = []
    errors: list[ConfigError] = []
    index = line = 0
    for begin, end in zip(starts, starts[1:], strict=False):
        part = text[begin:end]
        values, problem = _read_part(part, line)
        if problem is not None:
            errors.append(ConfigError(f"{source}#{index}" if several else source, "", problem))
            index += 1
        for value in values:
            docs.append((f"{source}#{index}", value))
            index += 1
        line += part.count("\n")
    objects, more = _objects(docs)
    return objects, errors + more


def _read_part(part: str, first_line: int) -> tuple[list[object], str | None]:
    """The documents of one part of a stream, or why it cannot be read (lines counted in the stream)."""
    depth = flow_depth(part)
    if depth > MAX_DEPTH:
        return [], _too_deep(depth)  # the bracket scan names the depth where the loader could only say "more"
    try:
        return list(boundedyaml.load_all(part)), None
    except yaml.YAMLError as exc:
        return [], _yaml_problem(exc, first_line)
    except RecursionError:
        return [], _too_deep(None)


def _objects(docs: list[tuple[str, object]]) -> tuple[list[tuple[str, dict]], list[ConfigError]]:
    out: list[tuple[str, dict]] = []
    errors: list[ConfigError] = []
    for where, doc in docs:
        if doc is None:
            continue
        depth = nesting_depth(doc)
        if depth > MAX_DEPTH:
            errors.append(ConfigError(where, "", _too_deep(depth)))
        elif isinstance(doc, list):
            _items(doc, where, "[{}]", out, errors)
        elif not isinstance(doc, Mapping):
            errors.append(ConfigError(
                where, "", f"expected a Kubernetes object (a mapping with apiVersion and kind), got {_short(doc)}"
            ))
        elif doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            _items(doc["items"], where, ".items[{}]", out, errors)
        else:
            out.append((where, dict(doc)))
    return out, errors


def _items(values: list, where: str, fmt: str, out: list[tuple[str, dict]], errors: list[ConfigError]) -> None:
    for j, item in enumerate(values):
        if isinstance(item, Mapping):
            out.append((where + fmt.format(j), dict(item)))
        else:
            errors.append(ConfigError(where + fmt.format(j), "", f"expected a Kubernetes object, got {_short(item)}"))


def _short(value: object) -> str:
    return show(value)[:60]


def _yaml_problem(exc: yaml.YAMLError, first_line: int = 0) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if isinstance(exc, boundedyaml.LimitError) and mark is not None:
        where = f" ({context} on line {context_mark.line + 1 + first_line})" if context and context_mark else ""
        return f"line {mark.line + 1 + first_line}, column {mark.column + 1}: {problem}{where}"
    # Where the unfinished construct began: libyaml marks a problem at the end of the input on the line after
    # the last (PyYAML does so too when the text ends with a newline), which alone would not find it.
    began = f" at line {context_mark.line + 1 + first_line}, column {context_mark.column + 1}" if context_mark else ""
    detail = f"{context}{began}: {problem}" if context else problem
    if mark is not None:
        return f"line {mark.line + 1 + first_line}, column {mark.column + 1}: not valid YAML ({detail})"
    return f"not valid YAML ({detail})"


def nesting_depth(value: object) -> int:
    """How deep mappings and lists nest in a parsed object, walked without recursion. A mapping or list
    met twice (YAML aliases share them) is walked once: its depth is remembered, so a few hundred shared
    references never become millions of visits."""
    depth_of: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        item, leaving = stack.pop()
        if not isinstance(item, (Mapping, list)):
            continue
        key = id(item)
        children = list(item.values()) if isinstance(item, Mapping) else item
        if leaving:
            on_path.discard(key)
            depth_of[key] = 1 + max((depth_of.get(id(c), 0) for c in children), default=0)
            continue
        if key in depth_of:
            continue
        if key in on_path:  # an object inside itself nests without end; no loader here builds one
            return sys.maxsize
        on_path.add(key)
        stack.append((item, True))
        stack.extend((c, False) for c in children)
    return depth_of.get(id(value), 0)


def _too_deep(depth: int | None) -> str:
    found = f"nests {depth} levels deep" if depth is not None else "nests too deep to parse"
    return f"{found}: more than the {MAX_DEPTH} levels allowed (no NodePool or node class comes close)"
