"""sim's IAM evaluator against the behaviour AWS documents: each test names the page it restates."""

from __future__ import annotations

import pytest

from sim.aws.iam_enforcement import Enforcer, _request_tags, _ssm_arn, _tag_specifications
from sim.aws.iam_policy import (
    ALLOW,
    EXPLICIT_DENY,
    IMPLICIT_DENY,
    MalformedPolicy,
    UnsupportedCondition,
    context_of,
    evaluate,
    evaluate_with_resource_policy,
    validate,
)

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


class TestWhatHidTheNextMistake:
    """#28 ("sim, compared with independent references"): where sim's evaluator differed from AWS in ways today's
    policies did not show, each against the AWS page that decides it."""

    IMDSV2 = [  # IAM User Guide, "Example policies for working with Amazon EC2": require IMDSv2 on RunInstances
        allow("ec2:RunInstances"),
        {"Sid": "RequireImdsV2", "Effect": "Deny", "Action": "ec2:RunInstances",
         "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": {"StringNotEquals": {"ec2:MetadataHttpTokens": "required"}}},
    ]

    @pytest.mark.parametrize("operator, value", [
        ("StringNotEquals", "x"), ("StringNotEqualsIgnoreCase", "x"), ("StringNotLike", "x*"),
        ("ArnNotEquals", "arn:aws:events:us-east-1:123456789012:rule/r"),
        ("ArnNotLike", "arn:aws:events:*:*:rule/*"), ("NumericNotEquals", "1"),
        ("DateNotEquals", "2020-01-01T00:00:00Z"), ("NotIpAddress", "10.0.0.0/8"),
    ])
    def test_a_negated_operator_holds_when_the_key_is_missing(self, operator, value):
        # "Condition operators": a negated operator evaluates to true when the key is not in the request
        # context; the old evaluator said false, so a Deny guarded by one was skipped.
        deny = [allow("sqs:SendMessage"),
                {"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": "*", "Condition": {operator: {"k:key": value}}}]
        assert evaluate(deny, "sqs:SendMessage", "*", {}).verdict == EXPLICIT_DENY

    def test_the_imdsv2_example_denies_a_launch_that_does_not_say(self):
        instance = "arn:aws:ec2:us-east-1:123456789012:instance/*"
        assert evaluate(self.IMDSV2, "ec2:RunInstances", instance, {}).verdict == EXPLICIT_DENY
        assert evaluate(self.IMDSV2, "ec2:RunInstances", instance, context_of({"ec2:MetadataHttpTokens": "optional"})
                        ).verdict == EXPLICIT_DENY
        assert evaluate(self.IMDSV2, "ec2:RunInstances", instance, context_of({"ec2:MetadataHttpTokens": "required"})
                        ).allowed

    def test_if_exists_null_and_set_qualifiers_with_a_missing_key(self):
        # "...IfExists condition operators", "Condition operator to check existence of condition keys",
        # "Set operators for multivalued context keys" (ForAnyValue is false without the key). The old evaluator
        # got these right: this holds them so while negated operators changed beside them.
        cases = {"StringNotEqualsIfExists": True, "StringEqualsIfExists": True, "ForAllValues:StringNotEquals": True,
                 "ForAnyValue:StringNotEquals": False, "ForAnyValue:StringEquals": False}
        for operator, holds in cases.items():
            statements = [allow("ec2:CreateTags", condition={operator: {"aws:TagKeys": "x"}})]
            assert evaluate(statements, "ec2:CreateTags", "*", {}).allowed is holds, operator
        present = [allow("ec2:CreateTags", condition={"Null": {"aws:TagKeys": False}})]  # a JSON false
        assert evaluate(present, "ec2:CreateTags", "*", context_of({"aws:TagKeys": ["a"]})).allowed
        assert not evaluate(present, "ec2:CreateTags", "*", {}).allowed

    def test_policy_variables_in_resource_and_condition(self):
        # "IAM policy elements: Variables and tags": ${aws:username} in Resource; ${aws:PrincipalTag/team} in a
        # condition; ${*} ${?} ${$} stand for the character, never a wildcard; a default when the key is missing.
        own = [allow("s3:GetObject", "arn:aws:s3:::home/${aws:username}/*")]
        alice = context_of({"aws:username": "alice"})
        assert evaluate(own, "s3:GetObject", "arn:aws:s3:::home/alice/notes", alice).allowed
        assert not evaluate(own, "s3:GetObject", "arn:aws:s3:::home/bob/notes", alice).allowed
        assert not evaluate(own, "s3:GetObject", "arn:aws:s3:::home/alice/notes", {}).allowed
        team = [allow("ec2:StartInstances", condition={
            "StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}})]
        assert evaluate(team, "ec2:StartInstances", "*", context_of(
            {"aws:PrincipalTag/team": "red", "aws:ResourceTag/team": "red"})).allowed
        assert not evaluate(team, "ec2:StartInstances", "*", context_of(
            {"aws:PrincipalTag/team": "red", "aws:ResourceTag/team": "blue"})).allowed
        star = [allow("s3:GetObject", "arn:aws:s3:::bucket/${*}")]
        assert evaluate(star, "s3:GetObject", "arn:aws:s3:::bucket/*", {}).allowed
        assert not evaluate(star, "s3:GetObject", "arn:aws:s3:::bucket/anything", {}).allowed
        fallback = [allow("s3:GetObject", "arn:aws:s3:::home/${aws:username, 'guest'}/*")]
        assert evaluate(fallback, "s3:GetObject", "arn:aws:s3:::home/guest/x", {}).allowed
        source = [{"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": "*",
                   "Condition": {"ArnNotEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:123456789012:${aws:username}"}}},
                  allow("sqs:SendMessage")]
        assert evaluate(source, "sqs:SendMessage", "*", context_of(
            {"aws:username": "t", "aws:SourceArn": "arn:aws:sns:us-east-1:123456789012:t"})).allowed

    def test_a_json_true_matches_the_string_true(self):
        # "Condition operators": values compare as strings; a JSON true in a policy is "true".
        statements = [allow("s3:GetObject", condition={"Bool": {"aws:SecureTransport": True},
                                                       "StringEquals": {"aws:MultiFactorAuthPresent": True}})]
        context = context_of({"aws:SecureTransport": "true", "aws:MultiFactorAuthPresent": "true"})
        assert evaluate(statements, "s3:GetObject", "*", context).allowed

    def test_date_and_ip_operators(self):
        # "Date condition operators" (ISO 8601 or epoch seconds), "IP address condition operators" (CIDR).
        window = [allow("s3:GetObject", condition={"DateGreaterThan": {"aws:CurrentTime": "2024-01-01T00:00:00Z"},
                                                   "DateLessThan": {"aws:CurrentTime": "1735689600"}})]
        assert evaluate(window, "s3:GetObject", "*", context_of({"aws:CurrentTime": "2024-06-01T12:00:00Z"})).allowed
        assert not evaluate(window, "s3:GetObject", "*", context_of({"aws:CurrentTime": "2025-06-01T12:00:00Z"})).allowed
        office = [allow("s3:GetObject", condition={"IpAddress": {"aws:SourceIp": ["203.0.113.0/24", "2001:db8::/32"]}})]
        assert evaluate(office, "s3:GetObject", "*", context_of({"aws:SourceIp": "203.0.113.7"})).allowed
        assert evaluate(office, "s3:GetObject", "*", context_of({"aws:SourceIp": "2001:db8::1"})).allowed
        assert not evaluate(office, "s3:GetObject", "*", context_of({"aws:SourceIp": "198.51.100.1"})).allowed
        outside = [{"Effect": "Deny", "Action": "*", "Resource": "*",
                    "Condition": {"NotIpAddress": {"aws:SourceIp": "203.0.113.0/24"}}}, allow("s3:GetObject")]
        assert evaluate(outside, "s3:GetObject", "*", context_of({"aws:SourceIp": "198.51.100.1"})).verdict == EXPLICIT_DENY

    def test_an_action_without_a_service_prefix_is_refused_when_the_policy_is_loaded(self):
        # IAM refuses such a document (MalformedPolicyDocument: "Actions/Conditions must be prefaced by a vendor").
        policies = {fn: [allow("ec2:DescribeInstances")] for fn in ("provisioner", "interruption", "disruption", "cleanup")}
        policies["provisioner"] = [allow("CreateFleet")]
        with pytest.raises(MalformedPolicy, match="CreateFleet"):
            Enforcer(policies, "http://127.0.0.1:1", "demo")
        for bad in ({"Effect": "Allow", "Action": "ec2:X", "Resource": "*", "Condition": {"StringEqualz": {"a:b": "c"}}},
                    {"Effect": "Allow", "Action": "ec2:Create:Fleet", "Resource": "*"},
                    {"Effect": "Permit", "Action": "ec2:X", "Resource": "*"},
                    {"Effect": "Allow", "Action": "ec2:X"}):
            with pytest.raises(MalformedPolicy):
                validate([bad])


class TestResourcePolicies:
    """IAM User Guide, "Policy evaluation logic" ("Identity-based and resource-based policies", "explicit deny")
    and "Cross-account policy evaluation logic"."""

    QUEUE = "arn:aws:sqs:us-east-1:123456789012:q"
    RULE = "arn:aws:events:us-east-1:123456789012:rule/r"
    ADMIN = "arn:aws:iam::123456789012:user/admin"
    POLICY = [
        {"Sid": "EventBridge", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": QUEUE, "Condition": {"ArnEquals": {"aws:SourceArn": RULE}}},
        {"Sid": "OnlyTheRule", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "sqs:SendMessage",
         "Resource": QUEUE, "Condition": {"ArnNotEquals": {"aws:SourceArn": RULE}}},
    ]

    def decide(self, principal, identity, context):
        return evaluate_with_resource_policy(identity, self.POLICY, "sqs:SendMessage", self.QUEUE,
                                             context_of(context), principal, "123456789012")

    def test_a_deny_in_the_resource_policy_wins_over_any_identity_allow(self):
        decision = self.decide(self.ADMIN, [allow("sqs:*")], {})
        assert (decision.verdict, decision.statement, decision.policy) == (EXPLICIT_DENY, "OnlyTheRule", "resource-based")
        assert self.decide(self.ADMIN, None, {}).verdict == EXPLICIT_DENY  # sim's unrestricted administrator too

    def test_the_rules_delivery_is_allowed_by_the_resource_policy_alone(self):
        assert self.decide("events.amazonaws.com", None, {"aws:SourceArn": self.RULE}).allowed
        other_rule = {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/other"}
        assert not self.decide("events.amazonaws.com", [], other_rule).allowed

    def test_an_account_principal_defers_to_the_identity_policy(self):
        account = [{"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sqs:*",
                    "Resource": "*"}]
        role = "arn:aws:sts::123456789012:assumed-role/r/s"
        assert not evaluate_with_resource_policy([], account, "sqs:SendMessage", self.QUEUE, {}, role, "123456789012").allowed
        named = [{**account[0], "Principal": {"AWS": "arn:aws:iam::123456789012:role/r"}}]
        assert evaluate_with_resource_policy([], named, "sqs:SendMessage", self.QUEUE, {}, role, "123456789012").allowed
