"""Which IAM action on which resource sim authorizes each call as, for the calls the product makes (#28: sim,
compared with independent references). The Service Authorization Reference gives each service's actions
and resource ARNs; the operation's name is not always its action (Lambda's Invoke is lambda:InvokeFunction)."""

from __future__ import annotations

import logging

import pytest

from sim.aws.iam_enforcement import Enforcer, lambda_function_arn

ACCOUNT = "123456789012"
SELF = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:nodescale-demo-disruption"


def allow(action: str, resource: str = "*") -> dict[str, object]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def enforcer_for(*statements: dict[str, object]) -> Enforcer:
    """The disruption function held to ``statements``, the others to nothing (no moto is asked: no EC2 launch)."""
    policies = {"provisioner": [], "interruption": [], "disruption": list(statements), "cleanup": []}
    return Enforcer(policies, "http://127.0.0.1:1", "demo")


def test_a_lambda_invoke_is_invoke_function_on_the_functions_arn() -> None:
    """#28: Lambda's Invoke is authorized as lambda:InvokeFunction on the function's ARN (sim checked
    `lambda:Invoke` on `*`, so the stack's grant on its own ARN was refused and a grant on `*` needed)."""
    enforcer = enforcer_for(allow("lambda:InvokeFunction", SELF))
    path = "/2015-03-31/functions/nodescale-demo-disruption/invocations"
    assert enforcer.decide("disruption", "lambda", "Invoke", {}, path) is None
    assert enforcer.decide("disruption", "lambda", "Invoke", {}, path.replace("nodescale-demo-disruption", SELF)) is None
    other = enforcer.decide("disruption", "lambda", "Invoke", {}, path.replace("disruption", "provisioner"))
    assert other is not None and other.action == "lambda:InvokeFunction"
    assert other.resource == SELF.replace("disruption", "provisioner")
    # A qualified invocation is on the qualified ARN, which a grant on the unqualified one does not cover.
    aliased = enforcer.decide("disruption", "lambda", "Invoke", {}, path + "?Qualifier=live")
    assert aliased is not None and aliased.resource == SELF + ":live"
    assert enforcer_for(allow("lambda:Invoke")).decide("disruption", "lambda", "Invoke", {}, path) is not None


def test_function_arns_from_each_form_lambda_accepts() -> None:
    assert lambda_function_arn("nodescale-demo-disruption") == SELF
    assert lambda_function_arn(f"{ACCOUNT}:function:nodescale-demo-disruption") == SELF
    assert lambda_function_arn(SELF + ":7") == SELF + ":7"
    assert lambda_function_arn("nodescale-demo-disruption:live", "") == SELF + ":live"


@pytest.mark.parametrize(("service", "action", "params", "path", "resource"), [
    ("ssm", "GetParametersByPath", {"Path": "/team-b/pools", "Recursive": True}, "/",
     f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/team-b/pools"),
    ("ssm", "GetParameters", {"Names": ["/aws/service/eks/optimized-ami/1.31/x"]}, "/",
     "arn:aws:ssm:us-east-1::parameter/aws/service/eks/optimized-ami/1.31/x"),
    ("dynamodb", "UpdateItem", {"TableName": "state"}, "/", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/state"),
    ("eks", "DescribeCluster", {}, "/clusters/demo", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/demo"),
    ("sqs", "ChangeMessageVisibilityBatch", {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/q"}, "/",
     f"arn:aws:sqs:us-east-1:{ACCOUNT}:q"),
    ("ec2", "DescribeSubnets", {}, "/", "*"),
    ("pricing", "GetProducts", {}, "/", "*"),
])
def test_each_call_of_the_product_is_checked_on_the_resource_aws_names(
        service: str, action: str, params: dict[str, object], path: str, resource: str) -> None:
    """#28: each call the product makes is asked of the policy as its IAM action on the resource ARN AWS
    authorizes it on: a grant of that action on another resource refuses it, with the ARN in the message."""
    # SQS has no IAM action for its batch calls: each is its single-message action.
    full = f"{service}:{action.removesuffix('Batch') if service == 'sqs' else action}"
    enforcer = enforcer_for(allow(full, f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/team-a/*"))
    denial = enforcer.decide("disruption", service, action, params, path)
    assert denial is not None and (denial.action, denial.resource) == (full, resource)
    granted = enforcer_for(allow(full, denial.resource))
    assert granted.decide("disruption", service, action, params, path) is None


def test_a_call_sim_does_not_model_is_refused_loudly_even_under_a_wildcard_grant(
        caplog: pytest.LogCaptureFixture) -> None:
    """#28: a call sim does not know how AWS authorizes was checked as its operation name on `*`, so a new
    call passed wherever a statement allowed `*` (ec2:Describe* reads, `ec2:*`). Now it is refused, with a
    message and an error log that name it."""
    enforcer = enforcer_for(allow("ec2:*"), allow("lambda:*"))
    with caplog.at_level(logging.ERROR, logger="sim.aws.iam"):
        denial = enforcer.decide("disruption", "ec2", "ModifyInstanceAttribute", {"InstanceId": "i-0abc"}, "/")
        assert denial is not None and denial.action == "ec2:ModifyInstanceAttribute"
        assert "sim does not model" in denial.message()
        assert enforcer.decide("disruption", "lambda", "GetFunction", {}, "/2015-03-31/functions/f") is not None
        assert enforcer.decide("disruption", "kinesis", "PutRecord", {}, "/") is not None
    assert any("ec2:ModifyInstanceAttribute" in r.getMessage() for r in caplog.records)
    # Reads EC2 authorizes on "*" still pass under the grant, as on AWS; the administrator is never checked.
    assert enforcer.decide("disruption", "ec2", "DescribeInstances", {}, "/") is None
    assert enforcer.decide("admin", "kinesis", "PutRecord", {}, "/") is None
