"""The functions' IAM permissions: one role per function, each granted what that function calls.

What each function calls was read from its code path (``lambdas/<fn>/handler.py`` -> the nodescale
use-case -> ``nodescale/aws/``) and is written down once here, as capabilities (``FUNCTION_CAPABILITIES``);
each capability names the AWS calls behind it. docs/deploy.md lists the same table for a reviewer.

Every EC2 change is scoped to this cluster's ownership tag ``nodescale.io/cluster: <cluster>``. Launches
may only create resources that carry it (aws:RequestTag), and terminations or deletions only touch
resources that already carry it (aws:ResourceTag), so no function can change capacity owned by another
cluster or system.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.function_specs import CLEANUP, DISRUPTION, INTERRUPTION, PROVISIONER

OWNER_TAG = "nodescale.io/cluster"
# The one tag a function adds to an instance, its volumes and interfaces after launching it (aws/instances.tag_nodeclaim).
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
NODECLAIM_TAGGED_TYPES = ("instance", "volume", "network-interface")

# Capabilities: what a function does, each backed by the calls named beside it.
READ_WORLD = "read-world"  # world.read_world: NodePool parameters, this cluster's instances, the catalog
LAUNCH = "launch"  # aws/launcher + aws/fleet: AMIs, subnets, groups, instance profile, templates, CreateFleet
TERMINATE = "terminate"  # aws/instances.terminate: reads each instance's tags, then terminates the owned ones
DELETE_TEMPLATES = "delete-templates"  # aws/launchtemplates.cleanup_unused
STATUS_CHECKS = "status-checks"  # aws/instances.impaired_instances (repair)
KUBERNETES = "kubernetes"  # k8s/client.py and aws/cluster.py: the endpoint and CA of this cluster
OFFERINGS = "offerings"  # aws/offerings: offerings that just failed, shared through the table
LEASE = "lease"  # aws/leases: one launch at a time across functions (conditional put, update, delete)
IDEMPOTENCY = "idempotency"  # aws/idempotency: Powertools' DynamoDB persistence layer
ZONAL_SHIFTS = "zonal-shifts"  # aws/zonalshifts.record: an ARC zonal shift event, kept for every function
ADOPT = "adopt"  # aws/adoption.tag_owned: a previous Karpenter's instance of a managed NodePool (#30.6)

FUNCTION_CAPABILITIES: dict[str, frozenset[str]] = {
    # A pass: read the world, expire instances that never registered, launch for pending pods.
    # It also adopts the NodeClaims a previous Karpenter left for the NodePools it manages (tags their instances).
    PROVISIONER.name: frozenset({READ_WORLD, LAUNCH, TERMINATE, KUBERNETES, OFFERINGS, LEASE, ADOPT}),
    # An event: mark the reclaimed offering, launch a replacement, drain, terminate; once per event id.
    # An ARC zonal shift event: recorded (zone id -> name from DescribeAvailabilityZones), nothing else.
    INTERRUPTION.name: frozenset(
        {READ_WORLD, LAUNCH, TERMINATE, KUBERNETES, OFFERINGS, LEASE, IDEMPOTENCY, ZONAL_SHIFTS}
    ),
    # Consolidation, expiry, drift (resolves the node class as a launch would), repair (status checks),
    # replacements, and garbage collection of unused launch templates.
    DISRUPTION.name: frozenset(
        {READ_WORLD, LAUNCH, TERMINATE, DELETE_TEMPLATES, STATUS_CHECKS, KUBERNETES, OFFERINGS, LEASE}
    ),
    # Stack deletion: list this cluster's instances and templates, drain, terminate, delete. No launch, no
    # table, no NodePool parameters.
    CLEANUP.name: frozenset({TERMINATE, DELETE_TEMPLATES, KUBERNETES}),
}

# EC2 reads per capability. Describe* actions support no resource-level permissions (Service
# Authorization Reference, Amazon EC2), so they take Resource "*", limited to this region.
EC2_READS: dict[str, tuple[str, ...]] = {
    READ_WORLD: (
        "ec2:DescribeInstances",  # aws/instances.list_instances
        "ec2:DescribeInstanceTypes",  # aws/catalog.live_catalog
        "ec2:DescribeInstanceTypeOfferings",  # aws/catalog.live_catalog
        "ec2:DescribeSpotPriceHistory",  # aws/pricing.spot_prices
        "ec2:DescribeAvailabilityZones",  # aws/catalog.describe_zone_ids: offerings' zone ids
        "ec2:DescribeCapacityReservations",  # aws/capacityreservations.discover: reserved offerings
    ),
    LAUNCH: (
        "ec2:DescribeImages",  # aws/ami: selector terms
        "ec2:DescribeLaunchTemplates",  # aws/launchtemplates.ensure: reuse the template of a configuration
        "ec2:DescribeSecurityGroups",  # aws/securitygroups.discover
        "ec2:DescribeSubnets",  # aws/subnets.discover
    ),
    TERMINATE: ("ec2:DescribeInstances",),  # the tags of each instance, read just before terminating
    DELETE_TEMPLATES: ("ec2:DescribeLaunchTemplates",),  # aws/launchtemplates.list_managed
    STATUS_CHECKS: ("ec2:DescribeInstanceStatus",),
}
# Item actions on the state table per capability (nothing reads its stream: it has none).
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {
    READ_WORLD: ("dynamodb:BatchGetItem",),  # aws/zonalshifts.active: the zones shifted away from
    ZONAL_SHIFTS: ("dynamodb:UpdateItem",),  # a conditional update: the newest event per zone and kind wins
    OFFERINGS: ("dynamodb:Scan", "dynamodb:BatchWriteItem"),
    # Taken with a conditional put, renewed while held and checked before each launch with a conditional
    # update on its owner, released with a conditional delete.
    LEASE: ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    IDEMPOTENCY: ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
}

# Resources a launch creates that can carry the ownership tag in the request: the Fleet request tags
# fleet, instance and volume (CreateFleet TagSpecifications), the launch template tags instance, volume
# and network-interface (nodescale/aws/launchtemplates.py), as Karpenter does.
LAUNCH_TAGGED_TYPES = ("fleet", "instance", "volume", "network-interface")
# Resource types created with a request tag, and so taggable at creation (ec2:CreateTags with ec2:CreateAction).
CREATED_TYPES = (*LAUNCH_TAGGED_TYPES, "launch-template")
# A spot launch also creates a spot-instances-request. It cannot carry the tag: a launch template may
# only tag spot-instances-request when every launch from it creates one ("If the instance does not
# include the resource type that you specify, the instance launch fails", EC2 API Reference,
# LaunchTemplateTagSpecificationRequest; EC2 answers an on-demand launch from such a template with
# "You cannot specify tags for Spot instances requests if there are no Spot instances requests being
# created by the request"), and one template serves both capacity types (on-demand is spot's
# fallback). So the condition is scoped to what is taggable: the request is allowed untagged, which
# grants nothing on its own, since the same call must create a tagged instance (LAUNCH_TAGGED_TYPES).
LAUNCH_UNTAGGED_TYPES = ("spot-instances-request",)
# CreateFleet of type instant launches through RunInstances with the caller's permissions (it does not
# use the EC2 Fleet service-linked role), so RunInstances is granted beside it, as Karpenter's policy does.
LAUNCH_ACTIONS = ("ec2:CreateFleet", "ec2:RunInstances")
# Resources a launch uses but does not create or change.
LAUNCH_USED_TYPES = ("image", "snapshot", "subnet", "security-group", "capacity-reservation")
SHARED_TYPES = ("image", "snapshot")  # ARNs without an account: public and other accounts' AMIs
# Public parameters that name the current AMIs for each family nodescale supports (aws/ami.py).
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


@dataclass(frozen=True)
class FunctionAccess:
    """What one function's role is granted, for its policy, its cdk-nag findings and the tests."""

    name: str
    capabilities: frozenset[str]
    statements: tuple[iam.PolicyStatement, ...]

    @property
    def ec2_wildcard_types(self) -> tuple[str, ...]:
        """EC2 resource types granted as ``<type>/*`` (each a cdk-nag IAM5 finding with its reason)."""
        types: list[str] = []
        if LAUNCH in self.capabilities:
            types += [*CREATED_TYPES, *LAUNCH_UNTAGGED_TYPES, *LAUNCH_USED_TYPES]
        if TERMINATE in self.capabilities:
            types.append("instance")
        if DELETE_TEMPLATES in self.capabilities:
            types.append("launch-template")
        return tuple(dict.fromkeys(types))


def ec2_arn(scope: Construct, resource: str, *, account: bool = True) -> str:
    """An EC2 ARN in this stack's partition and region; images and snapshots have no account part."""
    return Stack.of(scope).format_arn(
        service="ec2", resource=resource, resource_name="*", account=None if account else ""
    )


def adopt_karpenter_instances_statement(scope: Construct, cluster: str) -> iam.PolicyStatement:
    """#30.6: adopting a NodeClaim a previous Karpenter left tags its instance as this cluster's. Only an instance
    Karpenter launched for this cluster (its ``kubernetes.io/cluster/<cluster>=owned`` and ``karpenter.sh/nodepool``
    tags), and only with the ownership tag: no other key, no other instance."""
    return iam.PolicyStatement(
        sid="AdoptKarpenterInstances",
        actions=["ec2:CreateTags"],
        resources=[ec2_arn(scope, "instance")],
        conditions={
            "StringEquals": {f"aws:RequestTag/{OWNER_TAG}": cluster,
                             f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"},
            "Null": {"aws:ResourceTag/karpenter.sh/nodepool": "false"},
            "ForAllValues:StringEquals": {"aws:TagKeys": [OWNER_TAG]},
        },
    )


def function_access(
    scope: Construct,
    name: str,
    *,
    cluster: str,
    parameter_path: str,
    node_role_arns: Sequence[str],
    table_arn: str,
    log_group_arn: str,
    in_vpc: bool,
    parameter_key_arns: Sequence[str] = (),
    volume_key_arns: Sequence[str] = (),
) -> FunctionAccess:
    """The statements of function ``name``'s role: its capabilities' calls and its own log group."""
    capabilities = FUNCTION_CAPABILITIES[name]
    statements: list[iam.PolicyStatement] = []
    if LAUNCH in capabilities:
        statements += launch_statements(scope, cluster, node_role_arns)
        if volume_key_arns:
            statements += volume_key_statements(volume_key_arns, Stack.of(scope).region, Aws.URL_SUFFIX)
    if ADOPT in capabilities:
        statements.append(adopt_karpenter_instances_statement(scope, cluster))
    if TERMINATE in capabilities:
        statements.append(iam.PolicyStatement(
            sid="TerminateOnlyThisClustersInstances",
            actions=["ec2:TerminateInstances"],
            resources=[ec2_arn(scope, "instance")],
            conditions={"StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": cluster}},
        ))
    if DELETE_TEMPLATES in capabilities:
        statements.append(iam.PolicyStatement(
            sid="DeleteOnlyThisClustersLaunchTemplates",
            actions=["ec2:DeleteLaunchTemplate"],
            resources=[ec2_arn(scope, "launch-template")],
            conditions={"StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": cluster}},
        ))
    reads = sorted({a for c in sorted(capabilities) for a in EC2_READS.get(c, ())})
    if reads:
        statements.append(iam.PolicyStatement(
            sid="ReadEc2InThisRegion",
            actions=reads,
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ))
    if KUBERNETES in capabilities:
        statements.append(describe_cluster_statement(scope, cluster))
    if READ_WORLD in capabilities:
        statements.append(nodepool_parameters_statement(scope, parameter_path))
        if parameter_key_arns:
            statements.append(parameter_key_statement(parameter_key_arns, Stack.of(scope).region, Aws.URL_SUFFIX))
    table_actions = sorted({a for c in sorted(capabilities) for a in TABLE_ACTIONS.get(c, ())})
    if table_actions:
        statements.append(iam.PolicyStatement(sid="UseStateTableItems", actions=table_actions, resources=[table_arn]))
    statements.append(log_statement([log_group_arn]))
    if in_vpc:
        statements.append(vpc_statement())
    return FunctionAccess(name, capabilities, tuple(statements))


def launch_statements(scope: Construct, cluster: str, node_role_arns: Sequence[str]) -> list[iam.PolicyStatement]:
    """Create launch templates and launch from them, only ever tagged for this cluster."""
    request_tag = {"StringEquals": {f"aws:RequestTag/{OWNER_TAG}": cluster}}
    return [
        iam.PolicyStatement(
            sid="LaunchOnlyTaggedForThisCluster",
            actions=list(LAUNCH_ACTIONS),
            resources=[ec2_arn(scope, t) for t in LAUNCH_TAGGED_TYPES],
            conditions=request_tag,
        ),
        iam.PolicyStatement(
            sid="LaunchSpotRequestsWithTaggedInstances",
            actions=list(LAUNCH_ACTIONS),
            resources=[ec2_arn(scope, t) for t in LAUNCH_UNTAGGED_TYPES],
        ),
        iam.PolicyStatement(
            sid="CreateOnlyTaggedLaunchTemplates",
            actions=["ec2:CreateLaunchTemplate"],
            resources=[ec2_arn(scope, "launch-template")],
            conditions=request_tag,
        ),
        # A launch also names resources it does not create (AMI, subnets, security groups, a capacity
        # reservation): these are used, not changed, and carry no request tag.
        iam.PolicyStatement(
            sid="LaunchUsesNetworkAndImages",
            actions=list(LAUNCH_ACTIONS),
            resources=[ec2_arn(scope, t, account=t not in SHARED_TYPES) for t in LAUNCH_USED_TYPES],
        ),
        iam.PolicyStatement(
            sid="LaunchFromOwnLaunchTemplates",
            actions=list(LAUNCH_ACTIONS),
            resources=[ec2_arn(scope, "launch-template")],
            conditions={"StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": cluster}},
        ),
        iam.PolicyStatement(
            sid="TagOnlyWhileCreating",
            actions=["ec2:CreateTags"],
            resources=[ec2_arn(scope, t) for t in CREATED_TYPES],
            conditions={
                "StringEquals": {
                    f"aws:RequestTag/{OWNER_TAG}": cluster,
                    "ec2:CreateAction": ["CreateFleet", "RunInstances", "CreateLaunchTemplate"],
                }
            },
        ),
        # usecases/provision/nodeclaims.launched: the NodeClaim's name on the instance it launched and on
        # that instance's volumes and network interfaces, as Karpenter tags them. Only that key, only on
        # this cluster's resources (the launch tagged them): no ownership tag can change.
        iam.PolicyStatement(
            sid="TagOwnInstancesWithTheirNodeClaim",
            actions=["ec2:CreateTags"],
            resources=[ec2_arn(scope, t) for t in NODECLAIM_TAGGED_TYPES],
            conditions={
                "StringEquals": {f"aws:ResourceTag/{OWNER_TAG}": cluster},
                "ForAllValues:StringEquals": {"aws:TagKeys": [NODECLAIM_TAG]},
            },
        ),
        pass_node_role_statement(node_role_arns),
        # aws/instanceprofiles.resolve: a v1/v1beta1 node class names a role, and its instance profile is
        # looked up. Only the node role(s) are listed: an instance of any other role could not be launched
        # anyway (PassRole is scoped to the same ARNs), and the error names the role it could not list.
        iam.PolicyStatement(
            sid="ListNodeRoleInstanceProfiles",
            actions=["iam:ListInstanceProfilesForRole"],
            resources=list(node_role_arns),
        ),
        public_ami_parameters_statement(scope),
    ]


def node_role_arn(scope: Construct, role: str) -> str:
    """A node class's ``role`` as an ARN: as given when it is one, else the role of that name in this account."""
    if role.startswith("arn:"):
        return role
    return Stack.of(scope).format_arn(service="iam", region="", resource="role", resource_name=role)


def pass_node_role_statement(node_role_arns: Sequence[str]) -> iam.PolicyStatement:
    """PassRole only for the node role(s), and only to EC2 (both principal spellings: aws-cn needs .cn)."""
    return iam.PolicyStatement(
        sid="PassOnlyTheNodeRole",
        actions=["iam:PassRole"],
        resources=list(node_role_arns),
        conditions={"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", f"ec2.{Aws.URL_SUFFIX}"]}},
    )


def kms_key_arn(scope: Construct, key: str) -> str:
    """A node class's ``kmsKeyID`` as an ARN: as given when it is one, else the key of that id in this account
    and region (EC2 reads a bare key id so)."""
    if key.startswith("arn:"):
        return key
    return Stack.of(scope).format_arn(service="kms", resource="key", resource_name=key)


def parameter_key_statement(key_arns: Sequence[str], region: str, url_suffix: str) -> iam.PolicyStatement:
    """aws/nodepool_parameters reads SecureString NodePool parameters WithDecryption: SSM decrypts them with the
    caller's kms:Decrypt on the parameter's customer-managed key, and only through SSM (kms:ViaService). The
    AWS-managed key alias/aws/ssm needs no grant: its key policy allows every principal of the account."""
    return iam.PolicyStatement(
        sid="DecryptNodePoolParametersThroughSsm",
        actions=["kms:Decrypt"],
        resources=list(key_arns),
        conditions={"StringEquals": {"kms:ViaService": f"ssm.{region}.{url_suffix}"}},
    )


def volume_key_statements(key_arns: Sequence[str], region: str, url_suffix: str) -> list[iam.PolicyStatement]:
    """A launch whose volumes are encrypted with a customer-managed key: EC2 creates a grant on the key for the
    volume and asks it for a data key, as the caller and only through EC2 ("Required key policy for use with
    encrypted volumes", Amazon EBS User Guide; Karpenter's troubleshooting: without them the instance starts and
    terminates with Client.InternalError)."""
    via_ec2 = {"kms:ViaService": f"ec2.{region}.{url_suffix}"}
    return [
        iam.PolicyStatement(
            sid="GrantEncryptedVolumesTheirKeysThroughEc2",
            actions=["kms:CreateGrant"],
            resources=list(key_arns),
            conditions={"StringEquals": via_ec2, "Bool": {"kms:GrantIsForAWSResource": "true"}},
        ),
        iam.PolicyStatement(
            sid="UseVolumeKeysThroughEc2",
            actions=["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom",
                     "kms:ReEncryptTo"],
            resources=list(key_arns),
            conditions={"StringEquals": via_ec2},
        ),
    ]


def describe_cluster_statement(scope: Construct, cluster: str) -> iam.PolicyStatement:
    """Describe this cluster: the endpoint and CA for the Kubernetes client, its version for AMIs."""
    return iam.PolicyStatement(
        sid="DescribeThisCluster",
        actions=["eks:DescribeCluster"],
        resources=[Stack.of(scope).format_arn(service="eks", resource="cluster", resource_name=cluster)],
    )


def nodepool_parameters_statement(scope: Construct, parameter_path: str) -> iam.PolicyStatement:
    """aws/nodepool_parameters.read_ssm_documents: GetParametersByPath, recursive, under this stack's own path;
    GetParameter for a SecureString one read alone when its key could not decrypt the whole path."""
    stack = Stack.of(scope)
    own_path = parameter_path.strip("/")
    return iam.PolicyStatement(
        sid="ReadNodePoolParameters",
        actions=["ssm:GetParameter", "ssm:GetParametersByPath"],
        resources=[
            stack.format_arn(service="ssm", resource="parameter", resource_name=own_path),
            stack.format_arn(service="ssm", resource="parameter", resource_name=f"{own_path}/*"),
        ],
    )


def public_ami_parameters_statement(scope: Construct) -> iam.PolicyStatement:
    """aws/ami.resolve_family: GetParameters on AWS's public parameters naming the current AMIs."""
    stack = Stack.of(scope)
    return iam.PolicyStatement(
        sid="ReadPublicAmiParameters",
        actions=["ssm:GetParameters"],
        resources=[
            stack.format_arn(service="ssm", resource="parameter", resource_name=path, account="")
            for path in PUBLIC_AMI_PARAMETER_PATHS
        ],
    )


def log_statement(log_group_arns: Sequence[str]) -> iam.PolicyStatement:
    """Write to the function's own log group (instead of the broad AWSLambdaBasicExecutionRole)."""
    return iam.PolicyStatement(
        sid="WriteOwnLogs",
        actions=["logs:CreateLogStream", "logs:PutLogEvents"],
        # A log group's ARN ends in ":*", which covers its streams.
        resources=list(log_group_arns),
    )


def vpc_statement() -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="ManageLambdaVpcInterfaces", actions=list(VPC_ACTIONS), resources=["*"])


def self_invoke_statement(scope: Construct, function_name: str) -> iam.PolicyStatement:
    """The disruption function starts the slices of a split pass by invoking itself asynchronously
    (aws/fan_out.py). The ARN is built from the function's name, not taken from the function: the role
    is created before the function, and a reference back would be a dependency cycle."""
    arn = Stack.of(scope).format_arn(service="lambda", resource="function", resource_name=function_name,
                                     arn_format=ArnFormat.COLON_RESOURCE_NAME)
    return iam.PolicyStatement(sid="InvokeItselfForSlices", actions=["lambda:InvokeFunction"], resources=[arn])
