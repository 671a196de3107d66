"""The one YAML loader of nodescale: PyYAML's safe loader with the bounds Kubernetes' own decoder has.

PyYAML shares the node an alias names instead of copying it, so nine levels of nine aliases (600 bytes)
load at once but stand for 387 million values: whatever walks the result afterwards (a depth check, a
converter, ``json.dumps``) runs for minutes. Kubernetes' YAML decoder (go-yaml, since the "billion
laughs" fix of CVE-2019-11254) counts every value it decodes, aliases expanded, and refuses a document
once more than a set share of them came from aliases; the share allowed falls as the document grows.
This loader walks each composed document the same way before constructing anything and stops at the
same point. It also refuses what strict decoding refuses (a key twice in one mapping: otherwise the last
silently wins), an anchor that contains its own alias (PyYAML would build a cycle), nesting deeper than
any manifest (PyYAML's composer recurses once per level), and an integer too long to convert.

Every refusal is a ``LimitError``, a ``yaml.MarkedYAMLError`` with the line and column of its cause, so a
caller that already reports YAML errors reports these the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

# Nesting bound on one document (mappings and lists, aliases expanded). Real manifests nest about 10
# levels deep (a pod template's affinity terms); 64 leaves room for anything real and stays far below
# Python's recursion limit, which PyYAML's composer and the json module reach at a few hundred levels.
MAX_DEPTH = 64
# go-yaml's alias budget: below RATIO_LOW decoded values, 99% of them may come from aliases; above
# RATIO_HIGH, 10%; in between the share falls linearly. Nothing is refused before MIN_VALUES values
# or MIN_ALIASED of them from aliases, so small documents with a few anchors always load.
RATIO_LOW = 400_000
RATIO_HIGH = 4_000_000
MIN_VALUES = 1000
MIN_ALIASED = 100
# Python refuses to convert an integer of more than 4300 decimal digits (sys.int_info), and a longer
# hexadecimal one would load and then fail wherever it is printed.
MAX_INT_DIGITS = 4300
_MAX_INT_BITS = 14_284  # about 4300 decimal digits

_INT_TAG = "tag:yaml.org,2002:int"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class LimitError(yaml.MarkedYAMLError):
    """A document refused by one of this loader's bounds; ``problem_mark`` is where."""


def allowed_alias_share(values: int) -> float:
    """The share of ``values`` decoded values that may come from aliases (go-yaml's rule)."""
    if values <= RATIO_LOW:
        return 0.99
    if values >= RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (values - RATIO_LOW) / (RATIO_HIGH - RATIO_LOW)


# libyaml's scanner and parser (PyYAML's C extension) are about ten times faster than PyYAML's Python ones,
# which took most of a second on a 50 KB mapping of 5,000 keys; the composer stays PyYAML's Python one so
# that every node still passes through ``compose_node`` below. Without the extension, the Python parser.
try:
    from yaml.cyaml import CParser as _Parser
except ImportError:  # PyYAML built without libyaml
    _Parser = None


class _PythonBase(yaml.SafeLoader):
    pass


class _CBase(Composer, SafeConstructor, Resolver, *((_Parser,) if _Parser is not None else ())):  # type: ignore[misc]
    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)  # type: ignore[union-attr]
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


class BoundedLoader(_CBase if _Parser is not None else _PythonBase):  # type: ignore[misc]
    """SafeLoader that refuses excessive aliasing, duplicate keys, deep nesting and huge integers."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._anchor_names: dict[int, str] = {}

    def compose_node(self, parent: Node | None, index: object) -> Node:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        event = self.peek_event()
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(None, None, _too_deep(), event.start_mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if getattr(event, "anchor", None):
            self._anchor_names[id(node)] = event.anchor
        return node

    def construct_document(self, node: Node) -> object:
        _check_expansion(node, self._anchor_names)
        self._anchor_names = {}
        return super().construct_document(node)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(ch.isalnum() for ch in node.value)
        if digits > MAX_INT_DIGITS:
            raise LimitError(None, None, _too_long(digits), node.start_mark)
        value = super().construct_yaml_int(node)
        if value.bit_length() > _MAX_INT_BITS:  # hexadecimal, octal, binary: few digits, a huge value
            raise LimitError(None, None, _too_long(int(value.bit_length() * 0.30103) + 1), node.start_mark)
        return value


BoundedLoader.add_constructor(_INT_TAG, BoundedLoader.construct_yaml_int)


def load_all(text: str) -> Iterator[object]:
    """Every document of a YAML stream, as ``yaml.safe_load_all`` gives them, within the bounds."""
    _refuse_deep_brackets(text)
    loader = BoundedLoader(text)
    try:
        while loader.check_data():
            yield loader.get_data()
    finally:
        loader.dispose()


def load(text: str) -> object:
    """The single document of ``text`` (None for none), as ``yaml.safe_load`` gives it, within the bounds."""
    _refuse_deep_brackets(text)
    loader = BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _refuse_deep_brackets(text: str) -> None:
    # PyYAML's scanner reads a run of opening brackets to its end before the composer sees the first,
    # in time growing with the square of its length: 10,000 of them would take seconds to refuse.
    depth = flow_depth(text)
    if depth > MAX_DEPTH:
        raise LimitError(None, None, f"brackets nest {depth} levels deep: {_too_deep()}", None)


def flow_depth(text: str) -> int:
    """How deep ``[`` and ``{`` nest in ``text``, outside quoted strings: a scan with no recursion,
    done before a parser that recurses once per level sees the text. Only brackets, quotes and
    backslashes are looked at, so a text with few of them is scanned at the speed of a regex."""
    depth = deepest = 0
    quote = ""
    escaped_at = -1  # the position a backslash in a double-quoted string escapes
    for match in _FLOW_CHARS.finditer(text):
        ch, at = match.group(), match.start()
        if quote:
            if at == escaped_at:
                continue
            if ch == "\\" and quote == '"':
                escaped_at = at + 1
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


_FLOW_CHARS = re.compile(r"[\[\]{}\"'\\]")



def _check_expansion(root: Node, anchors: dict[int, str]) -> None:
    """Walk the document as a decoder that copies aliases would, without copying: count the values,
    those reached through an alias, the depth; refuse as soon as a bound is passed."""
    values = aliased = 0
    first_seen: set[int] = set()
    expanding: set[int] = set()  # collections on the current path, to catch an anchor inside itself
    # (node, depth, inside an alias, leaving): a "leaving" entry takes its node off the current path.
    stack: list[tuple[Node, int, bool, bool]] = [(root, 1, False, False)]
    while stack:
        node, depth, in_alias, leaving = stack.pop()
        key = id(node)
        if leaving:
            expanding.discard(key)
            continue
        if key in first_seen:  # PyYAML shares the node an alias names: meeting it again is an alias
            if key in expanding:
                name = anchors.get(key, "?")
                raise LimitError(None, None, f"anchor &{name} contains an alias to itself", node.start_mark)
            values += 1
            aliased += in_alias
            in_alias = True
        first_seen.add(key)
        values += 1
        aliased += in_alias
        if aliased > MIN_ALIASED and values > MIN_VALUES and aliased / values > allowed_alias_share(values):
            raise LimitError(None, None, _excessive(values, aliased), node.start_mark)
        if isinstance(node, ScalarNode):
            continue
        if depth > MAX_DEPTH:
            raise LimitError(None, None, _too_deep(), node.start_mark)
        children: list[Node]
        if isinstance(node, MappingNode):
            if not in_alias:
                _refuse_duplicate_keys(node)
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, SequenceNode):
            children = list(node.value)
        else:
            continue
        expanding.add(key)
        stack.append((node, depth, in_alias, True))
        stack.extend((child, depth + 1, in_alias, False) for child in reversed(children))


def _refuse_duplicate_keys(node: MappingNode) -> None:
    """Strict decoding: a key given twice in one mapping is an error (a merged ``<<`` key may be
    overridden, that being what merging is for)."""
    first: dict[tuple[str, str], Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        ident = (key_node.tag, key_node.value)
        if ident in first:
            raise LimitError(
                f"key {key_node.value!r} first given", first[ident].start_mark,
                f"key {key_node.value!r} given again in the same mapping: strict decoding, as Kubernetes "
                "does it, allows each key once",
                key_node.start_mark,
            )
        first[ident] = key_node


def _excessive(values: int, aliased: int) -> str:
    share = allowed_alias_share(values)
    return (f"document contains excessive aliasing: {aliased} of the first {values} values come from aliases, "
            f"more than the {share:.0%} allowed (the limit Kubernetes' YAML decoder sets against alias bombs)")


def _too_deep() -> str:
    return f"nests more than the {MAX_DEPTH} levels allowed (no Kubernetes object comes close)"


def _too_long(digits: int) -> str:
    return f"an integer of {digits} decimal digits: more than the {MAX_INT_DIGITS} allowed"
