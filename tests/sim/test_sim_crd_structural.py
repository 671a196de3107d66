"""#28.4: sim's API server treats a custom resource as kube-apiserver does with a structural CRD schema:
fields the schema lacks are pruned on create and update (under fieldValidation=Strict, which kubectl
sends, server.py refuses them first), nulls are dropped, and a value of the wrong type is a 422 naming
the field. With the old schemas (x-kubernetes-preserve-unknown-fields on spec) all were stored as sent.
"""

from __future__ import annotations

import pytest

from sim.clock import Clock
from sim.kube.crds import install_karpenter_crds
from sim.kube.errors import ApiError
from sim.kube.store import Store

PROVISIONERS = "karpenter.sh/v1alpha5/provisioners"


@pytest.fixture
def store() -> Store:
    s = Store(Clock())
    install_karpenter_crds(s)
    return s


def test_unknown_fields_are_pruned_and_nulls_dropped(store: Store) -> None:
    created = store.create(PROVISIONERS, {
        "metadata": {"name": "p"},
        "spec": {"requirments": [], "weight": None, "providerRef": {"name": "default", "nmae": "x"},
                 "provider": {"anything": {"goes": 1}}, "limits": {"resources": {"cpu": 1000}}},
    })
    assert created["spec"] == {"providerRef": {"name": "default"}, "provider": {"anything": {"goes": 1}},
                               "limits": {"resources": {"cpu": 1000}}}
    updated = store.update(PROVISIONERS, {**created, "spec": {**created["spec"], "ttlSecondAfterEmpty": 30}})
    assert "ttlSecondAfterEmpty" not in updated["spec"]


def test_a_wrong_type_is_422_with_a_cause_per_field(store: Store) -> None:
    with pytest.raises(ApiError) as refused:
        store.create("karpenter.sh/v1/nodepools", {
            "metadata": {"name": "n"},
            "spec": {"weight": "ten", "template": {"spec": {"requirements": [{"key": "k", "operator": "In",
                                                                              "values": [1]}]}}},
        })
    error = refused.value
    assert error.status == 422 and error.reason == "Invalid"
    assert [c["field"] for c in error.details["causes"]] == [
        "spec.weight", "spec.template.spec.requirements[0].values[0]"]
    assert error.message == (
        'NodePool.karpenter.sh "n" is invalid: [spec.weight: Invalid value: "string": spec.weight in body must be '
        'of type integer: "string", spec.template.spec.requirements[0].values[0]: Invalid value: "integer": '
        'spec.template.spec.requirements[0].values[0] in body must be of type string: "integer"]')
    assert store.list("karpenter.sh/v1/nodepools") == []
