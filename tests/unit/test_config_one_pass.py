"""`validate` (what `cdk synth` runs on NodePool files) refuses exactly what `load` (what the functions run)
refuses, since both are one pass over the documents (#29.5).

The one thing only `load` does is follow a pool's reference to its node class: at synth the class may be in
another parameter or in the cluster. So every error `load` reports is one `validate` reports too, in the
same order, except errors at a pool's node class reference of a document `validate` found nothing wrong in;
and a document that is no configuration kind is refused by `validate` where `load` passes it on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodescale.config.documents import parse_documents
from nodescale.config.loader import load, validate
from tests.unit.test_capacity_buffers import buffer_doc
from tests.unit.test_config_robustness import junk, paths, replace
from tests.unit.test_config_strict import EXAMPLE_FILES, EXAMPLES, NODEPOOL_V1, PROVISIONER, first, rename
from tests.unit.test_config_validation import NODECLASS_V1, TEMPLATE_V1alpha1, doc, v1_pool, v1alpha5, v1beta1
from tests.unit.test_plan_parity import M5, overlay

REF_PATHS = ("spec.providerRef.name", "spec.template.spec.nodeClassRef.name")
CLASSES = [doc(NODECLASS_V1), doc(TEMPLATE_V1alpha1)]  # "default" of each generation, for the pools below
BUFFER = {"podTemplateRef": {"name": "web"}, "replicas": 1}


def refused_alike(docs: list[Mapping]) -> list:
    """Assert that validate and load refuse the same things in ``docs``; load's errors."""
    sourced = [(f"pools.yaml#{i}", d) for i, d in enumerate(docs)]
    result = load(sourced)
    passed_over = {source for source, _ in result.others}  # not configuration: load passes it on to the caller
    assert all(e.path == "kind" for e in validate(sourced) if e.source in passed_over)
    checked = [e for e in validate(sourced) if e.source not in passed_over]
    loaded = result.errors
    clean = {source for source, _ in sourced} - {e.source for e in checked} - passed_over
    assert [e for e in loaded if e.source not in clean] == checked
    assert all(e.path in REF_PATHS for e in loaded if e.source in clean), [str(e) for e in loaded]
    return loaded


def _no_name(d: dict) -> dict:
    del d["metadata"]["name"]
    return d


# Broken documents of tests/unit/test_config_*.py (and a few more of each kind), each beside node classes
# its pools can refer to.
BROKEN = {
    "two NodeOverlays of one name": [overlay("cheap", M5, price="0.01"), overlay("cheap", M5, weight=5)],
    "a NodeOverlay with a bad price": [overlay("cheap", M5, price="free")],
    "a NodeOverlay setting price and adjustment": [overlay("cheap", M5, price="1", priceAdjustment="-5%")],
    "two CapacityBuffers of one namespace and name": [buffer_doc(BUFFER), buffer_doc(BUFFER)],
    "a CapacityBuffer with a misspelled field": [buffer_doc({"podTemplateRef": {"name": "web"}, "replica": 2})],
    "two NodePools of one name": [v1_pool("team"), v1_pool("team")],
    "two EC2NodeClasses of one name": [doc(NODECLASS_V1), v1_pool("team")],
    "an unknown operator": [v1_pool(requirements=[{"key": "team", "operator": "Like", "values": ["a"]}])],
    "an impossible requirement": [v1_pool(requirements=[{"key": "gpu", "operator": "Exists"},
                                                        {"key": "gpu", "operator": "DoesNotExist"}])],
    "a Provisioner without a name": [_no_name(first(*PROVISIONER))],
    "a misspelled field": [rename(first(*NODEPOOL_V1), "spec.template.spec.requirements", "requirments")],
    "a v1beta1 pool with a bad budget": [v1beta1(disruption={"budgets": [{"nodes": "lots"}]})],
    "a Provisioner with a bad weight": [v1alpha5(weight="heavy")],
    "a misspelled kind": [{**v1_pool(), "kind": "NodePol"}],
    "an unsupported apiVersion": [{**v1alpha5(), "apiVersion": "karpenter.sh/v1"}],
    "a pool whose class is not given": [v1_pool(nodeClassRef={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                              "name": "elsewhere"})],
    "a pool whose class is broken": [v1_pool("team"), {**doc(NODECLASS_V1), "spec": {"role": 5}}],
}


def test_two_overlays_of_one_name_fail_validate_naming_both_definitions():
    """#29.5: validate never collected NodeOverlays, so two of one name passed the synth check and both were
    dropped at run time."""
    twice = [("pools.yaml#0", overlay("cheap", M5, price="0.01")), ("pools.yaml#1", overlay("cheap", M5, weight=5))]
    assert load(twice).overlays == {}
    assert [str(e) for e in validate(twice)] == [
        'pools.yaml#1: metadata.name: NodeOverlay "cheap" is also defined at pools.yaml#0; a name may be defined '
        "once, so neither definition is used"
    ]


@pytest.mark.parametrize("case", list(BROKEN))
def test_validate_refuses_a_broken_document_as_load_does(case: str):
    """#29.5: every broken case is refused, and by validate exactly as by load."""
    assert refused_alike(CLASSES + copy.deepcopy(BROKEN[case]))


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_validate_accepts_an_example_as_load_does(path):
    """#29.5: an example manifest alone (some refer to a sibling file's node class, which only load sees)."""
    refused_alike([d for _, d in parse_documents(path.read_text(), path.name)])


# Every example manifest, and an overlay and a buffer since no example has them.
ALL_EXAMPLES = [d for path in EXAMPLE_FILES for _, d in parse_documents(path.read_text(), path.name)] + [
    overlay("cheap", M5, priceAdjustment="-10%"), buffer_doc(BUFFER)
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_field_of_any_example_replaced_by_junk_is_refused_alike(data):
    """#29.5 as a property: every example manifest together (so names are also defined twice), one field of
    one of them replaced by junk, and maybe that document given twice."""
    docs = copy.deepcopy(ALL_EXAMPLES)
    index = data.draw(st.integers(0, len(docs) - 1))
    if data.draw(st.booleans()):
        docs.append(copy.deepcopy(docs[index]))
    where = data.draw(st.sampled_from(list(paths(docs[index]))))
    docs[index] = replace(docs[index], where, data.draw(junk))
    refused_alike(docs)
