"""Configuration from text, SSM parameters and the cluster, alone and together."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from kubernetes.client.exceptions import ApiException
from moto import mock_aws

from nodescale.aws.nodepool_parameters import load_from_ssm
from nodescale.config.documents import parse_documents
from nodescale.config.errors import DocumentError
from nodescale.config.loader import load
from nodescale.k8s.nodepool_objects import load_from_cluster, read_cluster_documents
from nodescale.model import labels as wk
from nodescale.usecases.nodepool_sources import load_all

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()


class TestParseDocuments:
    def test_multi_document_yaml(self):
        docs = parse_documents(example("karpenter-v1alpha5/windows.yaml"), "w.yaml")
        assert [src for src, _ in docs] == ["w.yaml#0", "w.yaml#1", "w.yaml#2", "w.yaml#3"]
        assert [d["kind"] for _, d in docs] == ["Provisioner", "AWSNodeTemplate"] * 2

    def test_empty_documents_are_skipped_but_counted(self):
        docs = parse_documents("---\n---\nkind: A\n---\n# just a comment\n---\nkind: B\n", "f")
        assert docs == [("f#1", {"kind": "A"}), ("f#3", {"kind": "B"})]
        assert parse_documents("", "f") == []

    def test_json_object_array_and_list_kind(self):
        assert parse_documents('{"kind": "A"}', "j") == [("j#0", {"kind": "A"})]
        assert parse_documents('[{"kind": "A"}, {"kind": "B"}]', "j") == [("j#0[0]", {"kind": "A"}), ("j#0[1]", {"kind": "B"})]
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": [{"kind": "A"}]})
        assert parse_documents(listed, "j") == [("j#0.items[0]", {"kind": "A"})]

    def test_yaml_error_names_source_line_and_column(self):
        text = "apiVersion: karpenter.sh/v1\nkind: NodePool\nspec:\n  weight: [1\n"
        with pytest.raises(DocumentError) as exc:
            parse_documents(text, "ssm:/nodescale/demo/nodepools/team")
        err = exc.value.error
        assert err.source == "ssm:/nodescale/demo/nodepools/team"
        assert str(err).startswith("ssm:/nodescale/demo/nodepools/team: line 5, column 1: not valid YAML")

    def test_bad_json_falls_back_to_yaml_error_with_line(self):
        with pytest.raises(DocumentError, match="line 2"):
            parse_documents('{"kind": "A",\n  "x": [}', "j")

    def test_a_scalar_document_is_not_an_object(self):
        with pytest.raises(DocumentError, match=r"^f#1: expected a Kubernetes object"):
            parse_documents("kind: A\n---\nhello\n", "f")


@pytest.fixture
def ssm():
    with mock_aws():
        yield boto3.client("ssm", region_name="us-east-1")


class TestSSM:
    def test_loads_every_parameter_under_the_path(self, ssm):
        ssm.put_parameter(Name="/nodescale/demo/nodepools/default", Type="String", Value=example("karpenter-v1/default.yaml"))
        ssm.put_parameter(
            Name="/nodescale/demo/nodepools/gpu/pools",
            Type="SecureString",
            Value=example("karpenter-v1beta1/gpu-and-team-pools.yaml").replace("name: default\nspec:\n  amiFamily", "name: beta\nspec:\n  amiFamily").replace("nodeClassRef:\n        name: default", "nodeClassRef:\n        name: beta"),
        )
        ssm.put_parameter(Name="/nodescale/other/nodepools/x", Type="String", Value=example("karpenter-v1alpha5/windows.yaml"))
        result = load_from_ssm(ssm, "/nodescale/demo/nodepools")
        assert [str(e) for e in result.errors] == []
        assert sorted(result.nodepools) == ["default", "generalcompute", "gpu"]
        assert sorted(result.nodeclasses) == ["beta", "default"]
        assert result.nodepools["default"].source == "ssm:/nodescale/demo/nodepools/default#0"
        assert result.nodepools["gpu"].source == "ssm:/nodescale/demo/nodepools/gpu/pools#0"
        assert result.nodeclasses["beta"].source == "ssm:/nodescale/demo/nodepools/gpu/pools#2"

    def test_pages_through_many_parameters(self, ssm):
        template = example("karpenter-v1/default.yaml")
        for i in range(23):
            text = template.replace("name: default\nspec:\n  template", f"name: pool-{i}\nspec:\n  template")
            text = text.split("---")[0]
            ssm.put_parameter(Name=f"/nodescale/demo/nodepools/p{i:02d}", Type="String", Value=text)
        ssm.put_parameter(Name="/nodescale/demo/classes", Type="String", Value=template.split("---")[1])
        result = load_from_ssm(ssm, "nodescale/demo/")
        assert result.errors == []
        assert len(result.nodepools) == 23 and list(result.nodeclasses) == ["default"]

    def test_a_bad_parameter_does_not_stop_the_others(self, ssm):
        ssm.put_parameter(Name="/ns/a", Type="String", Value=example("karpenter-v1alpha5/default-spot.yaml"))
        ssm.put_parameter(Name="/ns/b", Type="String", Value="kind: [unclosed")
        bad_pool = example("karpenter-v1alpha5/banana-weighted-tainted.yaml").replace("effect: NoSchedule", "effect: Sometimes")
        ssm.put_parameter(Name="/ns/c", Type="String", Value=bad_pool)
        result = load_from_ssm(ssm, "/ns")
        assert list(result.nodepools) == ["default"]
        assert [(e.source, e.path) for e in result.errors] == [("ssm:/ns/b", ""), ("ssm:/ns/c#0", "spec.taints[0].effect")]
        assert "line 1" in result.errors[0].message

    def test_a_document_that_is_no_configuration_kind_is_an_error_of_its_parameter(self, ssm):
        # A NodePool source holds NodePools and node classes only: anything else (a workload, or a
        # misspelled kind) is named, never dropped without a word, and the good pool still loads.
        ssm.put_parameter(Name="/ns/a", Type="String", Value=example("karpenter-v1alpha5/default-spot.yaml"))
        ssm.put_parameter(Name="/ns/w", Type="String", Value=example("workloads/inflate.yaml"))
        misspelled = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisoner\nmetadata: {name: other}\nspec: {}\n"
        ssm.put_parameter(Name="/ns/x", Type="String", Value=misspelled)
        result = load_from_ssm(ssm, "/ns")
        assert list(result.nodepools) == ["default"] and result.others == []
        assert [(e.source, e.path) for e in result.errors] == [("ssm:/ns/w#0", "kind"), ("ssm:/ns/x#0", "kind")]
        assert '"Deployment"' in result.errors[0].message and '"Provisoner"' in result.errors[1].message
        assert "allowed are Provisioner (karpenter.sh/v1alpha5)" in result.errors[1].message

    def test_a_deeply_nested_parameter_is_an_error_of_its_own(self, ssm):
        # 2 KB of brackets raised RecursionError and stopped every function; now it is one error.
        ssm.put_parameter(Name="/ns/a", Type="String", Value=example("karpenter-v1alpha5/default-spot.yaml"))
        ssm.put_parameter(Name="/ns/deep", Type="String", Value="[" * 1000 + "]" * 1000)
        result = load_from_ssm(ssm, "/ns")
        assert list(result.nodepools) == ["default"]
        assert [(e.source, e.path) for e in result.errors] == [("ssm:/ns/deep", "")]
        assert "1000 levels deep" in result.errors[0].message

    def test_empty_path(self, ssm):
        result = load_from_ssm(ssm, "/nothing/here")
        assert result.nodepools == {} and result.errors == []


class FakeCustomObjects:
    """The slice of CustomObjectsApi the loader uses, with CRDs that may be missing and pages of 2."""

    def __init__(self, objects: dict[tuple[str, str, str], list[dict]], fail: int | None = None) -> None:
        self.objects = objects
        self.fail = fail
        self.calls: list[tuple] = []

    def list_cluster_custom_object(self, group, version, plural, limit=None, _continue=None):
        self.calls.append((group, version, plural, _continue))
        if self.fail:
            raise ApiException(status=self.fail, reason="Forbidden")
        key = (group, version, plural)
        if key not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        items = self.objects[key]
        start = int(_continue or 0)
        page = items[start : start + 2]
        more = start + 2 < len(items)
        return {"items": page, "metadata": {"continue": str(start + 2) if more else None}}


def cluster_objects(*texts: str) -> dict[tuple[str, str, str], list[dict]]:
    plurals = {"NodePool": "nodepools", "EC2NodeClass": "ec2nodeclasses", "Provisioner": "provisioners", "AWSNodeTemplate": "awsnodetemplates"}
    out: dict[tuple[str, str, str], list[dict]] = {}
    for text in texts:
        for _, d in parse_documents(text, "x"):
            group, version = d["apiVersion"].split("/")
            out.setdefault((group, version, plurals[d["kind"]]), []).append(d)
    return out


class TestCluster:
    def test_reads_every_generation_and_ignores_missing_crds(self):
        objs = cluster_objects(example("karpenter-v1beta1/gpu-and-team-pools.yaml"), example("karpenter-v1beta1/exclude-large-graviton.yaml"))
        api = FakeCustomObjects(objs)
        result = load_from_cluster(api)
        assert result.errors == []
        assert sorted(result.nodepools) == ["generalcompute", "gpu", "no-big-graviton"]
        assert result.nodepools["gpu"].source == "cluster:NodePool/gpu"
        assert result.nodeclasses["default"].source == "cluster:EC2NodeClass/default"
        # Three NodePools at v1beta1 come in two pages.
        assert ("karpenter.sh", "v1beta1", "nodepools", "2") in api.calls

    def test_an_object_served_at_two_versions_is_read_once(self):
        v1 = parse_documents(example("karpenter-v1/default.yaml"), "x")
        beta_view = json.loads(json.dumps(v1[0][1]))
        beta_view["apiVersion"] = "karpenter.sh/v1beta1"
        objs = {
            ("karpenter.sh", "v1", "nodepools"): [v1[0][1]],
            ("karpenter.sh", "v1beta1", "nodepools"): [beta_view],
            ("karpenter.k8s.aws", "v1", "ec2nodeclasses"): [v1[1][1]],
        }
        docs = read_cluster_documents(FakeCustomObjects(objs))
        assert [src for src, _ in docs] == ["cluster:NodePool/default", "cluster:EC2NodeClass/default"]
        assert docs[0][1]["apiVersion"] == "karpenter.sh/v1"

    def test_list_items_without_kind_get_it(self):
        item = parse_documents(example("karpenter-v1alpha5/default-spot.yaml"), "x")
        bare = [{k: v for k, v in d.items() if k not in ("apiVersion", "kind")} for _, d in item]
        objs = {("karpenter.sh", "v1alpha5", "provisioners"): [bare[0]], ("karpenter.k8s.aws", "v1alpha1", "awsnodetemplates"): [bare[1]]}
        result = load_from_cluster(FakeCustomObjects(objs))
        assert result.errors == [] and list(result.nodepools) == ["default"]

    def test_other_api_errors_are_raised_not_read_as_empty(self):
        with pytest.raises(ApiException):
            load_from_cluster(FakeCustomObjects({}, fail=403))

    def test_no_karpenter_crds_at_all(self):
        result = load_from_cluster(FakeCustomObjects({}))
        assert result.nodepools == {} and result.errors == []


class TestDuplicates:
    def test_same_name_in_ssm_and_cluster_of_one_kind_names_both_places(self, ssm):
        ssm.put_parameter(Name="/ns/default", Type="String", Value=example("karpenter-v1alpha5/default-spot.yaml"))
        api = FakeCustomObjects(cluster_objects(example("karpenter-v1alpha5/default-spot.yaml")))
        result = load_all(ssm_client=ssm, ssm_path="/ns", custom_objects_api=api)
        assert result.nodepools == {} and result.nodeclasses == {}
        messages = sorted(str(e) for e in result.errors)
        assert messages == [
            'cluster:AWSNodeTemplate/default: metadata.name: AWSNodeTemplate "default" is also defined at '
            "ssm:/ns/default#1; a name may be defined once, so neither definition is used",
            'cluster:Provisioner/default: metadata.name: Provisioner "default" is also defined at '
            "ssm:/ns/default#0; a name may be defined once, so neither definition is used",
        ]

    def test_two_generations_of_one_name_side_by_side(self, ssm):
        # Issue #14: Karpenter v0.32-v0.33 ran a Provisioner and a NodePool both named "default".
        ssm.put_parameter(Name="/ns/default", Type="String", Value=example("karpenter-v1/default.yaml"))
        api = FakeCustomObjects(cluster_objects(example("karpenter-v1alpha5/default-spot.yaml")))
        result = load_all(ssm_client=ssm, ssm_path="/ns", custom_objects_api=api)
        assert result.errors == [] and sorted(result.nodepools) == ["default", "provisioner/default"]
        assert sorted(result.nodeclasses) == ["awsnodetemplate/default", "default"]
        legacy, pool = result.nodepools["provisioner/default"], result.nodepools["default"]
        assert (legacy.kind, legacy.real_name, legacy.label_key) == ("Provisioner", "default", wk.LEGACY_PROVISIONER)
        assert legacy.node_class == "awsnodetemplate/default" and pool.node_class == "default"
        assert result.nodeclasses["awsnodetemplate/default"].kind == "AWSNodeTemplate"
        assert (pool.kind, pool.real_name, pool.label_key) == ("NodePool", "default", wk.NODEPOOL)

    def test_two_generations_in_one_file(self):
        docs = parse_documents(example("karpenter-v1alpha5/migrated-from-cluster-autoscaler.yaml"), "a.yaml")
        docs += parse_documents(example("karpenter-v1/default.yaml").split("---")[0], "b.yaml")
        result = load(docs)
        # The NodePool's EC2NodeClass is not there; the Provisioner is keyed apart from it all the same.
        assert list(result.nodepools) == ["provisioner/default"]
        assert [(e.source, e.path) for e in result.errors] == [("b.yaml#0", "spec.template.spec.nodeClassRef.name")]
        assert 'is a AWSNodeTemplate' in result.errors[0].message

    def test_pool_using_a_duplicated_class_says_so(self):
        spot = parse_documents(example("karpenter-v1alpha5/default-spot.yaml"), "a")
        banana = parse_documents(example("karpenter-v1alpha5/banana-weighted-tainted.yaml"), "b")
        result = load(spot + banana + [("c", spot[1][1])])
        assert result.nodepools == {}
        refs = [e for e in result.errors if e.path == "spec.providerRef.name"]
        assert [e.source for e in refs] == ["a#0", "b#0"]
        assert "defined more than once (a#1, c)" in refs[0].message

    def test_load_all_with_documents_only(self):
        docs = parse_documents(example("karpenter-v1alpha5/windows.yaml"), "w")
        result = load_all(documents=docs)
        assert sorted(result.nodepools) == ["windows2019", "windows2022"] and result.ok
