"""IAM cases decided by both sim's evaluator (sim/aws/iam_policy.py) and @cloud-copilot/iam-simulate (#28).

Each case: a name, the AWS page it restates (`doc`), the calling principal, the action, the resource, the
request context, the identity policy's statements and, for a resource-based policy, its statements. A case on
which the two references would disagree carries `aws`: the decision AWS documents, with `doc` naming where; none
does today. Actions, resource ARNs and condition keys are real ones, because iam-simulate checks them against the
Service Authorization Reference.
"""

from __future__ import annotations

from typing import Any

ACCOUNT = "123456789012"
OTHER_ACCOUNT = "210987654321"
ALICE = f"arn:aws:iam::{ACCOUNT}:user/alice"
ROLE_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/nodescale-demo-interruption/interruption"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/nodescale-demo-interruption"
STRANGER = f"arn:aws:iam::{OTHER_ACCOUNT}:user/mallory"
INSTANCE = f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-0123456789abcdef0"
QUEUE = f"arn:aws:sqs:us-east-1:{ACCOUNT}:nodescale-demo-interruption"
RULE = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/nodescale-demo-spot-interruption"
OTHER_RULE = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/someone-elses"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"
BUCKET = "arn:aws:s3:::amzn-s3-demo-bucket"

EVALUATION = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html"
OPERATORS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html"
MULTIVALUED = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html"
VARIABLES = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html"
NOT_ACTION = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notaction.html"
NOT_RESOURCE = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notresource.html"
RESOURCE = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html"
IMDSV2 = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html#iam-example-instance-metadata-requireIMDSv2"
CONFUSED_DEPUTY = "https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html"
SQS_EVENTBRIDGE = "https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions"
CROSS_ACCOUNT = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic-cross-account.html"
PRINCIPAL = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html"
NOT_PRINCIPAL = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_notprincipal.html"
ACTION = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_action.html"


def _allow(action: Any, resource: Any = "*", condition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": resource, **extra}
    if condition:
        statement["Condition"] = condition
    return statement


def _deny(action: Any, resource: Any = "*", condition: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {**_allow(action, resource, condition, **extra), "Effect": "Deny"}


def case(name: str, doc: str, action: str, resource: str, identity: list[dict[str, Any]] | None,
         context: dict[str, Any] | None = None, resource_policy: list[dict[str, Any]] | None = None,
         principal: str = ALICE) -> dict[str, Any]:
    return {"name": name, "doc": doc, "principal": principal, "action": action, "resource": resource,
            "context": context or {}, "identity": identity, "resourcePolicy": resource_policy}


def _basics() -> list[dict[str, Any]]:
    get = "s3:GetObject"
    obj = f"{BUCKET}/reports/q1.csv"
    return [
        case("nothing allows by default", EVALUATION, get, obj, []),
        case("a matching allow", EVALUATION, get, obj, [_allow(get, obj)]),
        case("an allow for another action", EVALUATION, get, obj, [_allow("s3:PutObject", obj)]),
        case("an action wildcard", EVALUATION, get, obj, [_allow("s3:Get*")]),
        case("action names ignore case", EVALUATION, get, obj, [_allow("S3:getobject")]),
        case("the all-actions wildcard", EVALUATION, get, obj, [_allow("*")]),
        case("a ? in the action", EVALUATION, get, obj, [_allow("s3:GetObjec?")]),
        case("explicit deny beats allow", EVALUATION, get, obj, [_allow("s3:*"), _deny(get, obj)]),
        case("a deny for another resource", EVALUATION, get, obj, [_allow("s3:*"), _deny(get, f"{BUCKET}/secret/*")]),
        case("resource wildcard spans slashes", RESOURCE, get, obj, [_allow(get, f"{BUCKET}/*")]),
        case("resource ? is one character", RESOURCE, get, obj, [_allow(get, f"{BUCKET}/reports/q?.csv")]),
        case("resource ? is not two", RESOURCE, get, obj, [_allow(get, f"{BUCKET}/reports/?.csv")]),
        case("resource is case-sensitive", RESOURCE, get, obj, [_allow(get, f"{BUCKET}/Reports/*")]),
        case("one of several resources", RESOURCE, get, obj, [_allow(get, [f"{BUCKET}/x/*", f"{BUCKET}/reports/*"])]),
        case("NotAction allows the rest", NOT_ACTION, get, obj, [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]),
        case("NotAction excludes its own", NOT_ACTION, get, obj, [{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}]),
        case("NotAction deny beats allow", NOT_ACTION, get, obj,
             [_allow("*"), {"Effect": "Deny", "NotAction": ["iam:*", "sts:*"], "Resource": "*"}]),
        case("NotResource allows elsewhere", NOT_RESOURCE, get, obj,
             [{"Effect": "Allow", "Action": "s3:*", "NotResource": f"{BUCKET}/secret/*"}]),
        case("NotResource excludes its own", NOT_RESOURCE, get, f"{BUCKET}/secret/k",
             [{"Effect": "Allow", "Action": "s3:*", "NotResource": f"{BUCKET}/secret/*"}]),
        case("NotResource deny guards all but one", NOT_RESOURCE, get, obj,
             [_allow("s3:*"), {"Effect": "Deny", "Action": "s3:*", "NotResource": f"{BUCKET}/public/*"}]),
        case("terminate only tagged instances: tagged", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEquals": {"aws:ResourceTag/nodescale.io/cluster": "demo"}})],
             {"aws:ResourceTag/nodescale.io/cluster": "demo"}),
        case("terminate only tagged instances: untagged", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEquals": {"aws:ResourceTag/nodescale.io/cluster": "demo"}})]),
        case("condition values are case-sensitive", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEquals": {"aws:ResourceTag/team": "red"}})],
             {"aws:ResourceTag/team": "RED"}),
        case("StringEqualsIgnoreCase", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEqualsIgnoreCase": {"aws:ResourceTag/team": "red"}})],
             {"aws:ResourceTag/team": "RED"}),
        case("keys AND, values OR", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEquals": {
                 "aws:ResourceTag/team": ["red", "blue"], "aws:RequestedRegion": "us-east-1"}})],
             {"aws:ResourceTag/team": "blue", "aws:RequestedRegion": "eu-west-1"}),
        case("values OR", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringEquals": {
                 "aws:ResourceTag/team": ["red", "blue"], "aws:RequestedRegion": "us-east-1"}})],
             {"aws:ResourceTag/team": "blue", "aws:RequestedRegion": "us-east-1"}),
        case("StringLike", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringLike": {"aws:ResourceTag/Name": "web-*"}})],
             {"aws:ResourceTag/Name": "web-01"}),
        case("StringLike no match", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringLike": {"aws:ResourceTag/Name": "web-*"}})],
             {"aws:ResourceTag/Name": "db-01"}),
        case("a positive operator with its key missing", OPERATORS, "ec2:TerminateInstances", INSTANCE,
             [_allow("ec2:TerminateInstances", condition={"StringLike": {"aws:ResourceTag/Name": "*"}})]),
    ]


_NEGATED: list[tuple[str, str, str, str, str, str]] = [
    # operator, key, policy value, a matching request value, a different one, the action's resource
    ("StringNotEquals", "ec2:MetadataHttpTokens", "required", "required", "optional", "ec2:RunInstances"),
    ("StringNotEqualsIgnoreCase", "ec2:MetadataHttpTokens", "REQUIRED", "required", "optional", "ec2:RunInstances"),
    ("StringNotLike", "ec2:InstanceType", "t3.*", "t3.micro", "m5.large", "ec2:RunInstances"),
    ("ArnNotEquals", "aws:SourceArn", RULE, RULE, OTHER_RULE, "sqs:SendMessage"),
    ("ArnNotLike", "aws:SourceArn", f"arn:aws:events:*:{ACCOUNT}:rule/nodescale-*", RULE, OTHER_RULE, "sqs:SendMessage"),
    ("NumericNotEquals", "aws:MultiFactorAuthAge", "3600", "3600", "60", "s3:GetObject"),
    ("DateNotEquals", "aws:CurrentTime", "2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2025-06-01T00:00:00Z",
     "s3:GetObject"),
    ("NotIpAddress", "aws:SourceIp", "203.0.113.0/24", "203.0.113.9", "198.51.100.9", "s3:GetObject"),
]
_RESOURCE_OF = {"ec2:RunInstances": f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/*", "sqs:SendMessage": QUEUE,
                "s3:GetObject": f"{BUCKET}/k"}


def _negated() -> list[dict[str, Any]]:
    out = []
    for operator, key, value, same, other, action in _NEGATED:
        statements = [_allow(action), _deny(action, condition={operator: {key: value}}, Sid="Guard")]
        resource = _RESOURCE_OF[action]
        out += [
            case(f"{operator}: key missing denies", OPERATORS, action, resource, statements),
            case(f"{operator}: matching value allows", OPERATORS, action, resource, statements, {key: same}),
            case(f"{operator}: other value denies", OPERATORS, action, resource, statements, {key: other}),
        ]
        out.append(case(f"{operator}IfExists: key missing allows", OPERATORS, action, resource,
                        [_allow(action), _deny(action, condition={f"{operator}IfExists": {key: value}})]))
    return out


def _if_exists_and_null() -> list[dict[str, Any]]:
    run = "ec2:RunInstances"
    instance = _RESOURCE_OF[run]
    out = []
    for operator, key, value, good, bad in [
        ("StringEqualsIfExists", "ec2:InstanceType", "t3.micro", "t3.micro", "m5.large"),
        ("StringLikeIfExists", "ec2:InstanceType", "t3.*", "t3.small", "m5.large"),
        ("NumericLessThanIfExists", "aws:MultiFactorAuthAge", "3600", "60", "7200"),
        ("BoolIfExists", "aws:MultiFactorAuthPresent", "true", "true", "false"),
        ("ArnLikeIfExists", "aws:SourceArn", "arn:aws:events:*:*:rule/*", RULE, TOPIC),
    ]:
        statements = [_allow(run, condition={operator: {key: value}})]
        out += [
            case(f"{operator}: key missing allows", OPERATORS, run, instance, statements),
            case(f"{operator}: matching value allows", OPERATORS, run, instance, statements, {key: good}),
            case(f"{operator}: other value does not", OPERATORS, run, instance, statements, {key: bad}),
        ]
    for want in ("true", "false"):
        statements = [_allow(run, condition={"Null": {"aws:RequestTag/team": want}})]
        out += [
            case(f"Null {want}: key missing", OPERATORS, run, instance, statements),
            case(f"Null {want}: key present", OPERATORS, run, instance, statements, {"aws:RequestTag/team": "red"}),
        ]
    out.append(case("Null with a JSON true", OPERATORS, run, instance,
                     [_allow(run, condition={"Null": {"aws:RequestTag/team": True}})]))
    return out


def _sets() -> list[dict[str, Any]]:
    tag = "ec2:CreateTags"
    out = []
    for operator in ("ForAllValues:StringEquals", "ForAnyValue:StringEquals", "ForAllValues:StringNotEquals",
                     "ForAnyValue:StringNotEquals", "ForAllValues:StringLike"):
        statements = [_allow(tag, condition={operator: {"aws:TagKeys": ["env", "team*" if "Like" in operator else "team"]}})]
        for label, keys in [("missing", None), ("inside", ["env", "team"]), ("partly", ["env", "cost"]),
                            ("outside", ["cost"])]:
            out.append(case(f"{operator}: tag keys {label}", MULTIVALUED, tag, INSTANCE, statements,
                            {"aws:TagKeys": keys} if keys else None))
    out.append(case("ForAllValues guarded by Null (the documented pattern)", MULTIVALUED, tag, INSTANCE,
                    [_allow(tag, condition={"ForAllValues:StringEquals": {"aws:TagKeys": ["env"]},
                                            "Null": {"aws:TagKeys": "false"}})]))
    return out


def _variables() -> list[dict[str, Any]]:
    get = "s3:GetObject"
    home = [_allow(get, f"{BUCKET}/home/${{aws:username}}/*")]
    team = [_allow("ec2:StartInstances", INSTANCE.rsplit("/", 1)[0] + "/*",
                   {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}})]
    return [
        case("${aws:username} in Resource: own folder", VARIABLES, get, f"{BUCKET}/home/alice/notes.txt", home,
             {"aws:username": "alice"}),
        case("${aws:username} in Resource: another's", VARIABLES, get, f"{BUCKET}/home/bob/notes.txt", home,
             {"aws:username": "alice"}),
        case("${aws:username} in Resource: no username", VARIABLES, get, f"{BUCKET}/home/alice/notes.txt", home),
        case("a default for a missing variable", VARIABLES, get, f"{BUCKET}/home/guest/x",
             [_allow(get, f"{BUCKET}/home/${{aws:username, 'guest'}}/*")]),
        case("${aws:PrincipalTag/team} in a condition: same team", VARIABLES, "ec2:StartInstances", INSTANCE, team,
             {"aws:PrincipalTag/team": "red", "aws:ResourceTag/team": "red"}),
        case("${aws:PrincipalTag/team} in a condition: other team", VARIABLES, "ec2:StartInstances", INSTANCE, team,
             {"aws:PrincipalTag/team": "red", "aws:ResourceTag/team": "blue"}),
        case("${*} is a literal star: the star", VARIABLES, get, f"{BUCKET}/*", [_allow(get, f"{BUCKET}/${{*}}")]),
        case("${*} is a literal star: not a wildcard", VARIABLES, get, f"{BUCKET}/k", [_allow(get, f"{BUCKET}/${{*}}")]),
        case("${?} is a literal question mark", VARIABLES, get, f"{BUCKET}/a", [_allow(get, f"{BUCKET}/${{?}}")]),
        case("${$} is a literal dollar", VARIABLES, get, f"{BUCKET}/$x", [_allow(get, f"{BUCKET}/${{$}}x")]),
        case("${aws:PrincipalAccount} in a negated condition", VARIABLES, "sqs:SendMessage", QUEUE,
             [_allow("sqs:SendMessage"),
              _deny("sqs:SendMessage", condition={"StringNotEquals": {"aws:SourceAccount": "${aws:PrincipalAccount}"}})],
             {"aws:SourceAccount": ACCOUNT, "aws:PrincipalAccount": ACCOUNT}),
        case("a variable in StringLike", VARIABLES, "ec2:StartInstances", INSTANCE,
             [_allow("ec2:StartInstances", condition={"StringLike": {"aws:ResourceTag/owner": "${aws:username}*"}})],
             {"aws:username": "alice", "aws:ResourceTag/owner": "alice-admin"}),
    ]


def _types() -> list[dict[str, Any]]:
    get = "s3:GetObject"
    obj = f"{BUCKET}/k"
    return [
        case("a JSON true matches \"true\" (Bool)", OPERATORS, get, obj,
             [_allow(get, condition={"Bool": {"aws:SecureTransport": True}})], {"aws:SecureTransport": "true"}),
        case("a JSON true against \"false\"", OPERATORS, get, obj,
             [_allow(get, condition={"Bool": {"aws:SecureTransport": True}})], {"aws:SecureTransport": "false"}),
        case("the stack's TLS-only deny over plain HTTP", OPERATORS, get, obj,
             [_allow(get), _deny("s3:*", condition={"Bool": {"aws:SecureTransport": "false"}})],
             {"aws:SecureTransport": "false"}),
        case("a JSON number in NumericLessThan", OPERATORS, "s3:ListBucket", BUCKET,
             [_allow("s3:ListBucket", condition={"NumericLessThanEquals": {"s3:max-keys": 10}})], {"s3:max-keys": "10"}),
        case("NumericGreaterThan", OPERATORS, "s3:ListBucket", BUCKET,
             [_allow("s3:ListBucket", condition={"NumericGreaterThan": {"s3:max-keys": "10"}})], {"s3:max-keys": "10"}),
        case("DateGreaterThan", OPERATORS, get, obj,
             [_allow(get, condition={"DateGreaterThan": {"aws:CurrentTime": "2024-01-01T00:00:00Z"}})],
             {"aws:CurrentTime": "2024-06-01T00:00:00Z"}),
        case("DateLessThan", OPERATORS, get, obj,
             [_allow(get, condition={"DateLessThan": {"aws:CurrentTime": "2024-01-01T00:00:00Z"}})],
             {"aws:CurrentTime": "2024-06-01T00:00:00Z"}),
        case("DateLessThanEquals at the instant", OPERATORS, get, obj,
             [_allow(get, condition={"DateLessThanEquals": {"aws:CurrentTime": "2024-06-01T00:00:00Z"}})],
             {"aws:CurrentTime": "2024-06-01T00:00:00Z"}),
        case("DateEquals with a date only", OPERATORS, get, obj,
             [_allow(get, condition={"DateEquals": {"aws:CurrentTime": "2024-06-01"}})],
             {"aws:CurrentTime": "2024-06-01T00:00:00Z"}),
        case("DateGreaterThanEquals, epoch seconds in the policy", OPERATORS, get, obj,
             [_allow(get, condition={"DateGreaterThanEquals": {"aws:CurrentTime": "1717200000"}})],
             {"aws:CurrentTime": "2024-06-01T00:00:00Z"}),
        case("IpAddress inside the range", OPERATORS, get, obj,
             [_allow(get, condition={"IpAddress": {"aws:SourceIp": "203.0.113.0/24"}})], {"aws:SourceIp": "203.0.113.7"}),
        case("IpAddress outside the range", OPERATORS, get, obj,
             [_allow(get, condition={"IpAddress": {"aws:SourceIp": "203.0.113.0/24"}})], {"aws:SourceIp": "203.0.114.7"}),
        case("IpAddress IPv6", OPERATORS, get, obj,
             [_allow(get, condition={"IpAddress": {"aws:SourceIp": "2001:db8::/32"}})], {"aws:SourceIp": "2001:db8::5"}),
        case("IpAddress with a bare address", OPERATORS, get, obj,
             [_allow(get, condition={"IpAddress": {"aws:SourceIp": "203.0.113.7"}})], {"aws:SourceIp": "203.0.113.7"}),
        case("ArnLike compares part by part", OPERATORS, "sqs:SendMessage", QUEUE,
             [_allow("sqs:SendMessage", condition={"ArnLike": {"aws:SourceArn": f"arn:aws:events:*:{ACCOUNT}:rule/*"}})],
             {"aws:SourceArn": RULE}),
        case("ArnLike: another account", OPERATORS, "sqs:SendMessage", QUEUE,
             [_allow("sqs:SendMessage", condition={"ArnLike": {"aws:SourceArn": f"arn:aws:events:*:{OTHER_ACCOUNT}:rule/*"}})],
             {"aws:SourceArn": RULE}),
        case("ArnEquals takes wildcards too", OPERATORS, "sqs:SendMessage", QUEUE,
             [_allow("sqs:SendMessage", condition={"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:*:rule/*"}})],
             {"aws:SourceArn": RULE}),
        case("iam:PassRole only to EC2", OPERATORS, "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/KarpenterNodeRole-demo",
             [_allow("iam:PassRole", condition={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}})],
             {"iam:PassedToService": "lambda.amazonaws.com"}),
    ]


def _imdsv2() -> list[dict[str, Any]]:
    run = "ec2:RunInstances"
    instance = f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/*"
    policy = [_allow(run), {"Sid": "RequireImdsV2", "Effect": "Deny", "Action": run,
                            "Resource": "arn:aws:ec2:*:*:instance/*",
                            "Condition": {"StringNotEquals": {"ec2:MetadataHttpTokens": "required"}}}]
    hop = [_allow(run), _deny(run, "arn:aws:ec2:*:*:instance/*",
                              {"NumericGreaterThan": {"ec2:MetadataHttpPutResponseHopLimit": "3"}})]
    return [
        case("IMDSv2 example: tokens unspecified", IMDSV2, run, instance, policy),
        case("IMDSv2 example: tokens optional", IMDSV2, run, instance, policy, {"ec2:MetadataHttpTokens": "optional"}),
        case("IMDSv2 example: tokens required", IMDSV2, run, instance, policy, {"ec2:MetadataHttpTokens": "required"}),
        case("IMDSv2 example: the deny names only instances", IMDSV2, run,
             f"arn:aws:ec2:us-east-1:{ACCOUNT}:volume/*", policy),
        case("hop limit example: 4 hops", IMDSV2, run, instance, hop, {"ec2:MetadataHttpPutResponseHopLimit": "4"}),
        case("hop limit example: unspecified", IMDSV2, run, instance, hop),
    ]


def _queue_policy() -> list[dict[str, Any]]:
    """The stack's interruption queue policy (infra/triggers.py), and AWS's confused-deputy examples."""
    send = "sqs:SendMessage"
    stack = [
        {"Sid": "EventBridgeSends", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": send,
         "Resource": QUEUE, "Condition": {"ArnEquals": {"aws:SourceArn": RULE}}},
        {"Sid": "OnlyTheStacksRulesSend", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": send,
         "Resource": QUEUE, "Condition": {"ArnNotEquals": {"aws:SourceArn": [RULE, f"{RULE}-2"]}}},
        {"Sid": "TlsOnly", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "sqs:*", "Resource": QUEUE,
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
    ]
    secure = {"aws:SecureTransport": "true"}
    deputy = [{"Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": send, "Resource": QUEUE,
               "Condition": {"ArnLike": {"aws:SourceArn": TOPIC}, "StringEquals": {"aws:SourceAccount": ACCOUNT}}}]
    account_wide = [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sqs:*",
                     "Resource": QUEUE}]
    return [
        case("queue: the rule's delivery", SQS_EVENTBRIDGE, send, QUEUE, None, {**secure, "aws:SourceArn": RULE},
             stack, "events.amazonaws.com"),
        case("queue: another rule's delivery", SQS_EVENTBRIDGE, send, QUEUE, None, {**secure, "aws:SourceArn": OTHER_RULE},
             stack, "events.amazonaws.com"),
        case("queue: a service with no source", CONFUSED_DEPUTY, send, QUEUE, None, secure, stack, "events.amazonaws.com"),
        case("queue: an admin's SendMessage", EVALUATION, send, QUEUE, [_allow("*")], secure, stack),
        case("queue: a role's SendMessage", EVALUATION, send, QUEUE, [_allow("sqs:*")], secure, stack, ROLE_SESSION),
        case("queue: an admin forging the rule's source", EVALUATION, send, QUEUE, [_allow("*")],
             {**secure, "aws:SourceArn": RULE}, stack),
        case("queue: the function receives", EVALUATION, "sqs:ReceiveMessage", QUEUE,
             [_allow(["sqs:ReceiveMessage", "sqs:DeleteMessage"], QUEUE)], secure, stack, ROLE_SESSION),
        case("queue: no identity grant to receive", EVALUATION, "sqs:ReceiveMessage", QUEUE, [], secure, stack,
             ROLE_SESSION),
        case("queue: receive over plain HTTP", EVALUATION, "sqs:ReceiveMessage", QUEUE,
             [_allow("sqs:ReceiveMessage", QUEUE)], {"aws:SecureTransport": "false"}, stack, ROLE_SESSION),
        case("confused deputy: the topic in this account", CONFUSED_DEPUTY, send, QUEUE, None,
             {"aws:SourceArn": TOPIC, "aws:SourceAccount": ACCOUNT}, deputy, "sns.amazonaws.com"),
        case("confused deputy: another account's topic", CONFUSED_DEPUTY, send, QUEUE, None,
             {"aws:SourceArn": f"arn:aws:sns:us-east-1:{OTHER_ACCOUNT}:alerts", "aws:SourceAccount": OTHER_ACCOUNT},
             deputy, "sns.amazonaws.com"),
        case("confused deputy: no source at all", CONFUSED_DEPUTY, send, QUEUE, None, {}, deputy, "sns.amazonaws.com"),
        case("confused deputy: another service", CONFUSED_DEPUTY, send, QUEUE, None,
             {"aws:SourceArn": TOPIC, "aws:SourceAccount": ACCOUNT}, deputy, "events.amazonaws.com"),
        case("an account principal defers to identity: no grant", PRINCIPAL, send, QUEUE, [], None, account_wide,
             ROLE_SESSION),
        case("an account principal defers to identity: granted", PRINCIPAL, send, QUEUE, [_allow(send)], None,
             account_wide, ROLE_SESSION),
        case("a role principal covers its sessions", PRINCIPAL, send, QUEUE, [],
             None, [{"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": send, "Resource": QUEUE}], ROLE_SESSION),
        case("another role's principal", PRINCIPAL, send, QUEUE, [], None,
             [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/other"}, "Action": send,
               "Resource": QUEUE}], ROLE_SESSION),
        case("a user principal by ARN", PRINCIPAL, send, QUEUE, [], None,
             [{"Effect": "Allow", "Principal": {"AWS": ALICE}, "Action": send, "Resource": QUEUE}]),
        case("Principal * allows anyone", PRINCIPAL, send, QUEUE, [], None,
             [{"Effect": "Allow", "Principal": "*", "Action": send, "Resource": QUEUE}]),
        case("a resource policy deny beats an identity allow", EVALUATION, send, QUEUE, [_allow(send)], None,
             [{"Effect": "Deny", "Principal": {"AWS": ALICE}, "Action": send, "Resource": QUEUE}]),
        case("an identity deny beats a resource allow", EVALUATION, send, QUEUE, [_deny(send)], None,
             [{"Effect": "Allow", "Principal": {"AWS": ALICE}, "Action": send, "Resource": QUEUE}]),
        case("NotPrincipal deny spares the named", NOT_PRINCIPAL, send, QUEUE, [_allow(send)], None,
             [{"Effect": "Deny", "NotPrincipal": {"AWS": [ALICE, f"arn:aws:iam::{ACCOUNT}:root"]}, "Action": send,
               "Resource": QUEUE}]),
        case("NotPrincipal deny hits the others", NOT_PRINCIPAL, send, QUEUE, [_allow(send)], None,
             [{"Effect": "Deny", "NotPrincipal": {"AWS": [ALICE, f"arn:aws:iam::{ACCOUNT}:root"]}, "Action": send,
               "Resource": QUEUE}], f"arn:aws:iam::{ACCOUNT}:user/bob"),
        case("cross account: both allow", CROSS_ACCOUNT, send, QUEUE, [_allow(send)], None,
             [{"Effect": "Allow", "Principal": {"AWS": STRANGER}, "Action": send, "Resource": QUEUE}], STRANGER),
        case("cross account: only the resource allows", CROSS_ACCOUNT, send, QUEUE, [], None,
             [{"Effect": "Allow", "Principal": {"AWS": STRANGER}, "Action": send, "Resource": QUEUE}], STRANGER),
        case("cross account: only the identity allows", CROSS_ACCOUNT, send, QUEUE, [_allow(send)], None,
             [{"Effect": "Allow", "Principal": {"AWS": ALICE}, "Action": send, "Resource": QUEUE}], STRANGER),
    ]


def _malformed() -> list[dict[str, Any]]:
    return [
        case("an action without a service prefix", ACTION, "ec2:CreateFleet", "*", [_allow("CreateFleet")]),
        case("an action with three parts", ACTION, "ec2:CreateFleet", "*", [_allow("ec2:Create:Fleet")]),
    ]


def cases() -> list[dict[str, Any]]:
    return _basics() + _negated() + _if_exists_and_null() + _sets() + _variables() + _types() + _imdsv2() + \
        _queue_policy() + _malformed()
