"""`-c applyRbac=true`: the stack applies the functions' RBAC with a custom resource, and only then.

The custom resource's function gets exactly what applying RBAC needs: an EKS access entry (the only
way to be authorized before any RBAC exists) and eks:DescribeCluster on this cluster; `cdk destroy`
runs the cleanup before the RBAC goes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError, StackConfig
from infra.rbac import ACCESS_POLICY, MANIFEST, RESOURCE_TYPE
from tests.cdk.conftest import Synth, Synths

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rbac(synths: Synths) -> Synth:
    return synths("rbac")


@pytest.fixture(scope="module")
def rbac_vpc(synths: Synths) -> Synth:
    return synths("rbac-vpc")


def rbac_role(synth: Synth) -> tuple[str, dict[str, Any]]:
    [(logical_id, role)] = [
        (k, v) for k, v in synth.resources("AWS::IAM::Role").items()
        if str(v["Properties"].get("RoleName", "")).endswith("-rbac")
    ]
    return logical_id, role


def statements_of(synth: Synth, role_id: str) -> list[dict[str, Any]]:
    return [
        s for p in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"] for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


@pytest.mark.parametrize("name", ["default", "full", "second"])
def test_without_apply_rbac_none_of_it_is_synthesized(synths: Synths, name: str) -> None:
    synth = synths(name)
    assert not synth.resources(RESOURCE_TYPE)
    assert not [r for r in synth.resources("AWS::IAM::Role").values()
                if str(r["Properties"].get("RoleName", "")).endswith("-rbac")]
    assert not [e for e in synth.resources("AWS::EKS::AccessEntry").values() if e["Properties"].get("AccessPolicies")]
    assert not [f for f in synth.resources("AWS::Lambda::Function").values()
                if str(f["Properties"].get("FunctionName", "")).endswith("-rbac")]


def test_the_custom_resource_names_the_cluster_and_the_manifest_it_applies(rbac: Synth) -> None:
    _, resource = rbac.one(RESOURCE_TYPE)
    props = resource["Properties"]
    assert props["ClusterName"] == "rbac-cluster"
    assert props["ManifestSha256"] == hashlib.sha256(MANIFEST.read_bytes()).hexdigest()


def test_its_access_entry_holds_the_cluster_admin_access_policy_and_no_group(rbac: Synth) -> None:
    role_id, _ = rbac_role(rbac)
    [entry] = [e["Properties"] for e in rbac.resources("AWS::EKS::AccessEntry").values()
               if e["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}]
    assert entry["ClusterName"] == "rbac-cluster" and entry["Type"] == "STANDARD"
    assert "KubernetesGroups" not in entry
    [policy] = entry["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    assert policy["PolicyArn"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":eks::aws:cluster-access-policy/{ACCESS_POLICY}"]]}
    # No other entry gained an access policy: the functions keep their group and the RBAC it is bound by.
    others = [e for e in rbac.resources("AWS::EKS::AccessEntry").values() if e["Properties"].get("AccessPolicies")]
    assert len(others) == 1


def test_its_iam_is_describe_this_cluster_and_its_own_logs(rbac: Synth) -> None:
    role_id, role = rbac_role(rbac)
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "lambda.amazonaws.com"}
    assert "ManagedPolicyArns" not in role["Properties"]
    by_action = {tuple(sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"])): s
                 for s in statements_of(rbac, role_id)}
    assert sorted(by_action) == [("eks:DescribeCluster",), ("logs:CreateLogStream", "logs:PutLogEvents")]
    describe = by_action["eks:DescribeCluster",]["Resource"]
    assert describe["Fn::Join"][1][-1] == ":cluster/rbac-cluster"
    [(log_id, _)] = [(k, v) for k, v in rbac.resources("AWS::Logs::LogGroup").items()
                     if v["Properties"].get("LogGroupName") == "/aws/lambda/nodescale-rbac-cluster-rbac"]
    assert by_action["logs:CreateLogStream", "logs:PutLogEvents"]["Resource"] == {"Fn::GetAtt": [log_id, "Arn"]}


def test_in_a_vpc_it_runs_in_the_vpc_and_may_manage_its_interfaces(rbac_vpc: Synth) -> None:
    role_id, _ = rbac_role(rbac_vpc)
    actions = {a for s in statements_of(rbac_vpc, role_id) for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                                      else s["Action"])}
    assert "ec2:CreateNetworkInterface" in actions
    [function] = [f for f in rbac_vpc.resources("AWS::Lambda::Function").values()
                  if f["Properties"].get("FunctionName") == "nodescale-rbac-vpc-cluster-rbac"]
    assert function["Properties"]["VpcConfig"]["SubnetIds"] == ["subnet-0123456789abcdef0"]


def test_destroy_runs_the_cleanup_first_then_removes_the_rbac(rbac: Synth) -> None:
    rbac_id, resource = rbac.one(RESOURCE_TYPE)
    _, cleanup = rbac.one("Custom::NodescaleCleanup")
    assert rbac_id in cleanup["DependsOn"]
    role_id, _ = rbac_role(rbac)
    [entry_id] = [k for k, e in rbac.resources("AWS::EKS::AccessEntry").items()
                  if e["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}]
    assert role_id in resource["DependsOn"] and entry_id in resource["DependsOn"]
    policy_ids = [k for k, p in rbac.resources("AWS::IAM::Policy").items() if {"Ref": role_id} in p["Properties"]["Roles"]]
    assert policy_ids and set(policy_ids) <= set(resource["DependsOn"])


def test_the_function_is_packaged_with_the_manifest(rbac: Synth) -> None:
    function_id = rbac.stack.rbac.function_logical_id  # type: ignore[union-attr]
    code = rbac.json["Resources"][function_id]["Properties"]["Code"]
    asset_hash = code["S3Key"].split(".")[0]
    outdir = Path(rbac.stack.node.root.outdir)
    assets = json.loads((outdir / f"{rbac.stack.artifact_id}.assets.json").read_text())["files"]
    package = Path(assets[asset_hash]["source"]["path"])
    if not package.is_absolute():
        package = outdir / package
    assert (package / "rbac.yaml").read_bytes() == MANIFEST.read_bytes()
    assert (package / "handler.py").read_bytes() == (ROOT / "lambdas" / "rbac" / "handler.py").read_bytes()


@pytest.mark.parametrize("value", ["maybe", "2", "on please"])
def test_a_malformed_apply_rbac_is_refused_naming_the_key(value: str) -> None:
    context = {"clusterName": "demo-cluster", "applyRbac": value}
    with pytest.raises(ConfigError, match=r"applyRbac=.*allowed are true or false"):
        StackConfig.from_context(context.get)


@pytest.mark.parametrize(("value", "expected"), [(None, False), ("true", True), ("false", False), (True, True)])
def test_apply_rbac_is_read_from_context(value: Any, expected: bool) -> None:
    context = {"clusterName": "demo-cluster", "applyRbac": value}
    assert StackConfig.from_context(context.get).apply_rbac is expected
