"""The functions' IAM permissions: each EC2 change is scoped to this cluster's ownership tag.

Ownership is the tag `nodescale.io/cluster: <cluster>`. Launches may only create resources that carry
it (aws:RequestTag), and terminations or deletions only touch resources that already carry it
(aws:ResourceTag), so the functions cannot change capacity owned by another cluster or system.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

OWNER_TAG = "nodescale.io/cluster"

# Resources a launch creates: each must carry the ownership tag in the request.
LAUNCH_CREATED_TYPES = ("fleet", "instance", "volume", "network-interface", "launch-template",
                        "spot-instances-request")
LAUNCH_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate")
REMOVE_ACTIONS = ("ec2:TerminateInstances", "ec2:DeleteLaunchTemplate")
# Read-only EC2 calls; Describe* actions support no resource-level scoping, so they take Resource "*".
EC2_READ_ACTIONS = (
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
# Public parameters that name the current AMIs for each family nodescale supports.
PUBLIC_AMI_PARAMETER_PATHS = (
    "aws/service/eks/optimized-ami/*",
    "aws/service/bottlerocket/*",
    "aws/service/ami-windows-latest/*",
)
# ENI management Lambda needs to run in a VPC; CreateNetworkInterface takes no resource scoping.
VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def ec2_arn(scope: Construct, resource: str, *, account: bool = True) -> str:
    """An EC2 ARN in this stack's partition and region; images and snapshots have no account part."""
    return Stack.of(scope).format_arn(
        service="ec2", resource=resource, resource_name="*", account=None if account else ""
    )


def ec2_statements(scope: Construct, cluster: str) -> list[iam.PolicyStatement]:
    """Launch, tag, terminate and read EC2 capacity, only ever on this cluster's own resources."""
    request_tag = {"StringEquals": {f"aws:RequestTag/{OWNER_TAG}": cluster}}
    resource_tag = {"StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": cluster}}
    created = [ec2_arn(scope, t) for t in LAUNCH_CREATED_TYPES]
    return [
        iam.PolicyStatement(
            sid="LaunchOnlyTaggedForThisCluster",
            actions=list(LAUNCH_ACTIONS),
            resources=created,
            conditions=request_tag,
        ),
        # A launch also names resources it does not create (AMI, subnets, security groups, the launch
        # template): these are used, not changed, and carry no request tag.
        iam.PolicyStatement(
            sid="LaunchUsesNetworkAndImages",
            actions=["ec2:CreateFleet", "ec2:RunInstances"],
            resources=[
                ec2_arn(scope, "image", account=False),
                ec2_arn(scope, "snapshot", account=False),
                ec2_arn(scope, "subnet"),
                ec2_arn(scope, "security-group"),
                ec2_arn(scope, "capacity-reservation"),
            ],
        ),
        iam.PolicyStatement(
            sid="LaunchFromOwnLaunchTemplates",
            actions=["ec2:CreateFleet", "ec2:RunInstances"],
            resources=[ec2_arn(scope, "launch-template")],
            conditions=resource_tag,
        ),
        iam.PolicyStatement(
            sid="TagOnlyWhileCreating",
            actions=["ec2:CreateTags"],
            resources=created,
            conditions={
                "StringEquals": {
                    f"aws:RequestTag/{OWNER_TAG}": cluster,
                    "ec2:CreateAction": ["CreateFleet", "RunInstances", "CreateLaunchTemplate"],
                }
            },
        ),
        iam.PolicyStatement(
            sid="RemoveOnlyThisClustersResources",
            actions=list(REMOVE_ACTIONS),
            resources=[ec2_arn(scope, "instance"), ec2_arn(scope, "launch-template")],
            conditions=resource_tag,
        ),
        iam.PolicyStatement(
            sid="ReadEc2InThisRegion",
            actions=list(EC2_READ_ACTIONS),
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
        # The Price List API answers from a few regions only, so no region condition here.
        iam.PolicyStatement(sid="ReadPrices", actions=["pricing:GetProducts"], resources=["*"]),
    ]


def pass_node_role_statement(node_role_arns: Sequence[str]) -> iam.PolicyStatement:
    """PassRole only for the node role(s), and only to EC2 (both principal spellings: aws-cn needs .cn)."""
    return iam.PolicyStatement(
        sid="PassOnlyTheNodeRole",
        actions=["iam:PassRole"],
        resources=list(node_role_arns),
        conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", f"ec2.{Aws.URL_SUFFIX}"]}},
    )


def cluster_statements(scope: Construct, cluster: str, parameter_path: str) -> list[iam.PolicyStatement]:
    """Describe this cluster (endpoint and CA for the Kubernetes client) and read its NodePool parameters."""
    stack = Stack.of(scope)
    own_path = parameter_path.strip("/")
    return [
        iam.PolicyStatement(
            sid="DescribeThisCluster",
            actions=["eks:DescribeCluster"],
            resources=[stack.format_arn(service="eks", resource="cluster", resource_name=cluster)],
        ),
        iam.PolicyStatement(
            sid="ReadNodePoolParameters",
            actions=["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
            resources=[
                stack.format_arn(service="ssm", resource="parameter", resource_name=own_path),
                stack.format_arn(service="ssm", resource="parameter", resource_name=f"{own_path}/*"),
            ],
        ),
        iam.PolicyStatement(
            sid="ReadPublicAmiParameters",
            actions=["ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath"],
            resources=[
                stack.format_arn(service="ssm", resource="parameter", resource_name=path, account="")
                for path in PUBLIC_AMI_PARAMETER_PATHS
            ],
        ),
    ]


def log_statement(log_group_arns: Sequence[str]) -> iam.PolicyStatement:
    """Write to the functions' own log groups (instead of the broad AWSLambdaBasicExecutionRole)."""
    return iam.PolicyStatement(
        sid="WriteOwnLogs",
        actions=["logs:CreateLogStream", "logs:PutLogEvents"],
        # A log group's ARN ends in ":*", which covers its streams.
        resources=list(log_group_arns),
    )


def vpc_statement() -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="ManageLambdaVpcInterfaces", actions=list(VPC_ACTIONS), resources=["*"])
