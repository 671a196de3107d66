"""Stack deletion cleans up first; the template names no account, region or partition literally."""

from __future__ import annotations

import json
import re
from typing import Any

from infra.cleanup import PROPERTY_CLUSTER, PROPERTY_RETAIN_NODES, RESOURCE_TYPE
from tests.cdk.conftest import Synth


def test_cleanup_custom_resource_calls_the_cleanup_function(default: Synth, full: Synth) -> None:
    resource_id, resource = default.one(RESOURCE_TYPE)
    assert resource["Properties"][PROPERTY_CLUSTER] == "demo-cluster"
    assert resource["Properties"][PROPERTY_RETAIN_NODES] == "false"
    _, retained = full.one(RESOURCE_TYPE)
    assert retained["Properties"][PROPERTY_RETAIN_NODES] == "true"
    framework_id = resource["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    framework_env = default.json["Resources"][framework_id]["Properties"]["Environment"]["Variables"]
    assert framework_env["USER_ON_EVENT_FUNCTION_ARN"] == {
        "Fn::GetAtt": [default.logical_id(default.stack.cleanup_function), "Arn"]}
    props = default.json["Resources"][default.logical_id(default.stack.cleanup_function)]["Properties"]
    assert props["Code"] and props["Timeout"] == 900


def test_cleanup_runs_before_access_goes_and_after_triggers_go(default: Synth) -> None:
    resource_id, resource = default.one(RESOURCE_TYPE)
    depends = set(resource["DependsOn"])
    # CloudFormation deletes the custom resource before these: the node entries (nodes still join and
    # leave during the drain) and the cleanup's own entry; the other functions' triggers are gone first.
    for entry_id, entry in default.resources("AWS::EKS::AccessEntry").items():
        if entry["Properties"]["Type"] != "STANDARD":
            assert entry_id in depends
    assert default.stack.get_logical_id(default.stack.function_entries["cleanup"]) in depends
    # The cleanup's own role, its policy and its access entry stay until it has run.
    cleanup_role = default.stack.roles["cleanup"]
    assert default.logical_id(cleanup_role) in depends
    assert default.stack.get_logical_id(cleanup_role.node.find_child("DefaultPolicy").node.default_child) in depends
    for rule_id, rule in default.resources("AWS::Events::Rule").items():
        assert resource_id in rule["DependsOn"], f"{rule_id} could start a function during the cleanup"


def _resolve(value: Any, pseudo: dict[str, str]) -> Any:
    """Evaluate Ref / Fn::Join over pseudo parameters; other references become a placeholder."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return pseudo.get(value["Ref"], "<ref>")
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(_resolve(p, pseudo)) for p in parts)
        if set(value) == {"Fn::GetAtt"}:
            return "<ref>"
        return {k: _resolve(v, pseudo) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, pseudo) for v in value]
    return value


def _arns(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for v in value.values():
            found += _arns(v)
    elif isinstance(value, list):
        for v in value:
            found += _arns(v)
    elif isinstance(value, str):
        found += re.findall(r"arn:[^\"\s,]*", value)
    return found


def test_china_synth_builds_every_arn_in_aws_cn(china: Synth) -> None:
    text = json.dumps(china.json)
    assert "arn:aws:" not in text
    resolved = _resolve(china.json["Resources"], {"AWS::Partition": "aws-cn", "AWS::Region": "cn-north-1",
                                                  "AWS::AccountId": "111122223333", "AWS::URLSuffix": "amazonaws.com.cn"})
    arns = [a for a in _arns(resolved) if a != "arn:"]
    assert len(arns) > 20
    assert all(a.startswith("arn:aws-cn:") for a in arns), [a for a in arns if not a.startswith("arn:aws-cn:")]
    # EC2 in aws-cn reports itself as ec2.amazonaws.com.cn when a role is passed to it.
    assert "ec2.amazonaws.com.cn" in json.dumps(resolved)


def test_template_names_no_account_or_region(default: Synth) -> None:
    text = json.dumps(default.json)
    assert not re.search(r"\b\d{12}\b", text)
    assert not re.search(r"\b(us|eu|ap|sa|ca|me|af|il|mx|cn)-(gov-)?[a-z]+-\d\b", text)
    assert "arn:aws:" not in text
