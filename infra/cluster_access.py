"""Who may join and act on the cluster: node roles with their access entries, and the functions' entry.

A launched instance only becomes a node if its role has an access entry (EC2_LINUX or EC2_WINDOWS).
EKS allows one access entry per IAM principal, so Windows nodes get a role of their own.
Each function's role gets a STANDARD entry bound to FUNCTIONS_GROUP, which the shipped RBAC manifest
(`infra/manifests/rbac.yaml`) grants exactly what the functions do.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import StackConfig
from infra.names import physical_name

FUNCTIONS_GROUP = "nodescale-functions"
RBAC_MANIFEST = "infra/manifests/rbac.yaml"

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)


@dataclass(frozen=True)
class NodeIdentity:
    """The role and instance profile an instance is launched with."""

    role: iam.IRole
    instance_profile_name: str
    created: bool  # False when taken from context


class NodeAccess(Construct):
    """Node role(s), instance profile(s) and the access entries that let those nodes join."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        cluster = config.cluster_name
        self.linux = self._linux_identity(config)
        self.linux_entry = eks.CfnAccessEntry(
            self, "LinuxNodesEntry", cluster_name=cluster, principal_arn=self.linux.role.role_arn, type="EC2_LINUX"
        )
        self.windows: NodeIdentity | None = None
        self.windows_entry: eks.CfnAccessEntry | None = None
        if config.windows_nodes:
            role = self._node_role("WindowsNodeRole", physical_name(cluster, "windows-node"), "Windows")
            profile = iam.InstanceProfile(
                self, "WindowsInstanceProfile", role=role,
                instance_profile_name=physical_name(cluster, "windows-node", 128),
            )
            self.windows = NodeIdentity(role, profile.instance_profile_name, created=True)
            self.windows_entry = eks.CfnAccessEntry(
                self, "WindowsNodesEntry", cluster_name=cluster, principal_arn=role.role_arn, type="EC2_WINDOWS"
            )

    @property
    def identities(self) -> list[NodeIdentity]:
        return [self.linux] + ([self.windows] if self.windows else [])

    @property
    def entries(self) -> list[eks.CfnAccessEntry]:
        return [self.linux_entry] + ([self.windows_entry] if self.windows_entry else [])

    def _linux_identity(self, config: StackConfig) -> NodeIdentity:
        cluster = config.cluster_name
        if config.node_role_arn:
            # mutable=False: the stack must not attach policies to a role it does not own.
            role = iam.Role.from_role_arn(self, "ImportedNodeRole", config.node_role_arn, mutable=False)
            if config.instance_profile_name:
                return NodeIdentity(role, config.instance_profile_name, created=False)
            profile = iam.InstanceProfile(
                self, "InstanceProfile", role=role, instance_profile_name=physical_name(cluster, "node", 128)
            )
            return NodeIdentity(role, profile.instance_profile_name, created=False)
        role = self._node_role("NodeRole", physical_name(cluster, "node"), "Linux")
        profile = iam.InstanceProfile(
            self, "InstanceProfile", role=role, instance_profile_name=physical_name(cluster, "node", 128)
        )
        return NodeIdentity(role, profile.instance_profile_name, created=True)

    def _node_role(self, construct_id: str, name: str, system: str) -> iam.Role:
        return iam.Role(
            self,
            construct_id,
            role_name=name,
            description=f"{system} nodes nodescale launches for this cluster",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_MANAGED_POLICIES],
        )


def function_access_entry(scope: Construct, construct_id: str, cluster: str, role: iam.IRole) -> eks.CfnAccessEntry:
    """A function role's entry: STANDARD, no access policy, only the RBAC group the manifest binds."""
    return eks.CfnAccessEntry(
        scope,
        construct_id,
        cluster_name=cluster,
        principal_arn=role.role_arn,
        type="STANDARD",
        kubernetes_groups=[FUNCTIONS_GROUP],
    )
