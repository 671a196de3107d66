"""`-c applyRbac=true`: the stack applies the functions' RBAC itself, so a deploy is one command.

A custom resource (lambdas/rbac) server-side applies `infra/manifests/rbac.yaml`, bundled with the
function, on Create and Update (the manifest's hash is a property, so a changed manifest is applied
again) and deletes its objects on Delete. The cleanup depends on it, so `cdk destroy` drains the nodes
first, with the RBAC still in place, and removes the RBAC after.

What the applier itself needs, stated once:

- Kubernetes: a STANDARD access entry for its own role with `AmazonEKSClusterAdminPolicy` at cluster
  scope. Nothing narrower works: before the manifest exists no RBAC grants anything, so only an EKS access
  policy can authorize the first request; the manifest holds a ClusterRole and a ClusterRoleBinding, and of
  the EKS access policies only the cluster-admin one writes cluster-scoped RBAC (AmazonEKSAdminPolicy
  writes Roles and RoleBindings in namespaces only); and Kubernetes' escalation prevention lets a subject
  authorized by a webhook (as EKS access policies are) create a role or binding only with `escalate` and
  `bind`, which no other access policy holds. What limits it is everything around it: the role trusts
  Lambda only, this one function has it, the function is invoked by the CloudFormation provider alone and
  runs no code but applying or deleting the bundled file, whose kinds it checks (RBAC only).
- AWS: `eks:DescribeCluster` on this cluster (endpoint and CA), its own log group, and in a VPC Lambda's
  network interfaces.
"""

from __future__ import annotations

import hashlib
import shutil

from aws_cdk import Aws, CustomResource, RemovalPolicy, Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from infra import iam as policies
from infra import settings_names as env
from infra.config import StackConfig
from infra.function_specs import RBAC
from infra.functions import Layers, make_function
from infra.layers import BUILD_DIR, REPO_ROOT
from infra.names import physical_name

RESOURCE_TYPE = "Custom::NodescaleRbac"
PROPERTY_CLUSTER = "ClusterName"
PROPERTY_MANIFEST_SHA256 = "ManifestSha256"  # a new manifest is an Update: applied again
MANIFEST = REPO_ROOT / "infra" / "manifests" / "rbac.yaml"
HANDLER = REPO_ROOT / "lambdas" / RBAC.name / "handler.py"
ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"


def access_policy_arn(name: str = ACCESS_POLICY) -> str:
    return f"arn:{Aws.PARTITION}:eks::aws:cluster-access-policy/{name}"


def staged_code_dir() -> str:
    """The function's package: its handler and the manifest it applies, side by side (rewritten each synth)."""
    directory = BUILD_DIR / "functions" / RBAC.name
    directory.mkdir(parents=True, exist_ok=True)
    for source in (HANDLER, MANIFEST):
        target = directory / source.name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)
    return str(directory)


class RbacApplier(Construct):
    """The RBAC function, its role, access entry and log group, and the custom resource that runs it."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, layers: Layers) -> None:
        super().__init__(scope, construct_id)
        cluster = config.cluster_name
        self.role = iam.Role(
            self, "Role", role_name=physical_name(cluster, RBAC.name),
            description=f"nodescale RBAC function for the EKS cluster {cluster}: applies and removes its RBAC",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        self.entry = eks.CfnAccessEntry(
            self, "Entry", cluster_name=cluster, principal_arn=self.role.role_arn, type="STANDARD",
            access_policies=[eks.CfnAccessEntry.AccessPolicyProperty(
                policy_arn=access_policy_arn(),
                access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster"),
            )],
        )
        self.function, log_group = make_function(
            self, RBAC, config=config, role=self.role, layers=layers,
            environment={env.CLUSTER_NAME: cluster}, code_dir=staged_code_dir(),
        )
        self.role.add_to_policy(policies.describe_cluster_statement(self, cluster))
        self.role.add_to_policy(policies.log_statement([log_group.log_group_arn]))
        if config.in_vpc:
            self.role.add_to_policy(policies.vpc_statement())
        self.provider = cr.Provider(
            self, "Provider", on_event_handler=self.function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=logs.RetentionDays.ONE_MONTH,
                                    removal_policy=RemovalPolicy.DESTROY),
        )
        self.resource = CustomResource(
            self, "Resource", service_token=self.provider.service_token, resource_type=RESOURCE_TYPE,
            properties={
                PROPERTY_CLUSTER: cluster,
                PROPERTY_MANIFEST_SHA256: hashlib.sha256(MANIFEST.read_bytes()).hexdigest(),
            },
        )
        # Created after, and deleted before, what the function runs with: its role (and policy), its entry.
        self.resource.node.add_dependency(self.role, self.entry)

    @property
    def function_logical_id(self) -> str:
        return Stack.of(self).get_logical_id(self.function.node.default_child)  # type: ignore[arg-type]
