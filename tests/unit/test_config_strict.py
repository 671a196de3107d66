"""Strict manifests: unknown fields and misspelled kinds are refused with the full path and the likely name.

Upstream behaviour restated: `kubectl apply --validate=strict` (the default since kubectl 1.25 asks the API
server for strict field validation) against Karpenter's CRDs refuses an object with a field its
generation's OpenAPI schema lacks (`unknown field "spec.requirments"`), and an unknown kind has no CRD
to be applied to. nodescale reads the same manifests from SSM and -f files, where no API server checks
them, so it refuses them itself, naming the valid field where one is close.
"""

from __future__ import annotations

import copy
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from nodescale.aws.nodepool_parameters import load_from_ssm
from nodescale.config.documents import parse_documents
from nodescale.config.loader import load, validate
from nodescale.config.schema import SCHEMAS
from nodescale.config.strict import check_fields, misspelled_kind

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("karpenter-*/*.yaml"))


def examples(name: str) -> list[dict]:
    return [d for _, d in parse_documents((EXAMPLES / name).read_text(), name)]


def first(name: str, kind: str) -> dict:
    return copy.deepcopy(next(d for d in examples(name) if d["kind"] == kind))


PROVISIONER = ("karpenter-v1alpha5/default-spot.yaml", "Provisioner")
NODE_TEMPLATE = ("karpenter-v1alpha5/default-spot.yaml", "AWSNodeTemplate")
NODEPOOL_V1BETA1 = ("karpenter-v1beta1/gpu-and-team-pools.yaml", "NodePool")
NODECLASS_V1BETA1 = ("karpenter-v1beta1/gpu-and-team-pools.yaml", "EC2NodeClass")
NODEPOOL_V1 = ("karpenter-v1/default.yaml", "NodePool")
NODECLASS_V1 = ("karpenter-v1/default.yaml", "EC2NodeClass")


def rename(doc: dict, path: str, new: str) -> dict:
    """``doc`` with the field at dotted ``path`` (list items as [i]) renamed to ``new``, its value kept."""
    *parents, last = path.replace("[", ".[").split(".")
    node = doc
    for part in parents:
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    node[new] = node.pop(last)
    return doc


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_example_passes_unchanged(path: Path):
    docs = parse_documents(path.read_text(), path.name)
    assert docs
    for source, doc in docs:
        assert (doc["apiVersion"], doc["kind"]) in SCHEMAS
        assert check_fields(doc, source) == []
    assert validate(docs) == []


@pytest.mark.parametrize(
    ("example", "field", "typo", "path", "message"),
    [
        # v1alpha5 Provisioner / v1alpha1 AWSNodeTemplate (Karpenter v0.27-v0.31 CRDs)
        (PROVISIONER, "spec.requirements", "requirments", "spec.requirments", "did you mean requirements?"),
        (PROVISIONER, "spec.ttlSecondsAfterEmpty", "ttlSecondAfterEmpty", "spec.ttlSecondAfterEmpty",
         "did you mean ttlSecondsAfterEmpty?"),
        (PROVISIONER, "spec.providerRef", "providerref", "spec.providerref", "did you mean providerRef?"),
        (PROVISIONER, "spec.requirements[0].operator", "operater", "spec.requirements[0].operater",
         "did you mean operator?"),
        (PROVISIONER, "metadata.name", "nmae", "metadata.nmae", "did you mean name?"),
        (NODE_TEMPLATE, "spec.subnetSelector", "subnetSelectors", "spec.subnetSelectors", "did you mean subnetSelector?"),
        # v1beta1 NodePool / EC2NodeClass (v0.32-v0.37)
        (NODEPOOL_V1BETA1, "spec.template.spec.requirements", "requirments", "spec.template.spec.requirments",
         "did you mean requirements?"),
        (NODEPOOL_V1BETA1, "spec.disruption.consolidateAfter", "consolidateAftr", "spec.disruption.consolidateAftr",
         "did you mean consolidateAfter?"),
        (NODEPOOL_V1BETA1, "spec.template.spec.taints[0].effect", "efect", "spec.template.spec.taints[0].efect",
         "did you mean effect?"),
        (NODECLASS_V1BETA1, "spec.amiFamily", "amiFamilly", "spec.amiFamilly", "did you mean amiFamily?"),
        # v1 NodePool / EC2NodeClass (v1.x)
        (NODEPOOL_V1, "spec.template.spec.requirements", "requirments", "spec.template.spec.requirments",
         "did you mean requirements?"),
        (NODEPOOL_V1, "spec.disruption.consolidateAfter", "consolidateAftr", "spec.disruption.consolidateAftr",
         "did you mean consolidateAfter?"),
        (NODEPOOL_V1, "spec.disruption.budgets[1].reasons", "reason", "spec.disruption.budgets[1].reason",
         "did you mean reasons?"),
        (NODEPOOL_V1, "spec.template.metadata.labels", "lables", "spec.template.metadata.lables", "did you mean labels?"),
        (NODECLASS_V1, "spec.securityGroupSelectorTerms", "securityGroupSelectorTerm",
         "spec.securityGroupSelectorTerm", "did you mean securityGroupSelectorTerms?"),
        (NODECLASS_V1, "spec.metadataOptions.httpTokens", "httpToken", "spec.metadataOptions.httpToken",
         "did you mean httpTokens?"),
    ],
)
def test_a_misspelled_field_is_refused_with_its_full_path_and_the_valid_name(example, field, typo, path, message):
    # kubectl apply --validate=strict against Karpenter's CRD: `unknown field "<path>"`.
    doc = rename(first(*example), field, typo)
    result = load([("f.yaml#0", doc)])
    assert result.nodepools == {} and result.nodeclasses == {}
    assert [str(e) for e in result.errors] == [f"f.yaml#0: {path}: unknown field; {message}"]


def test_nested_fields_of_each_generation_are_named_in_full():
    pool = first(*NODEPOOL_V1)
    pool["spec"]["template"]["spec"]["requirements"][2]["minValue"] = 2
    pool["spec"]["template"]["spec"]["nodeClassRef"]["apiVersion"] = "karpenter.k8s.aws/v1"  # v1beta1's ref shape
    nc = first(*NODECLASS_V1)
    nc["spec"]["blockDeviceMappings"] = [{"deviceName": "/dev/xvda", "ebs": {"volumeSze": "20Gi"}}]
    nc["spec"]["subnetSelectorTerms"][0]["tag"] = {"a": "b"}
    errors = [str(e) for e in check_fields(pool, "p") + check_fields(nc, "c")]
    assert errors == [
        "p: spec.template.spec.nodeClassRef.apiVersion: unknown field; allowed are group, kind, name",
        "p: spec.template.spec.requirements[2].minValue: unknown field; did you mean minValues?",
        "c: spec.subnetSelectorTerms[0].tag: unknown field; did you mean tags?",
        "c: spec.blockDeviceMappings[0].ebs.volumeSze: unknown field; did you mean volumeSize?",
    ]


def test_a_field_of_another_generation_is_refused_in_this_one():
    # Karpenter's v1beta1 kubelet block dropped containerRuntime; v1 moved expireAfter into the template.
    beta = first(*NODEPOOL_V1BETA1)
    beta["spec"]["template"]["spec"]["kubelet"] = {"containerRuntime": "containerd"}
    beta["spec"]["template"]["spec"]["expireAfter"] = "720h"
    legacy = first(*PROVISIONER)
    legacy["spec"]["kubeletConfiguration"] = {"containerRuntime": "containerd"}
    node_template = first(*NODE_TEMPLATE)
    node_template["spec"]["role"] = "NodeRole"
    assert [(e.path, e.message.split(";")[0]) for e in check_fields(beta, "b") + check_fields(node_template, "t")] == [
        ("spec.template.spec.kubelet.containerRuntime", "unknown field"),
        ("spec.template.spec.expireAfter", "unknown field"),
        ("spec.role", "unknown field"),
    ]
    assert check_fields(legacy, "l") == []


def test_without_a_close_name_the_allowed_fields_are_listed():
    pool = first(*NODEPOOL_V1)
    pool["spec"]["zzz"] = 1
    (error,) = check_fields(pool, "p")
    assert error.path == "spec.zzz"
    assert error.message == "unknown field; allowed are disruption, limits, replicas, template, weight"


def test_maps_with_free_keys_and_server_written_fields_accept_anything():
    pool = first(*NODEPOOL_V1)
    pool["metadata"].update(
        {
            "labels": {"anything.example.com/at-all": "x"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            "uid": "0b1c",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "finalizers": ["karpenter.sh/termination"],
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:whatever": {}}}}],
            "ownerReferences": [{"kind": "Anything", "name": "x", "uid": "1", "apiVersion": "v1"}],
        }
    )
    pool["spec"]["template"]["metadata"]["annotations"] = {"free.example.com/key": "v"}
    pool["spec"]["limits"] = {"nvidia.com/gpu": 8, "cpu": 10}
    pool["status"] = {"conditions": [{"type": "Ready", "anyField": True}], "resources": {"cpu": "4"}}
    nc = first(*NODECLASS_V1)
    nc["spec"]["tags"] = {"Any Tag With Spaces": "v"}
    nc["spec"]["subnetSelectorTerms"] = [{"tags": {"whatever-key": "*"}}]
    nc["spec"]["kubelet"] = {"systemReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"}}
    legacy = first(*PROVISIONER)
    legacy["spec"]["labels"] = {"team": "a"}
    legacy["spec"]["limits"]["resources"]["example.com/widget"] = 3
    template = first(*NODE_TEMPLATE)
    template["spec"]["amiSelector"] = {"aws::name": "my-ami", "custom-tag": "x"}
    for doc in (pool, nc, legacy, template):
        assert check_fields(doc, "x") == [], doc["kind"]
    result = load([("p", pool), ("c", nc)])
    assert result.errors == [] and list(result.nodepools) == ["default"]


def test_a_document_with_an_unknown_field_is_refused_whole_with_every_problem_listed():
    pool = first(*NODEPOOL_V1)
    rename(pool, "spec.template.spec.requirements", "requirments")
    pool["spec"]["weight"] = 500
    pool["spec"]["disruption"]["consolidateAftr"] = "1m"
    good = first(*NODEPOOL_V1)
    good["metadata"]["name"] = "good"
    result = load([("bad#0", pool), ("good#0", good), ("nc#0", first(*NODECLASS_V1))])
    assert list(result.nodepools) == ["good"]
    assert [(e.source, e.path) for e in result.errors] == [
        ("bad#0", "spec.template.spec.requirments"),
        ("bad#0", "spec.disruption.consolidateAftr"),
        # the converter's findings come too (the weight out of range), but not "requirements is required":
        # the misspelling already says so
        ("bad#0", "spec.weight"),
    ]


def test_a_node_class_with_an_unknown_field_is_invalid_for_its_pools():
    nc = first(*NODECLASS_V1)
    nc["spec"]["rolee"] = "x"
    result = load([("nc#0", nc), ("pool#0", first(*NODEPOOL_V1))])
    assert result.nodepools == {} and result.nodeclasses == {}
    assert [str(e) for e in result.errors] == [
        "nc#0: spec.rolee: unknown field; did you mean role?",
        'pool#0: spec.template.spec.nodeClassRef.name: EC2NodeClass "default" (at nc#0) is invalid; fix its errors first',
    ]


def test_a_field_nodescale_does_not_support_is_refused_by_name():
    nc = first(*NODECLASS_V1)
    nc["spec"]["amiSelectorTerms"] = [{"ssmParameter": "/aws/service/eks/optimized-ami/x"}]
    error = load([("nc", nc)]).errors[0]
    assert error.path == "spec.amiSelectorTerms[0].ssmParameter" and "not supported by nodescale" in error.message


class TestKinds:
    @pytest.mark.parametrize(
        ("kind", "meant"),
        [("Provisoner", "Provisioner"), ("NodePol", "NodePool"), ("nodepool", "NodePool"), ("Nodepools", "NodePool"),
         ("EC2NodeClas", "EC2NodeClass"), ("NodeClass", "EC2NodeClass"), ("AWSNodeTemplates", "AWSNodeTemplate")],
    )
    def test_near_misses_name_the_karpenter_kind(self, kind, meant):
        assert misspelled_kind(kind) == meant

    @pytest.mark.parametrize("kind", ["Node", "Pod", "NodeClaim", "Deployment", "Provisioner", "NodePool", None, 5])
    def test_real_kinds_are_no_misspelling(self, kind):
        assert misspelled_kind(kind) is None

    def test_a_misspelled_kind_is_an_error_whatever_its_api_version(self):
        # No CRD serves `Provisoner`: kubectl answers `no matches for kind "Provisoner" in version ...`.
        legacy = first(*PROVISIONER)
        docs = [
            ("a", {**legacy, "kind": "Provisoner"}),
            ("b", {**legacy, "apiVersion": "v1", "kind": "NodePol"}),
            ("c", {**legacy, "apiVersion": "v1"}),
        ]
        result = load(docs)
        assert result.others == [] and result.nodepools == {}
        assert [(e.source, e.path) for e in result.errors] == [("a", "kind"), ("b", "kind"), ("c", "apiVersion")]
        assert result.errors[0].message.startswith(
            '"Provisoner" (apiVersion "karpenter.sh/v1alpha5") is not a kind nodescale reads; did you mean Provisioner? '
            "allowed are Provisioner (karpenter.sh/v1alpha5)"
        )
        assert "did you mean NodePool?" in result.errors[1].message
        assert result.errors[2].message == '"v1" is not supported for Provisioner; supported are karpenter.sh/v1alpha5'

    def test_workloads_and_karpenter_state_are_still_passed_on(self):
        docs = [
            ("n", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}),
            ("c", {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"}}),
        ]
        assert load(docs).others == docs


def test_validate_checks_documents_on_their_own_and_names_twice_defined_names():
    legacy = first(*PROVISIONER)
    del legacy["metadata"]["name"]
    pool = first(*NODEPOOL_V1)  # refers to a class it does not bring: fine, it may be in another parameter
    twice = first(*NODEPOOL_V1)
    assert validate([("a", pool)]) == []
    assert [(e.source, e.path) for e in validate([("a", legacy), ("b", pool), ("c", twice)])] == [
        ("a", "metadata.name"),
        ("c", "metadata.name"),
    ]
    assert [e.path for e in validate([("d", {"apiVersion": "apps/v1", "kind": "Deployment"})])] == ["kind"]


@pytest.mark.adapter  # moto's SSM
def test_an_ssm_parameter_with_a_typo_is_an_error_of_its_own_and_the_good_ones_still_load():
    text = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()
    typo = text.replace("name: default", "name: other").replace("ttlSecondsAfterEmpty", "ttlSecondAfterEmpty")
    with mock_aws():
        ssm = boto3.client("ssm", region_name="us-east-1")
        ssm.put_parameter(Name="/ns/good", Type="String", Value=text)
        ssm.put_parameter(Name="/ns/typo", Type="String", Value=typo)
        result = load_from_ssm(ssm, "/ns")
    assert list(result.nodepools) == ["default"] and list(result.nodeclasses) == ["default", "other"]
    assert [str(e) for e in result.errors] == [
        "ssm:/ns/typo#0: spec.ttlSecondAfterEmpty: unknown field; did you mean ttlSecondsAfterEmpty?"
    ]


def test_the_unknown_field_check_is_yaml_safe():
    # Keys YAML reads as other types (numbers, booleans) are unknown fields too, not a crash.
    doc = yaml.safe_load("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {1: x, 2.5: y}\n")
    assert [e.path for e in check_fields(doc, "s")] == ["spec.1", "spec.2.5"]


def test_a_misspelling_beside_the_real_field_hides_none_of_its_problems():
    pool = first(*NODEPOOL_V1)
    tspec = pool["spec"]["template"]["spec"]
    tspec["requirments"] = []
    tspec["requirements"][0]["operator"] = "Within"
    errors = load([("p", pool), ("nc", first(*NODECLASS_V1))]).errors
    assert [e.path for e in errors] == ["spec.template.spec.requirments", "spec.template.spec.requirements[0].operator"]
