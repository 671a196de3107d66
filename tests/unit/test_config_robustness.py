"""Whatever a document holds, loading it gives NodePools, node classes or errors: never an exception."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.config.documents import parse_documents
from nodescale.config.loader import load

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
BASE = [
    d
    for name in ("karpenter-v1/default.yaml", "karpenter-v1beta1/gpu-and-team-pools.yaml",
                 "karpenter-v1alpha5/node-template-options.yaml", "karpenter-v1alpha5/banana-weighted-tainted.yaml")
    for _, d in parse_documents((EXAMPLES / name).read_text(), name)
]

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, (*prefix, i))


def replace(doc, path, new):
    if not path:
        return new
    out = copy.deepcopy(doc)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_field_replaced_by_junk_is_an_error_or_valid(data):
    index = data.draw(st.integers(0, len(BASE) - 1))
    base = BASE[index]
    where = data.draw(st.sampled_from(list(paths(base))))
    mutated = replace(base, where, data.draw(junk))
    docs = [(f"d#{i}", mutated if i == index else d) for i, d in enumerate(BASE)]
    result = load(docs)
    for error in result.errors:
        assert error.source.startswith("d#") and str(error)
    if result.errors == [] and isinstance(mutated, dict):
        assert result.nodepools or result.nodeclasses or result.others


class TestBounds:
    """A document nested deeper than any manifest is an error naming it, whatever its syntax; never a
    RecursionError that would take every other pool down with it."""

    SHAPES = {
        "json array": "[" * 1000 + "]" * 1000,
        "json object": '{"a":' * 1000 + "1" + "}" * 1000,
        "yaml flow under a key": "spec: " + "[" * 1000 + "]" * 1000,
        "yaml block": "".join(" " * i + "a:\n" for i in range(300)) + " " * 300 + "b: 1\n",
    }

    def test_each_shape_is_one_error_of_its_document(self):
        import pytest

        from nodescale.config.documents import DocumentError

        for shape, text in self.SHAPES.items():
            with pytest.raises(DocumentError) as caught:
                parse_documents(text, "ssm:/pools/deep")
            assert caught.value.error.source.startswith("ssm:/pools/deep"), shape
            assert "levels" in caught.value.error.message and "64" in caught.value.error.message, shape

    def test_brackets_inside_quoted_strings_do_not_count(self):
        docs = parse_documents('metadata: {name: "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', "f")
        assert docs[0][1]["metadata"]["name"].startswith("[[[")

    def test_a_deep_object_from_the_cluster_is_refused_before_conversion(self):
        good = parse_documents((EXAMPLES / "karpenter-v1/default.yaml").read_text(), "v1")
        pool = next(d for _, d in good if d["kind"] == "NodePool")
        deep = copy.deepcopy(pool)
        deep["metadata"]["name"] = "deep"
        inner: dict = {}
        deep["spec"]["template"]["metadata"] = {"labels": inner}
        for _ in range(200):
            inner["x"] = {}
            inner = inner["x"]
        result = load([("cluster:NodePool/deep", deep), *good])
        assert [(e.source, "levels deep" in e.message) for e in result.errors] == [("cluster:NodePool/deep", True)]
        assert list(result.nodepools) == [pool["metadata"]["name"]]
