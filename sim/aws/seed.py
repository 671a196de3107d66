"""Seed a fresh moto server like a real EKS account in which nodescale is about to be installed.

What exists afterwards (in the region asked for, us-east-1 unless `--region`): the EKS cluster; its VPC with one subnet per zone and a
security group, all tagged `karpenter.sh/discovery: <cluster>`; the node IAM role and instance
profile; the nodescale DynamoDB table; and resources nodescale must never touch: an unrelated VPC
with an instance named `unmanaged`, and an instance that carries only Karpenter's own tags.
The public AMIs and `/aws/service/...` parameters are built into the moto child (`sim.aws.amis`).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3

from nodescale import names
from sim.aws.amis import DEFAULT_KUBERNETES_VERSION, KUBERNETES_VERSIONS, image_id_for
from sim.aws.constants import DISCOVERY_TAG, DUMMY_CREDENTIALS, REGION, zones_for

_ASSUME_EC2 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
_ASSUME_EKS = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def table_name_for(cluster: str) -> str:
    # The stack's name for it: the CLI finds the table by this name when NODESCALE_TABLE is not set.
    return names.table_name(cluster)


def nodescale_table_spec(table_name: str) -> dict[str, Any]:
    """The nodescale state table: keyword arguments for DynamoDB `create_table`, plus `TimeToLive`
    (the `update_time_to_live` specification). One partition key `pk` (S), no sort key, TTL on
    `expiresAt` (epoch seconds): unavailable offerings and idempotency records expire by themselves."""
    return {
        "TableName": table_name,
        "AttributeDefinitions": [{"AttributeName": names.TABLE_KEY, "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": names.TABLE_KEY, "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
        "TimeToLive": {"Enabled": True, "AttributeName": names.TABLE_TTL},
    }


@dataclass
class SeededAccount:
    """Ids of everything `seed()` created; written to DIR/seed.json and served at /sim/v1/seed."""

    cluster: str
    region: str
    kubernetes_version: str
    cluster_arn: str = ""
    cluster_endpoint: str = ""
    cluster_ca: str = ""
    vpc_id: str = ""
    subnets: dict[str, str] = field(default_factory=dict)  # zone -> subnet id
    zones: list[str] = field(default_factory=list)  # the zones of the subnets, the region's own
    security_group_id: str = ""
    node_role_name: str = ""
    node_role_arn: str = ""
    instance_profile_name: str = ""
    instance_profile_arn: str = ""
    windows_node_role_name: str = ""
    windows_instance_profile_name: str = ""
    table_name: str = ""
    interruption_queue_url: str = ""
    dead_letter_queue_url: str = ""
    nodepool_parameter_path: str = ""
    unmanaged_vpc_id: str = ""
    unmanaged_subnet_id: str = ""
    unmanaged_instance_ids: list[str] = field(default_factory=list)
    karpenter_instance_ids: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def _tags(pairs: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in pairs.items()]


def seed(
    endpoint_url: str,
    cluster: str = "demo-cluster",
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    region: str = REGION,
    kube_url: str | None = None,
    stack: Mapping[str, Any] | None = None,
) -> SeededAccount:
    """Create the account's resources through moto's API (the same calls a real setup would make).
    With `kube_url`, DescribeCluster answers with that endpoint (the local Kubernetes API). With `stack` (the
    synthesized stack's queue policies and event rules, sim/aws/iam_policies.stack_resources_for), the queues
    carry the stack's resource policies and the stack's interruption rules target them, as after a deploy."""
    if kubernetes_version not in KUBERNETES_VERSIONS:
        raise ValueError(
            f"kubernetes version {kubernetes_version!r} has no seeded images: allowed are {KUBERNETES_VERSIONS}"
        )

    def client(name: str) -> Any:
        return boto3.client(name, endpoint_url=endpoint_url, region_name=region, **DUMMY_CREDENTIALS)

    ec2, iam, eks, ddb = client("ec2"), client("iam"), client("eks"), client("dynamodb")
    out = SeededAccount(cluster=cluster, region=region, kubernetes_version=kubernetes_version)
    discovery = {DISCOVERY_TAG: cluster}

    _seed_network(ec2, out, region)
    out.security_group_id = ec2.create_security_group(
        GroupName=f"eks-cluster-sg-{cluster}",
        Description=f"EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads. ({cluster})",
        VpcId=out.vpc_id,
        TagSpecifications=[
            {
                "ResourceType": "security-group",
                "Tags": _tags({"Name": f"eks-cluster-sg-{cluster}", f"kubernetes.io/cluster/{cluster}": "owned", **discovery}),
            }
        ],
    )["GroupId"]

    cluster_role = iam.create_role(
        RoleName=f"eks-cluster-role-{cluster}", AssumeRolePolicyDocument=json.dumps(_ASSUME_EKS)
    )["Role"]
    created = eks.create_cluster(
        name=cluster,
        version=kubernetes_version,
        roleArn=cluster_role["Arn"],
        resourcesVpcConfig={"subnetIds": list(out.subnets.values()), "securityGroupIds": [out.security_group_id]},
        tags={"karpenter.sh/discovery": cluster},
    )["cluster"]
    if kube_url:
        request = urllib.request.Request(
            f"{endpoint_url}/sim/v1/eks-endpoint", method="POST",
            data=json.dumps({"cluster": cluster, "endpoint": kube_url}).encode(),
        )
        with urllib.request.urlopen(request, timeout=30):
            pass
    described = eks.describe_cluster(name=cluster)["cluster"]
    out.cluster_arn = created["arn"]
    out.cluster_endpoint = described.get("endpoint", "")
    out.cluster_ca = described.get("certificateAuthority", {}).get("data", "")

    out.node_role_name = f"KarpenterNodeRole-{cluster}"
    out.node_role_arn = iam.create_role(
        RoleName=out.node_role_name,
        AssumeRolePolicyDocument=json.dumps(_ASSUME_EC2),
        Description=f"Role of the EC2 nodes nodescale launches for {cluster}",
    )["Role"]["Arn"]
    out.instance_profile_name = f"KarpenterNodeInstanceProfile-{cluster}"
    out.instance_profile_arn = iam.create_instance_profile(InstanceProfileName=out.instance_profile_name)[
        "InstanceProfile"
    ]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=out.instance_profile_name, RoleName=out.node_role_name)
    # The Windows node role and profile the stack creates when it is deployed with -c windows=true (EKS allows one
    # access entry per role, and Windows nodes join through an EC2_WINDOWS one), under the stack's names.
    out.windows_node_role_name = names.physical_name(cluster, "windows-node")
    iam.create_role(
        RoleName=out.windows_node_role_name,
        AssumeRolePolicyDocument=json.dumps(_ASSUME_EC2),
        Description=f"Role of the Windows EC2 nodes nodescale launches for {cluster}",
    )
    out.windows_instance_profile_name = names.physical_name(cluster, "windows-node", 128)
    iam.create_instance_profile(InstanceProfileName=out.windows_instance_profile_name)
    iam.add_role_to_instance_profile(
        InstanceProfileName=out.windows_instance_profile_name, RoleName=out.windows_node_role_name
    )

    out.table_name = table_name_for(cluster)
    spec = nodescale_table_spec(out.table_name)
    ttl = spec.pop("TimeToLive")
    ddb.create_table(**spec)
    ddb.update_time_to_live(TableName=out.table_name, TimeToLiveSpecification=ttl)
    out.nodepool_parameter_path = f"/nodescale/{cluster}/nodepools/"
    _seed_queues(client("sqs"), out, (stack or {}).get("queuePolicies") or {})
    if stack:
        _seed_rules(client("events"), client("sqs"), stack.get("rules") or [])

    _seed_unmanaged(ec2, out, kubernetes_version)
    return out


# infra/function_specs.INTERRUPTION's default timeout, for the queue's visibility timeout (sim does not import
# aws_cdk; tests/cdk/test_triggers.py holds the two equal).
INTERRUPTION_TIMEOUT_SECONDS = 150


def _seed_queues(sqs: Any, out: SeededAccount, policies: Mapping[str, list[dict[str, Any]]]) -> None:
    """The stack's interruption queue and dead-letter queue, with the stack's attributes (infra/triggers.py,
    from the layer's figures) and resource policies: what EventBridge delivers to and the function's event
    source mapping reads."""
    from nodescale.interruption import queue as interruption_queue

    def policy(name: str) -> dict[str, str]:
        statements = policies.get(name)
        return {"Policy": json.dumps({"Version": "2012-10-17", "Statement": statements})} if statements else {}

    dead_name = names.dead_letter_queue_name(out.cluster)
    dead = sqs.create_queue(QueueName=dead_name, Attributes={
        "MessageRetentionPeriod": str(14 * 24 * 3600), "SqsManagedSseEnabled": "true", **policy(dead_name)})
    out.dead_letter_queue_url = dead["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead["QueueUrl"], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    timeout = interruption_queue.visibility_timeout_seconds(INTERRUPTION_TIMEOUT_SECONDS)
    name = names.interruption_queue_name(out.cluster)
    out.interruption_queue_url = sqs.create_queue(
        QueueName=name,
        Attributes={
            **policy(name),
            "MessageRetentionPeriod": str(interruption_queue.retention_seconds(INTERRUPTION_TIMEOUT_SECONDS)),
            "VisibilityTimeout": str(timeout),
            "SqsManagedSseEnabled": "true",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn,
                                         "maxReceiveCount": interruption_queue.MAX_RECEIVE_COUNT}),
        },
    )["QueueUrl"]


def _seed_rules(events: Any, sqs: Any, rules: list[Mapping[str, Any]]) -> None:
    """The stack's event rules on the default bus, each targeting its queues (sim/aws/eventbridge.py delivers)."""
    for rule in rules:
        events.put_rule(Name=rule["name"], EventPattern=json.dumps(rule["eventPattern"]), State="ENABLED")
        targets = []
        for index, queue in enumerate(rule["queues"]):
            url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            targets.append({"Id": f"queue{index}", "Arn": arn})
        if targets:
            events.put_targets(Rule=rule["name"], Targets=targets)


def _seed_network(ec2: Any, out: SeededAccount, region: str) -> None:
    """The cluster's VPC and one private subnet in each of the region's first three zones."""
    cluster = out.cluster
    discovery = {DISCOVERY_TAG: cluster}
    vpc = ec2.create_vpc(
        CidrBlock="10.0.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": _tags({"Name": f"{cluster}-vpc", **discovery})}],
    )["Vpc"]
    out.vpc_id = vpc["VpcId"]
    ec2.modify_vpc_attribute(VpcId=out.vpc_id, EnableDnsHostnames={"Value": True})
    # Zones the region really has (the bundled catalog's) that moto also knows.
    known = tuple(z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"])
    out.zones = list(zones_for(region, known))
    for index, zone in enumerate(out.zones):
        # /18 per zone: room for thousands of nodes in load tests.
        subnet = ec2.create_subnet(
            VpcId=out.vpc_id,
            CidrBlock=f"10.0.{index * 64}.0/18",
            AvailabilityZone=zone,
            TagSpecifications=[
                {
                    "ResourceType": "subnet",
                    "Tags": _tags(
                        {
                            "Name": f"{cluster}-private-{zone}",
                            "kubernetes.io/role/internal-elb": "1",
                            f"kubernetes.io/cluster/{cluster}": "shared",
                            **discovery,
                        }
                    ),
                }
            ],
        )["Subnet"]
        out.subnets[zone] = subnet["SubnetId"]


def _seed_unmanaged(ec2: Any, out: SeededAccount, kubernetes_version: str) -> None:
    """Resources nodescale must never change: they lack the `nodescale.io/cluster` tag."""
    out.unmanaged_vpc_id = ec2.create_vpc(
        CidrBlock="172.31.0.0/16",
        TagSpecifications=[{"ResourceType": "vpc", "Tags": _tags({"Name": "unrelated"})}],
    )["Vpc"]["VpcId"]
    out.unmanaged_subnet_id = ec2.create_subnet(
        VpcId=out.unmanaged_vpc_id, CidrBlock="172.31.0.0/20", AvailabilityZone=out.zones[0]
    )["Subnet"]["SubnetId"]
    al2 = image_id_for(f"amazon-eks-node-{kubernetes_version}-v20241109")
    unmanaged = ec2.run_instances(
        ImageId=al2,
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        SubnetId=out.unmanaged_subnet_id,
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tags({"Name": "unmanaged"})}],
    )["Instances"]
    out.unmanaged_instance_ids = [i["InstanceId"] for i in unmanaged]
    karpenter = ec2.run_instances(
        ImageId=al2,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=out.subnets[out.zones[1]],
        SecurityGroupIds=[out.security_group_id],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": _tags(
                    {
                        "Name": "karpenter-node",
                        "karpenter.sh/nodepool": "default",
                        "karpenter.sh/managed-by": out.cluster,
                        "karpenter.k8s.aws/ec2nodeclass": "default",
                        f"kubernetes.io/cluster/{out.cluster}": "owned",
                    }
                ),
            }
        ],
    )["Instances"]
    out.karpenter_instance_ids = [i["InstanceId"] for i in karpenter]
