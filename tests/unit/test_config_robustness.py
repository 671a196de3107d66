"""Whatever a document holds, loading it gives NodePools, node classes or errors: never an exception."""

from __future__ import annotations

import copy
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.config import load, parse_documents

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
