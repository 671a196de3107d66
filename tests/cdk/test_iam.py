"""Least privilege: one role per function, granted what that function calls; every EC2 change tied to
this cluster's ownership tag."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

from infra import iam as policies
from infra.function_specs import FUNCTION_SPECS
from infra.layers import NODESCALE_LAYER_DIR
from infra.names import physical_name
from nodescale.aws import fleet, launchtemplates
from nodescale.aws import tags as tagging
from nodescale.aws.subnets import Subnet
from nodescale.model.instancetype import InstanceType, Offering
from tests.cdk.conftest import Synth, Synths

OWNER = "nodescale.io/cluster"
FUNCTIONS = [spec.name for spec in FUNCTION_SPECS]
LAUNCHING = ["provisioner", "interruption", "disruption"]


def role_id(synth: Synth, name: str) -> str:
    return synth.logical_id(synth.stack.roles[name])


def statements(synth: Synth, name: str) -> list[dict[str, Any]]:
    """The statements of function `name`'s role, read from the template as AWS would: every policy on it."""
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id(synth, name)} in policy["Properties"]["Roles"]:
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else action


def actions(synth: Synth, name: str) -> set[str]:
    return {a for s in statements(synth, name) if s["Effect"] == "Allow" for a in _actions(s)}


def granting(synth_statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in synth_statements if s["Effect"] == "Allow" and action in _actions(s)]


def untagged_grants(synth_statements: list[dict[str, Any]], action: str, key: str, cluster: str) -> list[dict[str, Any]]:
    """Statements that allow `action` without requiring `key` (aws:ResourceTag/... or aws:RequestTag/...) = cluster."""
    return [
        s for s in granting(synth_statements, action)
        if s.get("Condition", {}).get("StringEquals", {}).get(f"{key}/{OWNER}") != cluster
    ]


def _resource_types(statement: dict[str, Any]) -> set[str]:
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    types = set()
    for resource in resources:
        parts = resource["Fn::Join"][1] if isinstance(resource, dict) else [resource]
        tail = parts[-1] if isinstance(parts[-1], str) else ""
        types.add(tail.rsplit(":", 1)[-1].split("/")[0] if tail != "*" else "*")
    return types


def test_one_role_per_function_named_for_the_cluster(default: Synth) -> None:
    roles = {role_id(default, name) for name in FUNCTIONS}
    assert len(roles) == len(FUNCTIONS) == 4
    for name in FUNCTIONS:
        props = default.json["Resources"][role_id(default, name)]["Properties"]
        assert props["RoleName"] == physical_name("demo-cluster", name)
        assert props["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}
        assert statements(default, name), f"{name} has no policy"
    # Each policy is attached to one role only: no function borrows another's grants.
    for policy in default.resources("AWS::IAM::Policy").values():
        assert len(policy["Properties"]["Roles"]) == 1


@pytest.mark.parametrize("action", ["ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags",
                                    "iam:PassRole", "iam:ListInstanceProfilesForRole", "ssm:GetParameters",
                                    "ssm:GetParametersByPath", "ec2:DescribeInstanceStatus", "dynamodb:PutItem",
                                    "dynamodb:Scan"])
def test_the_cleanup_launches_nothing_and_reads_no_configuration(default: Synth, action: str) -> None:
    assert action not in actions(default, "cleanup")


def test_the_cleanup_has_what_it_calls(default: Synth) -> None:
    # nodescale.cleanup: list instances and templates, terminate, delete; the Kubernetes client for the drain.
    assert actions(default, "cleanup") == {
        "ec2:DescribeInstances", "ec2:DescribeLaunchTemplates", "ec2:TerminateInstances", "ec2:DeleteLaunchTemplate",
        "eks:DescribeCluster", "logs:CreateLogStream", "logs:PutLogEvents",
    }


@pytest.mark.parametrize("name", FUNCTIONS)
def test_repair_status_checks_only_for_the_disruption_function(default: Synth, name: str) -> None:
    (statement,) = [s for s in statements(default, name) if s.get("Sid") == "ReadEc2InThisRegion"]
    has = "ec2:DescribeInstanceStatus" in _actions(statement)
    assert has == (name == "disruption")
    if has:  # no resource-level permissions for this action: region-scoped "*"
        assert statement["Resource"] == "*"
        assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


@pytest.mark.parametrize("name", LAUNCHING)
def test_launching_functions_list_the_node_roles_instance_profiles_only(default: Synth, full: Synth, name: str) -> None:
    (listing,) = granting(statements(default, name), "iam:ListInstanceProfilesForRole")
    (passing,) = granting(statements(default, name), "iam:PassRole")
    assert listing["Resource"] == passing["Resource"] == {
        "Fn::GetAtt": [default.logical_id(default.stack.nodes.linux.role), "Arn"]}
    (imported,) = granting(statements(full, name), "iam:ListInstanceProfilesForRole")
    windows_role = full.logical_id(full.stack.nodes.windows.role)
    # and the role default.yaml's EC2NodeClass names (#28.1)
    assert imported["Resource"] == ["arn:aws:iam::111122223333:role/KarpenterNodeRole-full-cluster",
                                    {"Fn::GetAtt": [windows_role, "Arn"]},
                                    _account_role("KarpenterNodeRole-demo-cluster")]


def _account_role(name: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, f":role/{name}"]]}


@pytest.mark.parametrize("name", LAUNCHING)
def test_the_node_roles_the_nodepools_name_are_passed_and_listed(synths: Synths, name: str) -> None:
    """#28.1: deployed as docs/deploy.md says (-c nodePoolFiles=.../karpenter-v1/system.yaml, whose EC2NodeClass
    names KarpenterNodeRole-demo-cluster), the launching functions may pass and list exactly the stack's node
    role, the role the file names and the roles -c nodeRoles gives (for node classes read from the cluster)."""
    synth = synths("named-roles")
    own = {"Fn::GetAtt": [synth.logical_id(synth.stack.nodes.linux.role), "Arn"]}
    expected = [own, _account_role("KarpenterNodeRole-demo-cluster"), _account_role("ClusterNodeClassRole"),
                "arn:aws:iam::111122223333:role/eks/OtherNodeRole"]
    (listing,) = granting(statements(synth, name), "iam:ListInstanceProfilesForRole")
    (passing,) = granting(statements(synth, name), "iam:PassRole")
    assert listing["Resource"] == passing["Resource"] == expected
    assert passing["Condition"]["StringEquals"]["iam:PassedToService"][0] == "ec2.amazonaws.com"


TABLE_ACTIONS = {
    # UpdateItem: the launch lease is renewed while held and checked before each launch (#27.7)
    "provisioner": {"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
                    "dynamodb:UpdateItem", "dynamodb:BatchGetItem"},
    "disruption": {"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
                   "dynamodb:UpdateItem", "dynamodb:BatchGetItem"},
    # and the Powertools idempotency records of each event
    "interruption": {"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
                     "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"},
    "cleanup": set(),
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_table_item_actions_only_and_no_stream_reads(default: Synth, name: str) -> None:
    table = {"Fn::GetAtt": [default.logical_id(default.stack.table), "Arn"]}
    granted = set()
    for statement in statements(default, name):
        table_actions = [a for a in _actions(statement) if a.startswith("dynamodb:")]
        if table_actions:
            assert statement["Resource"] == table, "only the state table itself (no index, no stream)"
            granted |= set(table_actions)
    assert granted == TABLE_ACTIONS[name]


@pytest.mark.parametrize("action", ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_removal_requires_this_clusters_resource_tag(default: Synth, action: str, name: str) -> None:
    assert untagged_grants(statements(default, name), action, "aws:ResourceTag", "demo-cluster") == []


def test_who_terminates_and_who_deletes_templates(default: Synth) -> None:
    assert {n for n in FUNCTIONS if "ec2:TerminateInstances" in actions(default, n)} == set(FUNCTIONS)
    assert {n for n in FUNCTIONS if "ec2:DeleteLaunchTemplate" in actions(default, n)} == {"disruption", "cleanup"}


def test_the_removal_check_catches_an_untagged_grant() -> None:
    loose = [{"Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*"}]
    other_cluster = [{"Effect": "Allow", "Action": ["ec2:TerminateInstances"], "Resource": "*",
                      "Condition": {"StringEquals": {f"aws:ResourceTag/{OWNER}": "someone-else"}}}]
    assert untagged_grants(loose, "ec2:TerminateInstances", "aws:ResourceTag", "demo-cluster") == loose
    assert untagged_grants(other_cluster, "ec2:TerminateInstances", "aws:ResourceTag", "demo-cluster") == other_cluster


@pytest.mark.parametrize("name", LAUNCHING)
def test_creating_requires_this_clusters_request_tag(default: Synth, name: str) -> None:
    found = statements(default, name)
    for action in ("ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags"):
        for statement in granting(found, action):
            types = _resource_types(statement)
            assert "*" not in types
            condition = statement.get("Condition", {}).get("StringEquals", {})
            if types & set(policies.CREATED_TYPES) and f"aws:ResourceTag/{OWNER}" not in condition:
                # Anything this system creates and can tag must carry the ownership tag in the request.
                assert condition[f"aws:RequestTag/{OWNER}"] == "demo-cluster", statement
    (create_tags,) = [s for s in granting(found, "ec2:CreateTags")
                      if "ec2:CreateAction" in s["Condition"].get("StringEquals", {})]
    assert create_tags["Condition"]["StringEquals"]["ec2:CreateAction"] == ["CreateFleet", "RunInstances",
                                                                            "CreateLaunchTemplate"]
    (template_statement,) = granting(found, "ec2:CreateLaunchTemplate")
    assert _resource_types(template_statement) == {"launch-template"}


def test_only_the_provisioner_tags_karpenter_instances_and_only_with_the_ownership_tag(default: Synth) -> None:
    """#30.6: adopting a previous Karpenter's NodeClaim tags its instance; the grant is the ownership tag alone
    (aws:TagKeys), with this cluster's value, on an instance Karpenter launched for this cluster."""
    (adopt,) = [s for s in statements(default, "provisioner") if s.get("Sid") == "AdoptKarpenterInstances"]
    assert _actions(adopt) == ["ec2:CreateTags"] and _resource_types(adopt) == {"instance"}
    assert adopt["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{OWNER}": "demo-cluster",
                         "aws:ResourceTag/kubernetes.io/cluster/demo-cluster": "owned"},
        "Null": {"aws:ResourceTag/karpenter.sh/nodepool": "false"},
        "ForAllValues:StringEquals": {"aws:TagKeys": [OWNER]},
    }
    for name in ("interruption", "disruption", "cleanup"):
        assert not [s for s in statements(default, name) if s.get("Sid") == "AdoptKarpenterInstances"]


@pytest.mark.parametrize("name", LAUNCHING)
def test_tagging_an_existing_instance_adds_only_its_nodeclaim_on_this_clusters_instances(
        default: Synth, name: str) -> None:
    """#31.5: the NodeClaim's name is tagged on the instance, its volumes and network interfaces after the
    launch (Karpenter's karpenter.sh/nodeclaim tag); the only CreateTags outside a creating call is this one
    key, on resources that already carry this cluster's ownership tag, so no ownership tag can be changed."""
    later = [s for s in granting(statements(default, name), "ec2:CreateTags")
             if "ec2:CreateAction" not in s["Condition"].get("StringEquals", {})
             and s.get("Sid") != "AdoptKarpenterInstances"]  # #30.6's adoption grant, tested on its own
    (statement,) = later
    assert _resource_types(statement) == {"instance", "volume", "network-interface"}
    assert statement["Condition"]["StringEquals"] == {f"aws:ResourceTag/{OWNER}": "demo-cluster"}
    assert statement["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": ["karpenter.sh/nodeclaim"]}


@pytest.mark.parametrize("name", LAUNCHING)
def test_launches_without_a_request_tag_only_use_images_networks_own_templates_and_spot_requests(
        default: Synth, name: str) -> None:
    for statement in granting(statements(default, name), "ec2:RunInstances"):
        condition = statement.get("Condition", {}).get("StringEquals", {})
        if f"aws:RequestTag/{OWNER}" in condition:
            continue
        if f"aws:ResourceTag/{OWNER}" in condition:
            assert _resource_types(statement) == {"launch-template"}
        else:
            assert _resource_types(statement) <= {"image", "snapshot", "subnet", "security-group",
                                                  "capacity-reservation", "spot-instances-request"}


def _launch_tag_specifications(capacity_type: str) -> dict[str, list[dict[str, str]]]:
    """What the product sends for one launch: the Fleet request's and the launch template's tag specifications."""
    template = launchtemplates.LaunchTemplateSpec(
        cluster="demo-cluster", image_id="ami-0123456789abcdef0", user_data="", security_group_ids=("sg-1",),
        instance_profile="nodes", tags=tagging.resource_tags("demo-cluster", "default", "default"),
    )
    subnet = Subnet("subnet-1", "us-east-1a", "use1-az1", "vpc-1", 200)
    offers = (Offering("us-east-1a", "spot", 0.03), Offering("us-east-1a", "on-demand", 0.09))
    request = fleet.LaunchRequest(
        cluster="demo-cluster", nodepool="default", nodeclass="default",
        templates=(fleet.TemplateChoice(template.name, (InstanceType("m5.large", {}, {}, {}, offers),)),),
        subnets={"us-east-1a": subnet}, capacity_types=(capacity_type,), key="pods", config_hash=template.settings_hash,
    )
    params = fleet.fleet_request(request, capacity_type, fleet.plan_overrides(request, capacity_type), 1)
    specs = {t["ResourceType"]: t["Tags"] for t in params["TagSpecifications"]}
    return specs | {t["ResourceType"]: t["Tags"] for t in template.data()["TagSpecifications"]}


@pytest.mark.parametrize("capacity_type", ["spot", "on-demand"])
def test_every_resource_the_launch_policy_requires_a_tag_on_is_tagged_by_the_launch(
        default: Synth, capacity_type: str) -> None:
    specs = _launch_tag_specifications(capacity_type)
    owned = {rt for rt, tags in specs.items() if {"Key": OWNER, "Value": "demo-cluster"} in tags}
    required = set()
    for statement in granting(statements(default, "provisioner"), "ec2:CreateFleet"):
        if f"aws:RequestTag/{OWNER}" in statement.get("Condition", {}).get("StringEquals", {}):
            required |= _resource_types(statement)
    assert required == {"fleet", "instance", "volume", "network-interface"}
    assert required - owned == set(), "AWS would deny the launch: a created resource lacks the ownership tag"
    # A launch template may tag only what every launch from it creates: no spot request (on-demand has none).
    assert "spot-instances-request" not in specs


@pytest.mark.parametrize("name", FUNCTIONS)
def test_describe_only_this_cluster(default: Synth, name: str) -> None:
    (statement,) = granting(statements(default, name), "eks:DescribeCluster")
    joined = statement["Resource"]["Fn::Join"][1]
    assert joined[0] == "arn:" and joined[1] == {"Ref": "AWS::Partition"}
    assert joined[-1] == ":cluster/demo-cluster"


@pytest.mark.parametrize("name", LAUNCHING)
def test_ssm_reads_only_own_path_and_public_ami_parameters(default: Synth, name: str) -> None:
    found = statements(default, name)

    def tails(action: str) -> list[str]:
        return sorted(r["Fn::Join"][1][-1] for s in granting(found, action) for r in s["Resource"])

    assert tails("ssm:GetParametersByPath") == tails("ssm:GetParameter") == [
        ":parameter/nodescale/demo-cluster/nodepools",
        ":parameter/nodescale/demo-cluster/nodepools/*",
    ]
    assert tails("ssm:GetParameters") == [
        "::parameter/aws/service/ami-windows-latest/*",  # public parameters: no account
        "::parameter/aws/service/bottlerocket/*",
        "::parameter/aws/service/eks/optimized-ami/*",
    ]
    assert {a for s in found for a in _actions(s) if a.startswith("ssm:")} == {
        "ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"}


@pytest.mark.parametrize("name", LAUNCHING)
def test_ec2_reads_are_region_scoped(default: Synth, name: str) -> None:
    found = statements(default, name)
    for action in ("ec2:DescribeInstanceTypes", "ec2:DescribeSpotPriceHistory", "ec2:DescribeInstances",
                   "ec2:DescribeImages", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"):
        (statement,) = granting(found, action)
        assert statement["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_no_wildcard_actions_and_logs_only_to_its_own_group(default: Synth, name: str) -> None:
    found = statements(default, name)
    assert all("*" not in a for s in found for a in _actions(s))
    (logs,) = granting(found, "logs:PutLogEvents")
    function = getattr(default.stack, "cleanup_function" if name == "cleanup" else name)
    group = default.json["Resources"][default.logical_id(function)]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    assert logs["Resource"] == {"Fn::GetAtt": [group, "Arn"]}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_vpc_interfaces_only_when_placed_in_a_vpc(default: Synth, full: Synth, name: str) -> None:
    assert granting(statements(default, name), "ec2:CreateNetworkInterface") == []
    assert granting(statements(full, name), "ec2:CreateNetworkInterface")


# Every AWS call written in the product (its boto3 clients' operations), each granted to at least one
# function, or said here why not. Catches a new call that would be denied once deployed.
NOT_GRANTED = {
    # k8s/token.py presigns it for the EKS token (EKS makes the call); AWS requires no permission for it.
    "sts:GetCallerIdentity": "no permission needed",
    "ssm:ListNodes": "a false match: nodescale.k8s.listing.list_nodes, not SSM's ListNodes",
    # aws/pricing.live_on_demand_prices runs only when handed a Price List client, and no function hands one
    # (world.catalog): on-demand prices come from the bundled table, spot prices from DescribeSpotPriceHistory.
    "pricing:GetProducts": "never called by a function",
    # usecases/scale_nodepool.py, behind `nodescale scale nodepool`: the operator's credentials write the NodePool
    # parameter; no function changes NodePools (sim's tests check the functions' identity is refused).
    "ssm:PutParameter": "only the operator's `nodescale scale`",
}
CLI_ONLY = ("cli.py", "commands/")  # the operator's own credentials, not a function's role
SERVICES = ("ec2", "ssm", "eks", "dynamodb", "iam", "pricing", "sts", "sqs")


def product_calls() -> dict[str, set[str]]:
    """IAM action -> the product files that call it (operations matched by boto3's own names)."""
    session = botocore.session.get_session()
    by_name: dict[str, set[str]] = {}
    for service in SERVICES:
        model = session.get_service_model(service)
        prefix = model.signing_name if service != "pricing" else "pricing"
        for operation in model.operation_names:
            # SQS has no IAM action for its batch calls: each is authorized as its single-message action.
            action = operation.removesuffix("Batch") if service == "sqs" else operation
            by_name.setdefault(xform_name(operation), set()).add(f"{prefix}:{action}")
    root = Path(NODESCALE_LAYER_DIR) / "python" / "nodescale"
    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(CLI_ONLY):
            continue
        text = path.read_text()
        names = re.findall(r"\.([a-z][a-z0-9_]+)\(", text) + re.findall(r'get_paginator\(\s*"([a-z0-9_]+)"', text)
        names += re.findall(r'paginate\(\s*\w+,\s*"([a-z0-9_]+)"', text)  # aws/selectors.paginate(client, "op", ...)
        for name in names:
            for action in by_name.get(name, ()):
                found.setdefault(action, set()).add(relative)
    return found


def test_every_aws_call_of_the_product_is_granted_to_a_function(default: Synth) -> None:
    calls = product_calls()
    assert "ec2:CreateFleet" in calls and "iam:ListInstanceProfilesForRole" in calls  # the scan sees calls
    granted = set().union(*(actions(default, name) for name in FUNCTIONS))
    missing = {a: sorted(files) for a, files in calls.items() if a not in granted and a not in NOT_GRANTED}
    assert missing == {}
