"""Names shared by every part of the simulated AWS account (cheap to import: no boto3)."""

from __future__ import annotations

import os

DEFAULT_REGION = "us-east-1"
# `python -m sim up --region R` runs the environment (and its moto child) with this set: every part of the
# serving process reads its region here. A process outside (a test) asks the environment's settings instead.
REGION_VARIABLE = "NODESCALE_SIM_REGION"
REGION = os.environ.get(REGION_VARIABLE) or DEFAULT_REGION
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")  # DEFAULT_REGION's; see zones_for for any region


def partition_of(region: str) -> str:
    """The ARN partition of a region: aws-cn for cn-*, aws-us-gov for us-gov-*, aws elsewhere."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


PARTITION = partition_of(REGION)


def zones_for(region: str, known: tuple[str, ...] | None = None, count: int = 3) -> tuple[str, ...]:
    """The zones sim seeds a subnet in: the first ``count`` the bundled catalog has offerings in (and, given
    ``known``, that moto knows too)."""
    from nodescale.aws.catalog import bundled_zones

    zones = sorted({z for per_type in bundled_zones(region).values() for z in per_type})
    return tuple(z for z in zones if known is None or z in known)[:count]
DISCOVERY_TAG = "karpenter.sh/discovery"
# Everything nodescale launches carries this tag; the kubelet only joins instances that have it.
OWNERSHIP_TAG = "nodescale.io/cluster"
# Unrestricted credentials (DIR/admin.env): seeding, tests, fixtures, sim's own controllers.
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
ADMIN_CREDENTIALS = DUMMY_CREDENTIALS
# The functions' identities (DIR/env), held to the IAM policies the stack synthesizes. Each function has
# its own role, as deployed; the CLI's identity ("operator") may do what any of the functions may do,
# since it runs every use-case.
FUNCTIONS = ("provisioner", "interruption", "disruption", "cleanup")
FUNCTION_CREDENTIALS = {
    name: {"aws_access_key_id": f"AKIANODESCALE{name.upper()}", "aws_secret_access_key": f"sim-{name}-secret"}
    for name in FUNCTIONS
}
OPERATOR_CREDENTIALS = {"aws_access_key_id": "AKIANODESCALEOPERATOR", "aws_secret_access_key": "sim-operator-secret"}
# Kubernetes bearer tokens in the kubeconfigs sim writes: the admin (system:masters) and the functions
# (user and group nodescale-functions, which infra/manifests/rbac.yaml binds).
KUBE_ADMIN_TOKEN = "sim-admin-token"
KUBE_FUNCTIONS_TOKEN = "sim-functions-token"
KUBE_FUNCTIONS_USER = "nodescale-functions"
KUBE_FUNCTIONS_GROUP = "nodescale-functions"
# The RBAC function's identity (`-c applyRbac=true`): its access entry holds the EKS access policy the stack
# associates (infra/rbac.py), and no Kubernetes group: EKS authorizes it before any RBAC exists.
KUBE_RBAC_APPLIER_TOKEN = "sim-rbac-applier-token"
KUBE_RBAC_APPLIER_USER = "nodescale-rbac"
KUBE_RBAC_APPLIER_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"

# The EC2NodeClass "default" that selects what sim seeds for the demo cluster (its node role, subnets and
# security groups): the node class of the demo, the benchmarks and most sim tests.
DEMO_NODECLASS_YAML = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
"""
