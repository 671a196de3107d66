"""The launcher end to end on moto: a v1 NodePool and EC2NodeClass to a tagged instance whose user
data joins it with the pool's labels, reused templates, and drift when the configuration moves."""

from __future__ import annotations

import base64
import dataclasses
import email
import json
import tomllib
from datetime import UTC, datetime

import boto3
import pytest
import yaml
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.utils import utcnow

from nodescale.aws import instances, launchtemplates, offerings
from nodescale.aws import tags as tagging
from nodescale.aws.clients import AwsClients
from nodescale.aws.launcher import Launcher
from nodescale.disruption.drift import DriftKind
from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodeClass, NodePool, SelectorTerm
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

REGION = "us-east-1"
CLUSTER = "demo-cluster"
V = "1.31"
AL2023 = f"/aws/service/eks/optimized-ami/{V}/amazon-linux-2023"
X86, ARM, NEWER = "ami-0a1b2c3d4e5f60001", "ami-0a1b2c3d4e5f60002", "ami-0a1b2c3d4e5f60003"
WIN = "ami-0a1b2c3d4e5f60004"
DISCOVERY = {"karpenter.sh/discovery": CLUSTER}


def put_public_parameter(name: str, value: str) -> None:
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]
    param = Parameter(
        account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String", description=None,
        allowed_pattern=None, keyid=None, last_modified_date=utcnow(), version=1, data_type="text",
    )
    dict.__setitem__(backend._parameters, name, [param])


def add_image(image_id: str, arch: str, name: str = "") -> None:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    backend.amis[image_id] = Ami(
        backend, image_id, name=name or image_id, architecture=arch, creation_date=datetime(2024, 11, 9, tzinfo=UTC)
    )


@pytest.fixture(scope="module")
def clients():
    with mock_aws():
        for image, arch in ((X86, "x86_64"), (ARM, "arm64"), (NEWER, "x86_64"), (WIN, "x86_64")):
            add_image(image, arch)
        put_public_parameter(f"{AL2023}/x86_64/standard/recommended/image_id", X86)
        put_public_parameter(f"{AL2023}/arm64/standard/recommended/image_id", ARM)
        put_public_parameter(
            f"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-{V}/image_id", WIN
        )
        ec2 = boto3.client("ec2", region_name=REGION)
        iam = boto3.client("iam", region_name=REGION)
        eks = boto3.client("eks", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        for i, zone in enumerate(("us-east-1a", "us-east-1b")):
            sid = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
            ec2.create_tags(Resources=[sid], Tags=tagging.to_list(DISCOVERY))
        sg = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc)["GroupId"]
        ec2.create_tags(Resources=[sg], Tags=tagging.to_list(DISCOVERY))
        assume = json.dumps({"Version": "2012-10-17", "Statement": []})
        role_arn = iam.create_role(RoleName=f"KarpenterNodeRole-{CLUSTER}", AssumeRolePolicyDocument=assume)["Role"]["Arn"]
        iam.create_instance_profile(InstanceProfileName=f"KarpenterNodeInstanceProfile-{CLUSTER}")
        iam.add_role_to_instance_profile(
            InstanceProfileName=f"KarpenterNodeInstanceProfile-{CLUSTER}", RoleName=f"KarpenterNodeRole-{CLUSTER}"
        )
        eks.create_cluster(
            name=CLUSTER, roleArn=role_arn, version=V, resourcesVpcConfig={"subnetIds": []},
            kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
        )
        yield AwsClients(
            ec2=ec2, ssm=boto3.client("ssm", region_name=REGION), eks=eks,
            dynamodb=boto3.client("dynamodb", region_name=REGION), iam=iam,
        )


def offers(od: float) -> tuple[Offering, ...]:
    return tuple(Offering(z, ct, od * (0.4 if ct == "spot" else 1.0)) for z in ("us-east-1a", "us-east-1b")
                 for ct in ("spot", "on-demand"))


TYPES = [
    InstanceType("m5.large", {wk.ARCH: "amd64"}, {"cpu": 2000}, {}, offers(0.096)),
    InstanceType("m6g.large", {wk.ARCH: "arm64"}, {"cpu": 2000}, {}, offers(0.077)),
]

NODE_CLASS = NodeClass(
    "default",
    None,
    ami_selector_terms=(SelectorTerm(alias="al2023@latest"),),
    subnet_selector_terms=(SelectorTerm(tags=DISCOVERY),),
    security_group_selector_terms=(SelectorTerm(tags=DISCOVERY),),
    role=f"KarpenterNodeRole-{CLUSTER}",
    tags={"team": "platform"},
)
POOL = NodePool(
    "default",
    Requirements([Requirement.exactly(wk.CAPACITY_TYPE, "on-demand", "spot")]),
    "default",
    labels={"team": "platform"},
    startup_taints=(Taint("example.com/agent-not-ready", "NoSchedule"),),
)


@pytest.fixture(autouse=True)
def _fresh_offerings():
    offerings.clear_local()
    yield
    offerings.clear_local()


def user_data_of(ec2, instance_id: str) -> str:
    raw = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(raw).decode()


def test_launch_joins_the_node_with_the_pools_labels_and_tags(clients):
    launcher = Launcher(clients, CLUSTER)
    result = launcher.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-1")
    assert result.unfulfilled == 0 and result.request_errors == []
    (launched,) = result.instances
    # Spot is allowed and cheapest; the arm64 type is the cheapest of all.
    assert (launched.instance_type, launched.capacity_type) == ("m6g.large", "spot")
    (inst,) = [i for i in instances.list_instances(clients.ec2, CLUSTER) if i.instance_id == launched.instance_id]
    assert inst.image_id == ARM and inst.nodepool == "default" and inst.tags["team"] == "platform"
    msg = email.message_from_string(user_data_of(clients.ec2, inst.instance_id))
    (part,) = [p for p in msg.walk() if p.get_content_type() == "application/node.eks.aws"]
    config = yaml.safe_load(part.get_payload())
    assert config["spec"]["cluster"]["name"] == CLUSTER and config["spec"]["cluster"]["cidr"] == "10.100.0.0/16"
    flags = dict(f.split("=", 1) for f in config["spec"]["kubelet"]["flags"])
    assert "karpenter.sh/nodepool=default" in flags["--node-labels"] and "team=platform" in flags["--node-labels"]
    # #30.4: the node registers with the pool's startup taint and karpenter.sh/unregistered.
    assert flags["--register-with-taints"] == "example.com/agent-not-ready:NoSchedule,karpenter.sh/unregistered:NoExecute"
    assert launcher.drift(inst, POOL, NODE_CLASS) is None


def test_templates_are_reused_across_runs_and_listed_as_current(clients):
    first = Launcher(clients, CLUSTER)
    first.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-2")
    before = {t["LaunchTemplateName"] for t in launchtemplates.list_managed(clients.ec2, CLUSTER)}
    Launcher(clients, CLUSTER).launch(POOL, NODE_CLASS, TYPES, key="pods:uid-3")
    after = {t["LaunchTemplateName"] for t in launchtemplates.list_managed(clients.ec2, CLUSTER)}
    assert after == before
    assert first.current_template_names(POOL, NODE_CLASS) <= after
    assert len(first.current_template_names(POOL, NODE_CLASS)) == 2  # one per architecture


def test_zone_and_capacity_type_requirements_narrow_the_launch(clients):
    launcher = Launcher(clients, CLUSTER)
    pods = Requirements([Requirement.exactly(wk.ZONE, "us-east-1b"), Requirement.exactly(wk.CAPACITY_TYPE, "on-demand")])
    (launched,) = launcher.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-4", requirements=pods).instances
    assert (launched.zone, launched.capacity_type) == ("us-east-1b", "on-demand")
    nowhere = Requirements([Requirement.exactly(wk.ZONE, "us-east-1c")])
    result = launcher.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-5", requirements=nowhere)
    assert result.instances == [] and result.request_errors[0][0] == "NoSubnetInAllowedZones"


def test_drift_on_labels_and_on_a_newer_image(clients):
    launcher = Launcher(clients, CLUSTER)
    pods = Requirements([Requirement.exactly(wk.ARCH, "amd64")])
    (launched,) = launcher.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-6", requirements=pods).instances
    (inst,) = [i for i in instances.list_instances(clients.ec2, CLUSTER) if i.instance_id == launched.instance_id]
    assert inst.image_id == X86
    relabelled = dataclasses.replace(POOL, labels={"team": "data"})
    # moto gives fleet instances their VPC's default group, not the template's: the groups EC2 would report.
    groups = tuple(g.id for g in launcher.resources(NODE_CLASS).security_groups)
    changed = Launcher(clients, CLUSTER).drift(dataclasses.replace(inst, security_group_ids=groups), relabelled,
                                               NODE_CLASS)
    assert changed.kind == DriftKind.NODE_CLASS and "launch configuration changed" in changed.detail
    put_public_parameter(f"{AL2023}/x86_64/standard/recommended/image_id", NEWER)
    try:
        # karpenter-provider-aws drift_test.go: "should return drifted if the AMI is not valid" (AMIDrift).
        newer = Launcher(clients, CLUSTER).drift(inst, POOL, NODE_CLASS)
        assert newer.kind == DriftKind.AMI and f"image {X86} is no longer selected" in newer.detail
    finally:
        put_public_parameter(f"{AL2023}/x86_64/standard/recommended/image_id", X86)


def test_drift_names_the_subnet_and_the_security_groups(clients):
    # karpenter-provider-aws drift_test.go: "should return drifted if the subnet is not valid" (SubnetDrift) and
    # "should return drifted if there are more/less security groups present" (SecurityGroupDrift).
    launcher = Launcher(clients, CLUSTER)
    (launched,) = launcher.launch(POOL, NODE_CLASS, TYPES, key="pods:uid-7").instances
    (inst,) = [i for i in instances.list_instances(clients.ec2, CLUSTER) if i.instance_id == launched.instance_id]
    assert launcher.drift(inst, POOL, NODE_CLASS) is None
    moved = launcher.drift(dataclasses.replace(inst, subnet_id="subnet-0000gone"), POOL, NODE_CLASS)
    assert moved.kind == DriftKind.SUBNET and "subnet-0000gone" in moved.detail
    extra = launcher.drift(dataclasses.replace(inst, security_group_ids=("sg-0old",), config_hash="0000stale"),
                           POOL, NODE_CLASS)
    assert extra.kind == DriftKind.SECURITY_GROUP and "sg-0old" in extra.detail
    wanted = launcher.resources(NODE_CLASS).security_groups
    same = tuple(g.id for g in wanted)
    stale = launcher.drift(dataclasses.replace(inst, security_group_ids=same, config_hash="0000stale"), POOL, NODE_CLASS)
    assert stale.kind == DriftKind.NODE_CLASS


def test_windows_pool_gets_powershell_user_data(clients):
    windows_class = dataclasses.replace(NODE_CLASS, name="windows2022", ami_family="Windows2022", ami_selector_terms=())
    pool = NodePool(
        "windows2022", Requirements([Requirement.exactly(wk.CAPACITY_TYPE, "on-demand")]), "windows2022"
    )
    result = Launcher(clients, CLUSTER).launch(pool, windows_class, TYPES, key="pods:win-1")
    (launched,) = result.instances
    assert launched.instance_type == "m5.large"  # no arm64 Windows image
    data = user_data_of(clients.ec2, launched.instance_id)
    assert data.startswith("<powershell>") and "-EKSClusterName 'demo-cluster'" in data
    assert "karpenter.sh/nodepool=windows2022" in data


def test_a_launch_under_a_lost_lease_sends_no_create_fleet(clients, monkeypatch):
    """#27.7: the launch lease is checked right before each CreateFleet. A holder frozen past its TTL
    while another invocation took the lease refuses to launch (LeaseLost) instead of launching beside it;
    before, nothing looked at the lease after it was taken."""
    from nodescale import clock
    from nodescale.aws import leases

    table = "launcher-lease-test"
    clients.dynamodb.create_table(
        TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
    )
    now = [1_700_000_000.0]
    monkeypatch.setattr(clock, "epoch", lambda: now[0])
    running = {"Name": "instance-state-name", "Values": ["pending", "running"]}
    before = {i["InstanceId"] for r in clients.ec2.describe_instances(Filters=[running])["Reservations"]
              for i in r["Instances"]}

    with leases.hold(clients.dynamodb, table, "launch", ttl_seconds=60) as mine:
        mine.stop()  # a frozen process: its heartbeat does not run
        now[0] += 120
        with leases.hold(clients.dynamodb, table, "launch", wait_seconds=0, ttl_seconds=60), \
                pytest.raises(leases.LeaseLost, match="taken by another invocation"):
            Launcher(clients, CLUSTER).launch(POOL, NODE_CLASS, TYPES, key="pods:uid-lost", fence=mine.check)

    after = {i["InstanceId"] for r in clients.ec2.describe_instances(Filters=[running])["Reservations"]
             for i in r["Instances"]}
    assert after == before


def test_each_max_pods_gets_its_template_and_is_not_drift(clients):
    """#31.5: aws/karpenter-provider-aws pkg/providers/launchtemplate (one launch template per distinct
    max-pods; suite_test.go "should specify --use-max-pods=false when using ENI-based pod density" for AL2,
    the NodeConfig's kubelet maxPods for AL2023): the launched node's user data carries the pods count the
    planner gave its type, and a node of either count is not drifted (Karpenter hashes the node class)."""
    launcher = Launcher(clients, CLUSTER)
    small = InstanceType("t3.small", {wk.ARCH: "amd64"}, {"cpu": 2000, "pods": 11}, {}, offers(0.02))
    large = InstanceType("m5.large", {wk.ARCH: "amd64"}, {"cpu": 2000, "pods": 29}, {}, offers(0.096))
    planned = launcher.templates(POOL, NODE_CLASS, [small, large])
    assert [[t.name for t in p.instance_types] for p in planned] == [["t3.small"], ["m5.large"]]
    assert len({p.spec.name for p in planned}) == 2 and len({p.spec.settings_hash for p in planned}) == 1
    assert {p.spec.name for p in planned} <= launcher.current_template_names(POOL, NODE_CLASS, [small, large])
    (launched,) = launcher.launch(POOL, NODE_CLASS, [small, large], key="pods:uid-maxpods").instances
    assert launched.instance_type == "t3.small"
    msg = email.message_from_string(user_data_of(clients.ec2, launched.instance_id))
    (part,) = [p for p in msg.walk() if p.get_content_type() == "application/node.eks.aws"]
    assert yaml.safe_load(part.get_payload())["spec"]["kubelet"]["config"]["maxPods"] == 11
    (inst,) = [i for i in instances.list_instances(clients.ec2, CLUSTER) if i.instance_id == launched.instance_id]
    assert launcher.drift(inst, POOL, NODE_CLASS) is None


def test_a_bottlerocket_image_selected_by_id_binds_by_the_release_in_its_name(clients):
    """#31.5 (Bottlerocket version). Restates aws/karpenter-provider-aws pkg/providers/amifamily/
    bottlerocket_test.go, Describe "resolveAMIVersion", It "should resolve version from ID with resolved AMI":
    with no alias, the launch template of an image named for v1.46.0 binds the instance store's default
    directories; an image whose name carries no release keeps them named (the version is unknown)."""
    names = {"ami-0b0c0d0e0f0a00146": "bottlerocket-aws-k8s-1.31-x86_64-v1.46.0-431fe75a",
             "ami-0b0c0d0e0f0a00999": "my-bottlerocket-build"}
    for image_id, name in names.items():
        add_image(image_id, "x86_64", name)
    binds = {}
    for image_id in names:
        node_class = dataclasses.replace(NODE_CLASS, name=f"br-{image_id}", ami_family="Bottlerocket",
                                         instance_store_policy="RAID0", ami_selector_terms=(SelectorTerm(id=image_id),))
        (planned,) = Launcher(clients, CLUSTER).templates(POOL, node_class, TYPES[:1])
        settings = tomllib.loads(planned.spec.user_data)["settings"]
        binds[image_id] = settings["bootstrap-commands"]["000-mount-instance-storage"]["commands"][1]
    assert binds == {
        "ami-0b0c0d0e0f0a00146": ["apiclient", "ephemeral-storage", "bind"],
        "ami-0b0c0d0e0f0a00999": ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd",
                                  "/var/lib/kubelet", "/var/log/pods"],
    }
