"""The replacements a node under way waits for, read from the typed Node's annotations (#29.1)."""

from __future__ import annotations

from nodescale.model.node import ClusterNode
from nodescale.usecases.disrupt.state import REPLACEMENT_ANNOTATION, replacement_ids


def test_the_replacements_are_read_from_the_parsed_annotations() -> None:
    """#29.1: finish_under_way reads the node's annotations from the ClusterNode, not its raw object."""
    view = ClusterNode.from_dict({"metadata": {"name": "n1", "annotations": {REPLACEMENT_ANNOTATION: "i-1,,i-2"}}})
    assert replacement_ids(view.annotations) == ["i-1", "i-2"]
    assert replacement_ids(ClusterNode.from_dict({"metadata": {"name": "n2"}}).annotations) == []
