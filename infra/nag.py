"""cdk-nag (AwsSolutions) findings accepted on purpose, each with the reason it is right for nodescale.

Each acknowledgment names one finding, so a new wildcard or managed policy still fails the synth.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct

from infra import iam as policies
from infra.cluster_access import NODE_MANAGED_POLICIES

if TYPE_CHECKING:
    from infra.stack import NodescaleStack

_PREFIX = "AwsSolutions::AwsSolutions-"


def acknowledge_findings(stack: NodescaleStack) -> None:
    _ack(stack.dead_letter_queue, "SQS3",
         "This queue is itself the dead-letter queue of the interruption rules and function; a DLQ for it "
         "would only move the same messages again.")
    for identity in stack.nodes.identities:
        if not identity.created:
            continue
        for policy in NODE_MANAGED_POLICIES:
            _ack(identity.role, f"IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]",
                 "The standard EKS node policies: kubelet, VPC CNI, image pulls and SSM access, maintained by "
                 "AWS as EKS evolves; every EKS node role uses them.")
    for function in [*stack.functions, stack.cleanup_function]:
        _ack(function, "L1",
             "Python 3.12 on purpose: the dependencies layer is built for exactly this runtime and the code is "
             "tested on it; moving to a newer runtime is a deliberate upgrade, not an automatic one.")
    _acknowledge_function_roles(stack)
    provider_role = stack.cleanup.provider.node.find_child("framework-onEvent").node.find_child("ServiceRole")
    _ack(provider_role, "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
         "The CDK custom resource provider framework's own function: it only writes its logs.")
    cleanup_id = Stack.of(stack).get_logical_id(stack.cleanup_function.node.default_child)  # type: ignore[arg-type]
    _ack(provider_role, f"IAM5[Resource::<{cleanup_id}.Arn>:*]",
         "The provider framework may invoke any version of the cleanup function, and nothing else.")
    if stack.rbac is not None:
        _acknowledge_rbac(stack)
    if stack.alarm_topic is not None and stack.config.alarm_email:
        _ack(stack.alarm_topic, "SNS2",
             "Alarm notifications carry no secrets (alarm names and states); an AWS-managed SNS key cannot be "
             "used by CloudWatch alarms, so encryption would need a customer key for no gain.")


def _acknowledge_rbac(stack: NodescaleStack) -> None:
    rbac = stack.rbac
    assert rbac is not None
    _ack(rbac.function, "L1",
         "Python 3.12 on purpose: the dependencies layer is built for exactly this runtime and the code is "
         "tested on it; moving to a newer runtime is a deliberate upgrade, not an automatic one.")
    provider_role = rbac.provider.node.find_child("framework-onEvent").node.find_child("ServiceRole")
    _ack(provider_role, "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
         "The CDK custom resource provider framework's own function: it only writes its logs.")
    _ack(provider_role, f"IAM5[Resource::<{rbac.function_logical_id}.Arn>:*]",
         "The provider framework may invoke any version of the RBAC function, and nothing else.")
    if stack.config.in_vpc:
        _ack(rbac.role, "IAM5[Resource::*]",
             "In a VPC, Lambda's network interface actions take no resource scoping.")


def _acknowledge_function_roles(stack: NodescaleStack) -> None:
    # cdk-nag names findings by the ARN as written: pseudo parameters, or the literal region when the
    # stack was given one.
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    ec2_arn = "arn:<AWS::Partition>:ec2:" + region + ":<AWS::AccountId>:{}/*"
    shared_ec2_arn = "arn:<AWS::Partition>:ec2:" + region + "::{}/*"
    ssm_arn = "arn:<AWS::Partition>:ssm:" + region + ":{}:parameter/{}"
    own_path = stack.config.nodepool_parameter_path.strip("/")
    for name, access in stack.access.items():
        role = stack.roles[name]
        for resource_type in access.ec2_wildcard_types:
            if resource_type in policies.SHARED_TYPES:
                _ack(role, f"IAM5[Resource::{shared_ec2_arn.format(resource_type)}]",
                     f"A launch reads the {resource_type} of the AMI chosen by the NodePool's node class, which may "
                     "be any public EKS-optimized or customer AMI; it is used, never changed.")
            elif resource_type in policies.LAUNCH_USED_TYPES:
                _ack(role, f"IAM5[Resource::{ec2_arn.format(resource_type)}]",
                     f"A launch places instances in the {resource_type}s the node class selects by tag at run time; "
                     "the launch only uses them and cannot change them.")
            elif resource_type in policies.LAUNCH_UNTAGGED_TYPES:
                _ack(role, f"IAM5[Resource::{ec2_arn.format(resource_type)}]",
                     "A spot launch creates a spot-instances-request, which one launch template cannot tag for both "
                     "capacity types; the same call must create an instance carrying this cluster's tag.")
            else:
                _ack(role, f"IAM5[Resource::{ec2_arn.format(resource_type)}]",
                     f"Any {resource_type} id, but only with this cluster's nodescale.io/cluster tag: launches must "
                     "carry it (aws:RequestTag) and terminations or deletions require it (aws:ResourceTag). Ids are "
                     "not known before launch.")
        _ack(role, "IAM5[Resource::*]",
             "EC2 Describe* actions support no resource-level permissions (limited to this region by "
             "aws:RequestedRegion); in a VPC, Lambda's ENI actions likewise take no resource scoping.")
        if policies.READ_WORLD in access.capabilities:
            _ack(role, f"IAM5[Resource::{ssm_arn.format('<AWS::AccountId>', own_path)}/*]",
                 "Reads the NodePool parameters under this stack's own path, whose names the user chooses.")
        if policies.LAUNCH in access.capabilities:
            for path in policies.PUBLIC_AMI_PARAMETER_PATHS:
                _ack(role, f"IAM5[Resource::{ssm_arn.format('', path)}]",
                     "Reads AWS's public parameters naming the current AMI for each Kubernetes version and family.")


def _ack(construct: IConstruct, finding: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=f"{_PREFIX}{finding}", reason=reason))
