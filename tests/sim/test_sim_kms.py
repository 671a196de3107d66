"""#28.2 on sim: customer-managed KMS keys are authorized as AWS authorizes them, and the product says so.

- A SecureString NodePool parameter under a customer-managed key: SSM decrypts it with the caller's kms:Decrypt
  on the key, through SSM (kms:ViaService). Without the grant the read of that parameter is refused; the
  product leaves out only its documents, with an error naming the parameter, and still reads the others.
- A fleet whose volumes are encrypted with a customer-managed key: EC2 creates a grant on the key and asks it
  for a data key as the caller. AWS accepts the fleet either way; without the grants the instance terminates as
  it starts with StateReason Client.InternalError (Karpenter's troubleshooting, "Node terminates before ready on
  failed encrypted EBS volume"), and the product shows the pool as "launch failing".

The grants are the stack's own statements (infra/iam.py), added to sim's synthesized policies and enforced by a
second AWS endpoint in front of the same moto, as tests/sim/test_sim_iam_launch.py does."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

import boto3
import pytest

from infra import iam as stack_iam
from nodescale.aws import instances as ec2_instances
from nodescale.aws.nodepool_parameters import load_from_ssm
from nodescale.model.nodepool import NodePool
from nodescale.usecases.world import World, note_launches_that_died
from sim.aws.constants import FUNCTION_CREDENTIALS, REGION
from sim.aws.iam_policies import policies_for
from tests.sim.test_sim_iam_launch import OWNER_TAG, _endpoint, _fleet, _instances, launch_setup  # noqa: F401

pytestmark = pytest.mark.integration

NODE_CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo-cluster
"""


def _granted(sim, function: str, statements: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """sim's synthesized policies with ``statements`` (infra/iam.py's, for sim's region) added to ``function``'s."""
    policies = copy.deepcopy(policies_for(sim.cluster, REGION))
    policies[function] += [s.to_statement_json() for s in statements]
    return policies


@pytest.fixture
def customer_key(sim) -> Iterator[str]:
    """A customer-managed KMS key, made as the administrator."""
    kms = sim.boto3_client("kms")
    key = kms.create_key(Description="nodescale #28.2 test key")["KeyMetadata"]
    try:
        yield key["Arn"]
    finally:
        kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7)


def test_a_secure_string_nodepool_parameter_under_a_customer_key_needs_kms_decrypt(sim, customer_key: str) -> None:
    """#28.2: read as the provisioner, a SecureString parameter under a customer-managed key is refused without
    kms:Decrypt on the key (only its documents are left out, the error naming the parameter and the denial) and
    read with the stack's grant for -c nodePoolParameterKey; one under alias/aws/ssm needs no grant."""
    admin = sim.boto3_client("ssm")
    path = f"/nodescale/{sim.cluster}/nodepools"
    written = {f"{path}/kms-secure": ("SecureString", customer_key, "secure-class"),
               f"{path}/kms-managed": ("SecureString", None, "managed-class"),
               f"{path}/kms-plain": ("String", None, "plain-class")}
    for name, (kind, key, node_class) in written.items():
        admin.put_parameter(Name=name, Type=kind, Value=NODE_CLASS.format(name=node_class), Overwrite=True,
                            **({"KeyId": key} if key else {}))
    try:
        ungranted = boto3.client("ssm", endpoint_url=sim.aws_endpoint, region_name=REGION,
                                 **FUNCTION_CREDENTIALS["provisioner"])
        result = load_from_ssm(ungranted, path)
        names = set(result.nodeclasses)
        assert {"managed-class", "plain-class"} <= names and "secure-class" not in names
        (error,) = [e for e in result.errors if "kms-" in e.source]
        assert error.source == f"ssm:{path}/kms-secure"
        assert f"kms:Decrypt on resource: {customer_key}" in error.message
        assert "-c nodePoolParameterKey" in error.message

        policies = _granted(sim, "provisioner", [stack_iam.parameter_key_statement([customer_key], REGION, "amazonaws.com")])
        with _endpoint(sim, policies) as endpoint:
            granted = boto3.client("ssm", endpoint_url=endpoint, region_name=REGION,
                                   **FUNCTION_CREDENTIALS["provisioner"])
            result = load_from_ssm(granted, path)
        assert {"secure-class", "managed-class", "plain-class"} <= set(result.nodeclasses)
        assert [e for e in result.errors if "kms-" in e.source] == []
    finally:
        admin.delete_parameters(Names=list(written))


def _encrypted_template(sim, setup: dict[str, Any], key: str, pool: str) -> str:
    admin = sim.boto3_client("ec2")
    owned = [{"Key": OWNER_TAG, "Value": sim.cluster}, {"Key": "karpenter.sh/nodepool", "Value": pool}]
    data = {"InstanceType": "m5.large", "ImageId": setup["image"], "SecurityGroupIds": [setup["group"]],
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3",
                                                                         "Encrypted": True, "KmsKeyId": key}}],
            "TagSpecifications": [{"ResourceType": t, "Tags": owned} for t in ("instance", "volume", "network-interface")]}
    return admin.create_launch_template(
        LaunchTemplateName=f"kms-{pool}", LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": owned[:1]}],
    )["LaunchTemplate"]["LaunchTemplateId"]


def test_a_launch_with_volumes_under_a_customer_key_dies_without_the_grant_and_says_so(
        sim, launch_setup: dict[str, Any], customer_key: str) -> None:  # noqa: F811
    """#28.2: a fleet whose volume is encrypted with a customer-managed key is accepted either way; without the
    stack's kms:CreateGrant/data-key grants the instance terminates as it starts (StateReason
    Client.InternalError) and the pool shows "launch failing: Client.InternalError: ..."; with the grants for
    -c ebsKmsKey the instance lives."""
    admin = sim.boto3_client("ec2")
    pool = "encrypted-pool"
    setup = {**launch_setup, "template": _encrypted_template(sim, launch_setup, customer_key, pool)}
    try:
        ids = _instances(_fleet(sim.aws_endpoint, setup, sim.cluster)())
        assert ids
        (instance,) = [i for r in admin.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
        assert instance["State"]["Name"] == "terminated"
        assert instance["StateReason"]["Code"] == "Client.InternalError"

        world = World(now=instance["LaunchTime"], cluster=sim.cluster,
                      nodepools={pool: cast(NodePool, None)})  # only its name counts here
        world = note_launches_that_died(world, ec2_instances.died_at_launch(admin, sim.cluster))
        assert world.launch_failures[pool].describe().startswith(
            f"launch failing: Client.InternalError: instance {ids[0]} terminated as it started")

        policies = _granted(sim, "provisioner", stack_iam.volume_key_statements([customer_key], REGION, "amazonaws.com"))
        with _endpoint(sim, policies) as endpoint:
            alive = _instances(_fleet(endpoint, setup, sim.cluster)())
        assert alive
        (instance,) = [i for r in admin.describe_instances(InstanceIds=alive)["Reservations"] for i in r["Instances"]]
        assert instance["State"]["Name"] in ("pending", "running")
        world = replace(world, instances=ec2_instances.list_instances(admin, sim.cluster), launch_failures={})
        world = note_launches_that_died(world, ec2_instances.died_at_launch(admin, sim.cluster))
        assert pool not in world.launch_failures  # a later instance of the pool lives
        admin.terminate_instances(InstanceIds=alive)
    finally:
        admin.delete_launch_template(LaunchTemplateId=setup["template"])
