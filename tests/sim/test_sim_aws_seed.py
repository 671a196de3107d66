"""The sim's AWS account looks like a real EKS account to boto3."""

from __future__ import annotations

import pytest

from sim.aws.amis import eks_release
from sim.environment import Environment

pytestmark = pytest.mark.integration

DISCOVERY = [{"Name": "tag:karpenter.sh/discovery", "Values": ["demo-cluster"]}]
AMI_PARAMETERS = {
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id": ("x86_64", None, "amazon-eks-node-1.31"),
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/recommended/image_id": ("arm64", None, "amazon-eks-arm64-node-1.31"),
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/image_id": ("x86_64", None, "amazon-eks-gpu-node-1.31"),
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id": (
        "x86_64", None, "amazon-eks-node-al2023-x86_64-standard-1.31"),
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id": (
        "arm64", None, "amazon-eks-node-al2023-arm64-standard-1.31"),
    "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id": (
        "x86_64", None, "amazon-eks-node-al2023-x86_64-nvidia-1.31"),
    "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id": ("x86_64", None, "bottlerocket-aws-k8s-1.31-x86_64"),
    "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id": ("arm64", None, "bottlerocket-aws-k8s-1.31-arm64"),
    "/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.31/image_id": (
        "x86_64", "windows", "Windows_Server-2019-English-Core-EKS_Optimized-1.31"),
    "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id": (
        "x86_64", "windows", "Windows_Server-2022-English-Core-EKS_Optimized-1.31"),
}


def test_discovery_tag_finds_three_zones_and_a_security_group(sim: Environment) -> None:
    ec2 = sim.boto3_client("ec2")
    subnets = ec2.describe_subnets(Filters=DISCOVERY)["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert {s["VpcId"] for s in subnets} == {sim.seed["vpc_id"]}
    groups = ec2.describe_security_groups(Filters=DISCOVERY)["SecurityGroups"]
    assert [g["GroupId"] for g in groups] == [sim.seed["security_group_id"]]


def test_public_ami_parameters_resolve_to_existing_images(sim: Environment) -> None:
    ssm, ec2 = sim.boto3_client("ssm"), sim.boto3_client("ec2")
    found = ssm.get_parameters(Names=list(AMI_PARAMETERS))
    assert found["InvalidParameters"] == []
    ids = {p["Name"]: p["Value"] for p in found["Parameters"]}
    images = {i["ImageId"]: i for i in ec2.describe_images(ImageIds=list(ids.values()))["Images"]}
    for name, (arch, platform, prefix) in AMI_PARAMETERS.items():
        image = images[ids[name]]
        assert image["Architecture"] == arch, name
        assert image.get("Platform") == platform, name
        assert image["Name"].startswith(prefix), name
        assert image["State"] == "available" and image["CreationDate"]
    assert len(set(ids.values())) == len(AMI_PARAMETERS)


def test_pinned_example_ami_and_other_versions_exist(sim: Environment) -> None:
    ec2, ssm = sim.boto3_client("ec2"), sim.boto3_client("ssm")
    pinned = ec2.describe_images(ImageIds=["ami-08f2bf224b42c81da"])["Images"]
    assert pinned[0]["Name"].startswith("amazon-eks-node-1.31-")
    older = ssm.get_parameter(Name="/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id")
    assert older["Parameter"]["Value"] != pinned[0]["ImageId"]


def test_cluster_role_profile_and_state_table(sim: Environment) -> None:
    cluster = sim.boto3_client("eks").describe_cluster(name="demo-cluster")["cluster"]
    assert cluster["version"] == "1.31" and cluster["certificateAuthority"]["data"]
    # A Lambda finds its cluster through DescribeCluster: the endpoint is the local API server.
    assert cluster["endpoint"] == sim.kube_url
    iam = sim.boto3_client("iam")
    profile = iam.get_instance_profile(InstanceProfileName="KarpenterNodeInstanceProfile-demo-cluster")
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == ["KarpenterNodeRole-demo-cluster"]
    ddb = sim.boto3_client("dynamodb")
    table = ddb.describe_table(TableName=sim.env["NODESCALE_TABLE"])["Table"]
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    ttl = ddb.describe_time_to_live(TableName=sim.env["NODESCALE_TABLE"])["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}


def test_unmanaged_resources_exist_without_the_ownership_tag(sim: Environment) -> None:
    ec2 = sim.boto3_client("ec2")
    ids = sim.seed["unmanaged_instance_ids"] + sim.seed["karpenter_instance_ids"]
    instances = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
    tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in instances}
    unmanaged = tags[sim.seed["unmanaged_instance_ids"][0]]
    assert unmanaged == {"Name": "unmanaged"}
    karpenter = tags[sim.seed["karpenter_instance_ids"][0]]
    assert karpenter["karpenter.sh/nodepool"] == "default"
    assert all("nodescale.io/cluster" not in t for t in tags.values())
    assert {i["InstanceType"] for i in instances} == {"t3.micro", "m5.large"}


def test_a_published_ami_release_moves_the_recommended_parameters(sim: Environment) -> None:
    ssm, ec2 = sim.boto3_client("ssm"), sim.boto3_client("ec2")
    name = "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/standard/recommended/image_id"
    before = ssm.get_parameter(Name=name)["Parameter"]
    release = "v20250115"
    sim.publish_release(eks_release("1.30", release))

    after = ssm.get_parameter(Name=name)["Parameter"]
    assert after["Value"] != before["Value"] and after["Version"] == before["Version"] + 1
    image = ec2.describe_images(ImageIds=[after["Value"]])["Images"][0]
    assert image["Name"] == f"amazon-eks-node-al2023-arm64-standard-1.30-{release}"
    assert image["Architecture"] == "arm64"
    assert ec2.describe_images(ImageIds=[before["Value"]])["Images"], "the previous release stays available"


def test_p3_types_that_moto_lacks_are_described_and_offered(sim_env) -> None:
    # Karpenter's GPU example asks for p3.8xlarge/p3.16xlarge by name; real us-east-1 has them.
    ec2 = sim_env.boto3_client("ec2")
    described = ec2.describe_instance_types(InstanceTypes=["p3.8xlarge"])["InstanceTypes"][0]
    assert described["VCpuInfo"]["DefaultVCpus"] == 32
    assert described["GpuInfo"]["Gpus"][0]["Count"] == 4
    offered = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p3.16xlarge"]}]
    )["InstanceTypeOfferings"]
    assert {"us-east-1a", "us-east-1b", "us-east-1c"} <= {o["Location"] for o in offered}


def test_launch_time_is_the_simulated_time_of_the_launch(sim: Environment) -> None:
    # An instance must grow old as the environment's clock is advanced (registration timeouts, expiry).
    from datetime import datetime

    ec2 = sim.boto3_client("ec2")
    image = sim.boto3_client("ssm").get_parameter(
        Name="/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"
    )["Parameter"]["Value"]
    launched_at = datetime.fromisoformat(sim.clock()["now"].replace("Z", "+00:00"))
    iid = ec2.run_instances(ImageId=image, InstanceType="t3.micro", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    try:
        sim.advance(3600)
        now = datetime.fromisoformat(sim.clock()["now"].replace("Z", "+00:00"))
        launch = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["LaunchTime"]
        assert abs((launch - launched_at).total_seconds()) < 5
        assert (now - launch).total_seconds() >= 3600
    finally:
        ec2.terminate_instances(InstanceIds=[iid])
