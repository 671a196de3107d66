"""#28.2: customer-managed KMS keys. SecureString NodePool parameters under a key named with
-c nodePoolParameterKey need kms:Decrypt through SSM; volumes encrypted with a key a node class names
(blockDeviceMappings[].ebs.kmsKeyID) or the account's default EBS key (-c ebsKmsKey) need kms:CreateGrant and
the data-key actions through EC2, or the instance starts and terminates with Client.InternalError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.config import ConfigError, StackConfig
from tests.cdk.conftest import Synth, Synths
from tests.cdk.test_iam import FUNCTIONS, LAUNCHING, granting, statements

PARAMETER_KEY = "arn:aws:kms:us-west-2:111122223333:key/0987dcba-09fe-87dc-65ba-ab0987654321"
NODE_CLASS_KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
OTHER_ACCOUNT_KEY = "arn:aws:kms:us-west-2:444455556666:key/mrk-0000abcd12ab34cd56ef1234567890ab"
# The node class that names its key by id: a key of the stack's account and region.
BY_ID = "arn:aws:kms:us-west-2:ACCOUNT:key/mrk-1234abcd12ab34cd56ef1234567890ab"
_PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": "ACCOUNT", "AWS::Region": "us-west-2",
           "AWS::URLSuffix": "amazonaws.com"}


def _text(value: Any) -> Any:
    """A template value with CloudFormation's pseudo parameters resolved as in us-west-2 (lists item by item)."""
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict) and "Ref" in value:
        return _PSEUDO[value["Ref"]]
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_text(p) for p in parts)
    return value


def _via(service: str) -> str:
    return f"{service}.us-west-2.amazonaws.com"


def _kms(synth: Synth, name: str) -> list[dict[str, Any]]:
    return [s for s in statements(synth, name) if any(str(a).startswith("kms:") for a in
                                                       ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))]


@pytest.mark.parametrize("name", LAUNCHING)
def test_secure_string_parameters_are_decrypted_only_through_ssm_with_the_named_key(synths: Synths, name: str) -> None:
    """The functions reading NodePool parameters may decrypt with -c nodePoolParameterKey's key, through SSM only."""
    (decrypt,) = [s for s in granting(statements(synths("kms"), name), "kms:Decrypt")
                  if _text(s["Condition"]["StringEquals"]["kms:ViaService"]) == _via("ssm")]
    assert _text(decrypt["Resource"]) == PARAMETER_KEY
    assert decrypt["Action"] == "kms:Decrypt"


@pytest.mark.parametrize("name", LAUNCHING)
def test_launches_may_grant_the_volume_keys_to_ec2_only(synths: Synths, name: str) -> None:
    """The keys the node classes name (by ARN and by id) and -c ebsKmsKey's: CreateGrant for an AWS resource, and
    the data-key actions, each through EC2 only."""
    synth = synths("kms")
    expected = [NODE_CLASS_KEY, BY_ID, OTHER_ACCOUNT_KEY]
    (grant,) = granting(statements(synth, name), "kms:CreateGrant")
    assert _text(grant["Resource"]) == expected
    assert grant["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}
    assert {k: _text(v) for k, v in grant["Condition"]["StringEquals"].items()} == {"kms:ViaService": _via("ec2")}
    (use,) = granting(statements(synth, name), "kms:GenerateDataKeyWithoutPlaintext")
    assert _text(use["Resource"]) == expected
    assert {k: _text(v) for k, v in use["Condition"]["StringEquals"].items()} == {"kms:ViaService": _via("ec2")}
    assert set(use["Condition"]) == {"StringEquals"}
    assert {"kms:Decrypt", "kms:DescribeKey", "kms:ReEncryptFrom", "kms:ReEncryptTo"} <= set(use["Action"])


def test_no_kms_without_keys_and_none_for_the_cleanup(default: Synth, synths: Synths) -> None:
    """Without keys in context or node classes no function may use KMS; the cleanup never reads or launches."""
    assert all(_kms(default, name) == [] for name in FUNCTIONS)
    assert _kms(synths("kms"), "cleanup") == []


@pytest.mark.parametrize(("context", "message"), [
    ({"nodePoolParameterKey": "alias/nodepools"}, "nodePoolParameterKey: 'alias/nodepools' is not a KMS key ARN"),
    ({"ebsKmsKey": "arn:aws:kms:us-east-1:111122223333:alias/ebs"}, "ebsKmsKey: 'arn:aws:kms:us-east-1:111122223333:alias/ebs' is not a KMS key ARN"),
    ({"ebsKmsKey": "1234abcd-12ab-34cd-56ef-1234567890ab"},
     "ebsKmsKey: '1234abcd-12ab-34cd-56ef-1234567890ab' is not a KMS key ARN"),
])
def test_key_arns_are_checked_at_synth(context: dict[str, str], message: str) -> None:
    """A key given in context is a key ARN: the error names the key, the value and the form wanted."""
    with pytest.raises(ConfigError) as raised:
        StackConfig.from_context({"clusterName": "c", **context}.get)
    assert str(raised.value).startswith(message)
    assert "arn:<partition>:kms:<region>:<account>:key/<key id>" in str(raised.value)


def test_a_node_class_naming_its_volume_key_by_alias_is_refused_at_synth(tmp_path: Path) -> None:
    """An alias names no key a grant can be written on: cdk synth says which file, node class and mapping."""
    text = (Path(__file__).parent / "fixtures/encrypted.yaml").read_text().replace(
        "kmsKeyID: mrk-1234abcd12ab34cd56ef1234567890ab", "kmsKeyID: alias/ebs-nodes")
    path = tmp_path / "aliased.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        StackConfig.from_context({"clusterName": "kms-cluster", "nodePoolFiles": str(path)}.get)
    assert str(raised.value).startswith(
        f"nodePoolFiles: {path}: EC2NodeClass by-key-id: blockDeviceMappings[0].ebs.kmsKeyID 'alias/ebs-nodes' is "
        "not a KMS key ARN")
