"""Label and field selectors of the local Kubernetes API."""

from __future__ import annotations

import pytest

from sim.kube.errors import ApiError
from sim.kube.selectors import (
    compile_label_selector_object,
    field_equals,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "karpenter.sh/nodepool": "default"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),
        ("app in (db, web)", True),
        ("app in (db,cache)", False),
        ("app notin (db)", True),
        ("missing notin (db)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("app=web,tier in (front,back),karpenter.sh/nodepool", True),
        ("app=web,tier=back", False),
    ],
)
def test_label_selector_semantics(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector)(LABELS) is expected


@pytest.mark.parametrize("selector", ["app in web", "app=we b", "-bad=x", "app in (a,b", "a=b,,c=d"])
def test_bad_label_selectors_are_bad_requests(selector: str) -> None:
    with pytest.raises(ApiError) as excinfo:
        parse_label_selector(selector)
    assert excinfo.value.status == 400 and excinfo.value.reason == "BadRequest"


def test_field_selectors_match_dotted_paths() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1", "hostNetwork": True},
           "status": {"phase": "Running"}}
    assert parse_field_selector("spec.nodeName=n1,status.phase!=Pending")(pod)
    assert parse_field_selector("metadata.namespace==ns")(pod)
    assert not parse_field_selector("spec.nodeName=n2")(pod)
    assert parse_field_selector("spec.nodeName!=n2")(pod)
    assert parse_field_selector("spec.schedulerName=")(pod)  # absent reads as empty
    assert parse_field_selector("spec.hostNetwork=true")(pod)
    assert field_equals("status.phase!=Failed,spec.nodeName=n1", "spec.nodeName") == "n1"
    assert field_equals("spec.nodeName!=n1", "spec.nodeName") is None


def test_bad_field_selector_is_a_bad_request() -> None:
    with pytest.raises(ApiError) as excinfo:
        parse_field_selector("spec.nodeName")
    assert excinfo.value.status == 400


def test_label_selector_objects_as_workloads_and_pdbs_use_them() -> None:
    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                                     {"key": "legacy", "operator": "DoesNotExist"}]}
    assert compile_label_selector_object(selector)(LABELS)
    assert not compile_label_selector_object(selector)({"app": "web", "tier": "back"})
    assert compile_label_selector_object({})({"anything": "x"})
    assert not compile_label_selector_object(None, empty_matches_all=False)(LABELS)
