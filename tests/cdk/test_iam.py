"""Least privilege: every EC2 change is tied to this cluster's ownership tag."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cdk.conftest import Synth

OWNER = "nodescale.io/cluster"


def statements(synth: Synth) -> list[dict[str, Any]]:
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if policy["Properties"]["Roles"] == [{"Ref": synth.logical_id(synth.stack.role)}]:
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def granting(synth_statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in synth_statements if s["Effect"] == "Allow" and action in _actions(s)]


def untagged_grants(synth_statements: list[dict[str, Any]], action: str, key: str, cluster: str) -> list[dict[str, Any]]:
    """Statements that allow `action` without requiring `key` (aws:ResourceTag/... or aws:RequestTag/...) = cluster."""
    return [
        s for s in granting(synth_statements, action)
        if s.get("Condition", {}).get("StringEquals", {}).get(f"{key}/{OWNER}") != cluster
    ]


@pytest.mark.parametrize("action", ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"])
def test_removal_requires_this_clusters_resource_tag(default: Synth, action: str) -> None:
    found = statements(default)
    assert granting(found, action), f"{action} must be granted at all"
    assert untagged_grants(found, action, "aws:ResourceTag", "demo-cluster") == []


def test_the_removal_check_catches_an_untagged_grant() -> None:
    loose = [{"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*"}]
    other_cluster = [{"Effect": "Allow", "Action": ["ec2:TerminateInstances"], "Resource": "*",
                      "Condition": {"StringEquals": {f"aws:ResourceTag/{OWNER}": "someone-else"}}}]
    assert untagged_grants(loose, "ec2:TerminateInstances", "aws:ResourceTag", "demo-cluster") == loose
    assert untagged_grants(other_cluster, "ec2:TerminateInstances", "aws:ResourceTag", "demo-cluster") == other_cluster


CREATED_TYPES = {"fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"}


def _resource_types(statement: dict[str, Any]) -> set[str]:
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    types = set()
    for resource in resources:
        parts = resource["Fn::Join"][1] if isinstance(resource, dict) else [resource]
        tail = parts[-1] if isinstance(parts[-1], str) else ""
        types.add(tail.rsplit(":", 1)[-1].split("/")[0] if tail != "*" else "*")
    return types


@pytest.mark.parametrize("action", ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags"])
def test_creating_requires_this_clusters_request_tag(default: Synth, action: str) -> None:
    found = statements(default)
    for statement in granting(found, action):
        types = _resource_types(statement)
        assert "*" not in types
        if types & CREATED_TYPES and statement.get("Condition", {}).get("StringEquals", {}).get(
                f"aws:ResourceTag/{OWNER}") is None:
            # Anything this system creates must carry the ownership tag in the request.
            assert statement["Condition"]["StringEquals"][f"aws:RequestTag/{OWNER}"] == "demo-cluster"
    create_tags = granting(found, "ec2:CreateTags")
    assert [s["Condition"]["StringEquals"]["ec2:CreateAction"] for s in create_tags] == [
        ["CreateFleet", "RunInstances", "CreateLaunchTemplate"]]
    (template_statement,) = granting(found, "ec2:CreateLaunchTemplate")
    assert _resource_types(template_statement) == CREATED_TYPES


def test_launches_without_a_request_tag_only_use_images_networks_and_own_templates(default: Synth) -> None:
    for statement in granting(statements(default), "ec2:RunInstances"):
        condition = statement.get("Condition", {}).get("StringEquals", {})
        if f"aws:RequestTag/{OWNER}" in condition:
            continue
        if f"aws:ResourceTag/{OWNER}" in condition:
            assert _resource_types(statement) == {"launch-template"}
        else:
            assert _resource_types(statement) <= {"image", "snapshot", "subnet", "security-group", "capacity-reservation"}


def test_pass_role_only_for_node_roles_and_only_to_ec2(default: Synth, full: Synth) -> None:
    (statement,) = granting(statements(default), "iam:PassRole")
    assert statement["Resource"] == {"Fn::GetAtt": [default.logical_id(default.stack.nodes.linux.role), "Arn"]}
    assert statement["Condition"]["StringEquals"]["iam:PassedToService"][0] == "ec2.amazonaws.com"
    (imported,) = granting(statements(full), "iam:PassRole")
    windows_role = full.logical_id(full.stack.nodes.windows.role)
    assert imported["Resource"] == ["arn:aws:iam::111122223333:role/KarpenterNodeRole-full-cluster",
                                    {"Fn::GetAtt": [windows_role, "Arn"]}]


def test_describe_only_this_cluster(default: Synth) -> None:
    (statement,) = granting(statements(default), "eks:DescribeCluster")
    joined = statement["Resource"]["Fn::Join"][1]
    assert joined[0] == "arn:" and joined[1] == {"Ref": "AWS::Partition"}
    assert joined[-1] == ":cluster/demo-cluster"


def test_ssm_reads_only_own_path_and_public_ami_parameters(default: Synth) -> None:
    reads = granting(statements(default), "ssm:GetParametersByPath")
    tails = sorted(r["Fn::Join"][1][-1] for s in reads for r in s["Resource"])
    assert tails == [
        "::parameter/aws/service/ami-windows-latest/*",  # public parameters: no account
        "::parameter/aws/service/bottlerocket/*",
        "::parameter/aws/service/eks/optimized-ami/*",
        ":parameter/nodescale/demo-cluster/nodepools",
        ":parameter/nodescale/demo-cluster/nodepools/*",
    ]
    assert all(not a.startswith("ssm:Put") and not a.startswith("ssm:Delete")
               for s in statements(default) for a in _actions(s))


def test_reads_prices_and_describes(default: Synth) -> None:
    found = statements(default)
    assert granting(found, "pricing:GetProducts")
    for action in ("ec2:DescribeInstanceTypes", "ec2:DescribeSpotPriceHistory", "ec2:DescribeInstances"):
        (statement,) = granting(found, action)
        assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


def test_no_wildcard_actions_and_dynamodb_only_on_the_table(default: Synth) -> None:
    found = statements(default)
    assert all("*" not in a for s in found for a in _actions(s))
    table = default.logical_id(default.stack.table)
    for statement in found:
        if any(a.startswith("dynamodb:") for a in _actions(statement)):
            assert statement["Resource"][0] == {"Fn::GetAtt": [table, "Arn"]}


def test_vpc_interfaces_only_when_placed_in_a_vpc(default: Synth, full: Synth) -> None:
    assert granting(statements(default), "ec2:CreateNetworkInterface") == []
    assert granting(statements(full), "ec2:CreateNetworkInterface")
