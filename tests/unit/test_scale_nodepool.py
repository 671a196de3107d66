"""`nodescale scale nodepool NAME --replicas N` (Karpenter v1.8+ static capacity: `kubectl scale nodepool`
on the NodePool's scale subresource, karpenter.sh docs "NodePools: spec.replicas"): only a static pool,
N a whole number within limits.nodes, the change made where the pool is defined and nowhere else."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest

from nodescale.commands import scale as scale_cmd
from nodescale.usecases import scale_nodepool as scaling

PATH = "/nodescale/demo-cluster/nodepools"

STATIC = """# the baseline pool
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
spec:
  replicas: 2   # keep two
  limits:
    nodes: 5
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  # replicas: 9 is only a comment here
"""

DYNAMIC = STATIC.replace("  replicas: 2   # keep two\n", "").replace("name: static", "name: dynamic")


class FakeSsm:
    def __init__(self, **params: str) -> None:
        self.params = {f"{PATH}/{k}": {"Name": f"{PATH}/{k}", "Value": v, "Type": "String"} for k, v in params.items()}
        self.puts: list[dict[str, Any]] = []

    def get_parameters_by_path(self, **_: Any) -> dict[str, Any]:
        return {"Parameters": list(self.params.values())}

    def put_parameter(self, **kwargs: Any) -> None:
        self.puts.append(kwargs)
        self.params[kwargs["Name"]]["Value"] = kwargs["Value"]


class FakeCustomObjects:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {o["metadata"]["name"]: o for o in objects}
        self.patches: list[tuple[str, dict]] = []

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
        if name not in self.objects:
            raise type("NotFound", (Exception,), {"status": 404})()
        return self.objects[name]

    def patch_cluster_custom_object(self, group: str, version: str, plural: str, name: str, body: dict) -> None:
        self.patches.append((name, body))


def test_scaling_a_pool_in_ssm_edits_its_replicas_line_and_keeps_the_rest() -> None:
    ssm = FakeSsm(baseline=STATIC)
    result = scaling.scale("static", 3, ssm=ssm, ssm_path=PATH)
    assert (result.replicas_from, result.replicas_to, result.changed, result.notes) == (2, 3, True, [])
    (put,) = ssm.puts
    assert put["Value"] == STATIC.replace("replicas: 2   # keep two", "replicas: 3   # keep two")
    assert put["Overwrite"] and put["Type"] == "String"


def test_a_dry_run_and_an_unchanged_count_write_nothing() -> None:
    ssm = FakeSsm(baseline=STATIC)
    assert scaling.scale("static", 4, ssm=ssm, ssm_path=PATH, dry_run=True).dry_run
    assert not scaling.scale("static", 2, ssm=ssm, ssm_path=PATH).changed
    assert ssm.puts == []


@pytest.mark.parametrize(("name", "replicas", "message"), [
    ("dynamic", 3, "NodePool dynamic (ssm:/nodescale/demo-cluster/nodepools/other#0) is not static"),
    ("static", 6, "--replicas 6 is more than NodePool static's limits.nodes (5); allowed are 0 to 5"),
    ("static", -1, "--replicas -1 is not allowed; expected a whole number, 0 or more"),
    ("missing", 1, "NodePool missing not found in SSM under /nodescale/demo-cluster/nodepools"),
])
def test_what_cannot_be_scaled_is_refused_with_why(name: str, replicas: int, message: str) -> None:
    ssm = FakeSsm(baseline=STATIC, other=DYNAMIC)
    with pytest.raises(scaling.ScaleError) as caught:
        scaling.scale(name, replicas, ssm=ssm, ssm_path=PATH)
    assert message in str(caught.value)
    assert ssm.puts == []


@pytest.mark.parametrize("text", ["3.5", "three", "", "1e3", "-2", True])
def test_replicas_must_be_a_whole_number(text: object) -> None:
    with pytest.raises(scaling.ScaleError, match="expected a whole number, 0 or more"):
        scaling.parse_replicas(text)
    assert scaling.parse_replicas(" 7 ") == 7


def test_a_secure_string_parameter_is_not_rewritten() -> None:
    ssm = FakeSsm(baseline=STATIC)
    ssm.params[f"{PATH}/baseline"]["Type"] = "SecureString"
    with pytest.raises(scaling.ScaleError, match="SecureString parameter /nodescale/demo-cluster/nodepools/baseline"):
        scaling.scale("static", 3, ssm=ssm, ssm_path=PATH)
    assert ssm.puts == []


def test_a_pool_defined_in_ssm_and_in_the_cluster_is_refused_as_nodescale_uses_neither() -> None:
    obj = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "static", "resourceVersion": "7"},
           "spec": {"replicas": 2}}
    with pytest.raises(scaling.ScaleError, match="defined more than once"):
        scaling.scale("static", 3, ssm=FakeSsm(baseline=STATIC), ssm_path=PATH, custom_objects=FakeCustomObjects(obj))


def test_a_pool_in_the_cluster_is_patched_with_its_resource_version() -> None:
    import yaml

    obj = yaml.safe_load(STATIC.split("---")[0])
    obj["metadata"]["resourceVersion"] = "42"
    api = FakeCustomObjects(obj)
    result = scaling.scale("static", 0, custom_objects=api)
    assert result.source == "cluster:NodePool/static" and (result.replicas_from, result.replicas_to) == (2, 0)
    assert api.patches == [("static", {"metadata": {"resourceVersion": "42"}, "spec": {"replicas": 0}})]


def test_only_the_line_that_gives_exactly_the_expected_documents_is_edited() -> None:
    # A commented "replicas: 9" and a JSON parameter: the edit lands where it means spec.replicas.
    edited = scaling.edit_replicas(STATIC, 0, 3)
    assert edited == STATIC.replace("replicas: 2   # keep two", "replicas: 3   # keep two")
    assert scaling.edit_replicas('{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "s"}, '
                                 '"spec": {"replicas": 2}}', 0, 4).endswith('"replicas": 4}}')


def test_a_parameter_no_single_line_edit_fits_is_written_again_and_says_so() -> None:
    # Flow style: no line starts with "replicas:", so the documents are written again.
    flow = ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: static}\n"
            "spec: {replicas: 2, template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, "
            "name: default}, requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]}}}\n---\n" + STATIC.split("---\n")[1])
    ssm = FakeSsm(baseline=flow)
    result = scaling.scale("static", 3, ssm=ssm, ssm_path=PATH)
    assert result.notes == [f"parameter {PATH}/baseline was written again from its documents: its comments and "
                            "layout are not kept"]
    import yaml

    docs = list(yaml.safe_load_all(ssm.puts[0]["Value"]))
    assert docs[0]["spec"]["replicas"] == 3 and docs[1]["kind"] == "EC2NodeClass"
    assert docs[0]["spec"]["template"] == yaml.safe_load(flow.split("---")[0])["spec"]["template"]


def test_the_command_prints_one_json_document_and_kubectls_words() -> None:
    result = scaling.ScaleResult("static", "ssm:/p#0", 2, 3, False)
    out = io.StringIO()
    scale_cmd.common.write_result(out, result, "json", scale_cmd.to_text, lambda r: r.to_dict())
    assert json.loads(out.getvalue()) == {"nodePool": "static", "source": "ssm:/p#0", "replicas": 3,
                                          "previousReplicas": 2, "changed": True, "dryRun": False, "notes": []}
    assert scale_cmd.to_text(result) == "nodepool.karpenter.sh/static scaled from 2 to 3 replicas (ssm:/p#0)\n"


def test_a_bad_request_is_one_line_on_stderr_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_NAME", "demo-cluster")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    err = io.StringIO()
    args = argparse.Namespace(resource="deployment", name="x", replicas="1", dry_run=False, output="json")
    assert scale_cmd.run(args, io.StringIO(), err) == 2
    assert err.getvalue() == "nodescale scale: cannot scale 'deployment'; allowed is nodepool\n"
    args = argparse.Namespace(resource="nodepool", name="x", replicas="two", dry_run=False, output="json")
    assert scale_cmd.run(args, io.StringIO(), err) == 2
    assert "--replicas 'two' is not allowed" in err.getvalue()
