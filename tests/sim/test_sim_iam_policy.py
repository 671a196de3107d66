"""sim's IAM evaluator against the behaviour AWS documents: each test names the page it restates."""

from __future__ import annotations

import pytest

from sim.aws.iam_enforcement import Enforcer, _request_tags, _ssm_arn, _tag_specifications
from sim.aws.iam_policy import ALLOW, EXPLICIT_DENY, IMPLICIT_DENY, UnsupportedCondition, context_of, evaluate

INSTANCE = "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"


def allow(action, resource="*", condition=None, **extra):
    statement = {"Effect": "Allow", "Action": action, "Resource": resource, **extra}
    if condition:
        statement["Condition"] = condition
    return statement


class TestEvaluationLogic:
    """IAM User Guide, "Policy evaluation logic" (identity-based policies only)."""

    def test_nothing_allows_by_default(self):
        assert evaluate([], "ec2:TerminateInstances", INSTANCE, {}).verdict == IMPLICIT_DENY

    def test_an_allow_that_matches_allows(self):
        assert evaluate([allow("ec2:TerminateInstances", INSTANCE)], "ec2:TerminateInstances", INSTANCE, {}).allowed

    def test_an_explicit_deny_overrides_any_allow(self):
        statements = [allow("ec2:*"), {"Effect": "Deny", "Action": "ec2:TerminateInstances", "Resource": "*", "Sid": "NoKill"}]
        decision = evaluate(statements, "ec2:TerminateInstances", INSTANCE, {})
        assert (decision.verdict, decision.statement) == (EXPLICIT_DENY, "NoKill")
        assert evaluate(statements, "ec2:DescribeInstances", "*", {}).verdict == ALLOW

    def test_action_names_are_case_insensitive_and_take_wildcards(self):
        # "IAM JSON policy elements: Action": "ec2:Describe*" and case-insensitive action names.
        assert evaluate([allow("EC2:describe*")], "ec2:DescribeInstances", "*", {}).allowed
        assert not evaluate([allow("ec2:Describe*")], "ec2:TerminateInstances", "*", {}).allowed

    def test_not_action_allows_everything_else(self):
        # "IAM JSON policy elements: NotAction": Allow with NotAction allows every action not listed.
        statements = [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]
        assert evaluate(statements, "ec2:RunInstances", "*", {}).allowed
        assert not evaluate(statements, "iam:PassRole", "*", {}).allowed

    def test_resource_wildcards_and_not_resource(self):
        # "IAM JSON policy elements: Resource": * matches any run of characters, ? one character.
        assert evaluate([allow("ec2:TerminateInstances", "arn:aws:ec2:*:*:instance/*")], "ec2:TerminateInstances", INSTANCE, {}).allowed
        assert not evaluate([allow("ec2:TerminateInstances", "arn:aws:ec2:*:*:volume/*")], "ec2:TerminateInstances", INSTANCE, {}).allowed
        assert evaluate([allow("s3:GetObject", "arn:aws:s3:::bucket/file-?")], "s3:GetObject", "arn:aws:s3:::bucket/file-1", {}).allowed
        not_resource = [{"Effect": "Allow", "Action": "s3:*", "NotResource": "arn:aws:s3:::secret/*"}]
        assert not evaluate(not_resource, "s3:GetObject", "arn:aws:s3:::secret/x", {}).allowed
        assert evaluate(not_resource, "s3:GetObject", "arn:aws:s3:::open/x", {}).allowed


class TestConditions:
    """IAM User Guide, "IAM JSON policy elements: Condition operators" and "Condition element"."""

    TAGGED = {"StringEquals": {"aws:ResourceTag/nodescale.io/cluster": "demo"}}

    def test_every_key_must_hold_and_any_value_of_a_key_may(self):
        # "Creating a condition with multiple keys or values": keys ANDed, values of one key ORed.
        condition = {"StringEquals": {"aws:RequestTag/team": ["a", "b"], "aws:RequestedRegion": "us-east-1"}}
        statements = [allow("ec2:CreateFleet", condition=condition)]
        ok = context_of({"aws:RequestTag/team": "b", "aws:RequestedRegion": "us-east-1"})
        assert evaluate(statements, "ec2:CreateFleet", "*", ok).allowed
        wrong_region = context_of({"aws:RequestTag/team": "b", "aws:RequestedRegion": "eu-west-1"})
        assert not evaluate(statements, "ec2:CreateFleet", "*", wrong_region).allowed

    def test_a_missing_key_fails_the_condition(self):
        statements = [allow("ec2:TerminateInstances", condition=self.TAGGED)]
        assert not evaluate(statements, "ec2:TerminateInstances", INSTANCE, {}).allowed
        assert evaluate(statements, "ec2:TerminateInstances", INSTANCE,
                        context_of({"aws:ResourceTag/nodescale.io/cluster": "demo"})).allowed

    def test_keys_compare_case_insensitively_values_case_sensitively(self):
        statements = [allow("ec2:TerminateInstances", condition=self.TAGGED)]
        assert evaluate(statements, "ec2:TerminateInstances", INSTANCE,
                        context_of({"AWS:RESOURCETAG/NODESCALE.IO/CLUSTER": "demo"})).allowed
        assert not evaluate(statements, "ec2:TerminateInstances", INSTANCE,
                            context_of({"aws:ResourceTag/nodescale.io/cluster": "DEMO"})).allowed

    def test_string_like_and_negated_operators(self):
        like = [allow("ssm:GetParameter", condition={"StringLike": {"ssm:Name": "/app/*"}})]
        assert evaluate(like, "ssm:GetParameter", "*", context_of({"ssm:Name": "/app/x"})).allowed
        not_equals = [allow("ec2:RunInstances", condition={"StringNotEquals": {"ec2:InstanceType": ["t2.micro", "t3.micro"]}})]
        assert evaluate(not_equals, "ec2:RunInstances", "*", context_of({"ec2:InstanceType": "m5.large"})).allowed
        assert not evaluate(not_equals, "ec2:RunInstances", "*", context_of({"ec2:InstanceType": "t3.micro"})).allowed

    def test_if_exists_holds_when_the_key_is_absent(self):
        # "...IfExists condition operators": "If the policy key is not present, the condition evaluates to true."
        statements = [allow("ec2:RunInstances", condition={"StringEqualsIfExists": {"ec2:InstanceType": "t3.micro"}})]
        assert evaluate(statements, "ec2:RunInstances", "*", {}).allowed
        assert not evaluate(statements, "ec2:RunInstances", "*", context_of({"ec2:InstanceType": "m5.large"})).allowed

    def test_null_checks_presence(self):
        # "Condition operator to check existence of condition keys": Null true means the key is absent.
        absent = [allow("ec2:CreateFleet", condition={"Null": {"aws:RequestTag/team": "true"}})]
        assert evaluate(absent, "ec2:CreateFleet", "*", {}).allowed
        assert not evaluate(absent, "ec2:CreateFleet", "*", context_of({"aws:RequestTag/team": "a"})).allowed

    def test_bool_and_numeric(self):
        secure = [allow("s3:GetObject", condition={"Bool": {"aws:SecureTransport": "true"}})]
        assert evaluate(secure, "s3:GetObject", "*", context_of({"aws:SecureTransport": "true"})).allowed
        assert not evaluate(secure, "s3:GetObject", "*", context_of({"aws:SecureTransport": "false"})).allowed
        small = [allow("s3:ListBucket", condition={"NumericLessThanEquals": {"s3:max-keys": "10"}})]
        assert evaluate(small, "s3:ListBucket", "*", context_of({"s3:max-keys": "10"})).allowed
        assert not evaluate(small, "s3:ListBucket", "*", context_of({"s3:max-keys": "11"})).allowed

    def test_arn_like_compares_each_part(self):
        statements = [allow("iam:PassRole", condition={"ArnLike": {"aws:SourceArn": "arn:aws:lambda:*:123456789012:function:*"}})]
        assert evaluate(statements, "iam:PassRole", "*", context_of(
            {"aws:SourceArn": "arn:aws:lambda:us-east-1:123456789012:function:f"})).allowed
        assert not evaluate(statements, "iam:PassRole", "*", context_of(
            {"aws:SourceArn": "arn:aws:lambda:us-east-1:999999999999:function:f"})).allowed

    def test_unknown_operators_are_refused_not_guessed(self):
        with pytest.raises(UnsupportedCondition):
            evaluate([allow("ec2:X", condition={"DateLessThanOrWhatever": {"aws:CurrentTime": "x"}})], "ec2:X", "*", {})


class TestMultivaluedKeys:
    """IAM User Guide, "Single-valued vs. multivalued context keys" (aws:TagKeys examples)."""

    def test_for_all_values_every_value_in_the_set(self):
        statements = [allow("ec2:CreateTags", condition={"ForAllValues:StringEquals": {"aws:TagKeys": ["env", "team"]}})]
        assert evaluate(statements, "ec2:CreateTags", "*", context_of({"aws:TagKeys": ["env"]})).allowed
        assert not evaluate(statements, "ec2:CreateTags", "*", context_of({"aws:TagKeys": ["env", "cost"]})).allowed
        # "...returns true if there are no context keys in the request": the documented pitfall.
        assert evaluate(statements, "ec2:CreateTags", "*", {}).allowed

    def test_for_any_value_one_value_in_the_set(self):
        statements = [allow("ec2:CreateTags", condition={"ForAnyValue:StringEquals": {"aws:TagKeys": ["env", "team"]}})]
        assert evaluate(statements, "ec2:CreateTags", "*", context_of({"aws:TagKeys": ["cost", "team"]})).allowed
        assert not evaluate(statements, "ec2:CreateTags", "*", context_of({"aws:TagKeys": ["cost"]})).allowed
        assert not evaluate(statements, "ec2:CreateTags", "*", {}).allowed


class TestEc2TagOnCreate:
    """Amazon EC2 User Guide, "Grant permission to tag Amazon EC2 resources during creation": the example
    that allows RunInstances only with a tag, and CreateTags only as part of the creating call."""

    POLICY = [
        allow("ec2:CreateFleet", "arn:aws:ec2:*:*:instance/*", {"StringEquals": {"aws:RequestTag/owner": "me"}}),
        allow("ec2:CreateTags", "arn:aws:ec2:*:*:instance/*", {"StringEquals": {"ec2:CreateAction": "CreateFleet"}}),
    ]

    def test_request_tags_come_from_the_tag_specification_of_each_resource_type(self):
        params = {
            "TagSpecification.1.ResourceType": "instance",
            "TagSpecification.1.Tag.1.Key": "owner", "TagSpecification.1.Tag.1.Value": "me",
            "TagSpecification.2.ResourceType": "fleet",
            "TagSpecification.2.Tag.1.Key": "owner", "TagSpecification.2.Tag.1.Value": "you",
        }
        specs = _tag_specifications(params, "TagSpecification")
        assert specs == {"instance": {"owner": "me"}, "fleet": {"owner": "you"}}
        arn = "arn:aws:ec2:us-east-1:123456789012:instance/*"
        assert evaluate(self.POLICY, "ec2:CreateFleet", arn, _request_tags(specs["instance"])).allowed
        assert not evaluate(self.POLICY, "ec2:CreateFleet", arn, _request_tags(specs["fleet"])).allowed
        assert _request_tags(specs["instance"])["aws:tagkeys"] == ["owner"]

    def test_create_tags_only_while_creating(self):
        arn = "arn:aws:ec2:us-east-1:123456789012:instance/i-1"
        assert evaluate(self.POLICY, "ec2:CreateTags", arn, context_of({"ec2:CreateAction": "CreateFleet"})).allowed
        assert not evaluate(self.POLICY, "ec2:CreateTags", arn, {}).allowed


def test_ssm_parameter_arns_as_aws_forms_them():
    # SSM's ARN for a parameter path drops the trailing slash; public parameters have no account.
    assert _ssm_arn("/nodescale/c/nodepools/") == "arn:aws:ssm:us-east-1:123456789012:parameter/nodescale/c/nodepools"
    assert _ssm_arn("/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id") == \
        "arn:aws:ssm:us-east-1::parameter/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"


def test_the_operator_may_do_what_any_function_may_and_the_admin_anything():
    policies = {
        "provisioner": [allow("ec2:CreateFleet")],
        "interruption": [allow("dynamodb:GetItem")],
        "disruption": [allow("ec2:DescribeInstanceStatus")],
        "cleanup": [allow("ec2:DescribeInstances")],
    }
    enforcer = Enforcer(policies, "http://127.0.0.1:1", "demo")
    assert enforcer.decide("operator", "dynamodb", "GetItem", {"TableName": "t"}, "/") is None
    denial = enforcer.decide("cleanup", "ec2", "DescribeInstanceStatus", {}, "/")
    assert denial is not None and denial.action == "ec2:DescribeInstanceStatus"
    assert "assumed-role/nodescale-demo-cleanup/cleanup" in denial.message()
    assert enforcer.decide("admin", "iam", "DeleteRole", {"RoleName": "x"}, "/") is None
