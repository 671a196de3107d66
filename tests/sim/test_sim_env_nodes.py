"""Instances launched through boto3's create_fleet join the local cluster the way real nodes do."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.environment import Environment
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration

AL2_USER_DATA = """#!/bin/bash
set -ex
/etc/eks/bootstrap.sh demo-cluster --apiserver-endpoint https://example.eks.amazonaws.com \\
  --kubelet-extra-args '--node-labels="karpenter.sh/nodepool=default,team={team}" --register-with-taints="dedicated={team}:NoSchedule"'
"""
WINDOWS_USER_DATA = """<powershell>
[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"
& $EKSBootstrapScriptFile -EKSClusterName 'demo-cluster' -KubeletExtraArgs '--node-labels="karpenter.sh/nodepool=windows" --max-pods=110' 3>&1 4>&1
</powershell>
"""
BOTTLEROCKET_USER_DATA = """[settings.kubernetes]
cluster-name = "demo-cluster"
api-server = "https://example.eks.amazonaws.com"
[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "arm"
"""


def ssm_image(sim: Environment, name: str) -> str:
    return sim.boto3_client("ssm").get_parameter(Name=name)["Parameter"]["Value"]


def launch(
    sim: Environment, image_id: str, user_data: str, instance_type: str, zone: str, capacity_type: str = "on-demand",
    block_devices: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    ec2 = sim.boto3_client("ec2")
    data: dict[str, Any] = {"ImageId": image_id, "UserData": base64.b64encode(user_data.encode()).decode()}
    if block_devices:
        data["BlockDeviceMappings"] = block_devices
    template = ec2.create_launch_template(
        LaunchTemplateName=f"nodescale-test-{uuid.uuid4().hex[:10]}", LaunchTemplateData=data
    )["LaunchTemplate"]
    fleet = ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template["LaunchTemplateId"], "Version": "$Latest"},
                "Overrides": [{"InstanceType": instance_type, "SubnetId": sim.seed["subnets"][zone]}],
            }
        ],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "nodescale.io/cluster", "Value": "demo-cluster"},
                    {"Key": "karpenter.sh/nodepool", "Value": "default"},
                ],
            }
        ],
    )
    instance_id = fleet["Instances"][0]["InstanceIds"][0]
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def read_node(core: client.CoreV1Api, name: str) -> client.V1Node | None:
    try:
        return core.read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def ready(node: client.V1Node | None) -> bool:
    return bool(node) and any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture(scope="module")
def core(sim_env: Environment) -> client.CoreV1Api:
    return client.CoreV1Api(sim_env.kube_api_client())


def test_al2_instance_joins_becomes_ready_runs_a_pod_and_leaves(sim: Environment, core: client.CoreV1Api) -> None:
    team = f"t{uuid.uuid4().hex[:6]}"
    image = ssm_image(sim, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")
    instance = launch(
        sim, image, AL2_USER_DATA.format(team=team), "m5.large", "us-east-1b",
        block_devices=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100, "VolumeType": "gp3"}}],
    )
    name = instance["PrivateDnsName"]

    node = wait_for("the node to register", lambda: read_node(core, name), timeout=10)
    labels = node.metadata.labels
    assert labels["team"] == team and labels["karpenter.sh/nodepool"] == "default"
    assert labels["node.kubernetes.io/instance-type"] == "m5.large"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert labels["topology.kubernetes.io/region"] == "us-east-1"
    assert labels["kubernetes.io/arch"] == "amd64" and labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/hostname"] == name
    assert node.spec.provider_id == f"aws:///us-east-1b/{instance['InstanceId']}"
    taints = {(t.key, t.value, t.effect) for t in node.spec.taints}
    assert ("dedicated", team, "NoSchedule") in taints
    assert ("node.kubernetes.io/not-ready", None, "NoSchedule") in taints
    assert not ready(node)
    assert node.status.allocatable["cpu"] == "1930m"
    assert node.status.allocatable["pods"] == "29"
    assert node.status.allocatable["memory"] == f"{(8192 - (11 * 29 + 255) - 100) * 1024}Ki"
    assert node.status.capacity["ephemeral-storage"] == f"{100 * 1024 * 1024}Ki"

    sim.advance(sim.state["ready_delay"])
    node = wait_for("the node to turn Ready", lambda: (n := read_node(core, name)) and ready(n) and n, timeout=5)
    assert "node.kubernetes.io/not-ready" not in {t.key for t in node.spec.taints or []}

    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=f"fits-{team}"),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="app", image="nginx", resources=client.V1ResourceRequirements(
                requests={"cpu": "500m", "memory": "256Mi"}))],
            node_selector={"team": team},
            tolerations=[client.V1Toleration(key="dedicated", operator="Equal", value=team, effect="NoSchedule")],
        ),
    )
    core.create_namespaced_pod("default", pod)
    running = wait_for(
        "the pod to run on the new node",
        lambda: (p := core.read_namespaced_pod(f"fits-{team}", "default")).status.phase == "Running" and p,
        timeout=10,
    )
    assert running.spec.node_name == name

    sim.boto3_client("ec2").terminate_instances(InstanceIds=[instance["InstanceId"]])
    wait_for("the node to be removed", lambda: read_node(core, name) is None, timeout=10)
    wait_for("its pod to be deleted", lambda: f"fits-{team}" not in {
        p.metadata.name for p in core.list_namespaced_pod("default").items}, timeout=10)


def test_windows_and_bottlerocket_nodes_take_os_arch_and_build_from_their_image(
    sim: Environment, core: client.CoreV1Api
) -> None:
    windows = launch(
        sim,
        ssm_image(sim, "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id"),
        WINDOWS_USER_DATA, "m5.xlarge", "us-east-1a",
    )
    arm = launch(
        sim, ssm_image(sim, "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id"),
        BOTTLEROCKET_USER_DATA, "m6g.large", "us-east-1c", capacity_type="spot",
    )
    win_node = wait_for("the Windows node", lambda: read_node(core, windows["PrivateDnsName"]), timeout=10)
    arm_node = wait_for("the Bottlerocket node", lambda: read_node(core, arm["PrivateDnsName"]), timeout=10)
    try:
        assert win_node.metadata.labels["kubernetes.io/os"] == "windows"
        assert win_node.metadata.labels["node.kubernetes.io/windows-build"] == "10.0.20348"
        assert win_node.status.allocatable["pods"] == "110"
        assert arm_node.metadata.labels["kubernetes.io/arch"] == "arm64"
        assert arm_node.metadata.labels["karpenter.sh/nodepool"] == "arm"
        assert arm_node.metadata.labels["topology.kubernetes.io/zone"] == "us-east-1c"
    finally:
        sim.boto3_client("ec2").terminate_instances(InstanceIds=[windows["InstanceId"], arm["InstanceId"]])
    wait_for("both nodes to go", lambda: all(read_node(core, i["PrivateDnsName"]) is None for i in (windows, arm)))


@pytest.mark.parametrize(
    ("image_param", "user_data", "reason"),
    [
        (
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id",
            AL2_USER_DATA.format(team="x").replace("demo-cluster", "someone-elses-cluster"),
            "bootstraps cluster 'someone-elses-cluster'",
        ),
        (
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id",
            AL2_USER_DATA.format(team="x"),
            "does not run AL2 user data",
        ),
        (
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id",
            "#!/bin/bash\necho forgot to bootstrap\n",
            "never calls /etc/eks/bootstrap.sh",
        ),
    ],
)
def test_instances_whose_user_data_cannot_join_never_become_nodes(
    sim: Environment, core: client.CoreV1Api, image_param: str, user_data: str, reason: str
) -> None:
    instance = launch(sim, ssm_image(sim, image_param), user_data, "c5.large", "us-east-1a")
    try:
        rejected = wait_for(
            "the kubelet to give up on the instance",
            lambda: sim.kubelet()["rejected"].get(instance["InstanceId"]),
            timeout=10,
        )
        assert reason in rejected
        assert read_node(core, instance["PrivateDnsName"]) is None
    finally:
        sim.boto3_client("ec2").terminate_instances(InstanceIds=[instance["InstanceId"]])


def test_instances_without_the_ownership_tag_never_join(sim: Environment, core: client.CoreV1Api) -> None:
    seeded = sim.seed
    foreign_ids = seeded["unmanaged_instance_ids"] + seeded["karpenter_instance_ids"]
    names = {n.metadata.name for n in core.list_node().items}
    ec2 = sim.boto3_client("ec2")
    for reservation in ec2.describe_instances(InstanceIds=foreign_ids)["Reservations"]:
        for instance in reservation["Instances"]:
            assert instance["State"]["Name"] == "running"
            assert instance["PrivateDnsName"] not in names
    status = wait_for(
        "the kubelet to have looked at the seeded instances",
        lambda: (st := sim.kubelet()) and set(foreign_ids) <= set(st["untagged_instances"]) and st,
        timeout=5,
    )
    assert not set(foreign_ids) & set(status["nodes"].values())


def test_nodes_created_directly_in_the_api_are_reported_as_not_from_an_instance(
    sim: Environment, core: client.CoreV1Api
) -> None:
    name = f"hand-made-{uuid.uuid4().hex[:6]}"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name)))
    try:
        assert name in sim.kubelet()["other_nodes"]
    finally:
        core.delete_node(name)


def test_a_stopped_instance_turns_its_node_not_ready_until_it_starts_again(
    sim: Environment, core: client.CoreV1Api
) -> None:
    image = ssm_image(sim, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id")
    user_data = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo-cluster\n"
        "  kubelet:\n    flags:\n    - --node-labels=karpenter.sh/nodepool=stop-start\n"
    )
    instance = launch(sim, image, user_data, "c5.large", "us-east-1c")
    name, ec2 = instance["PrivateDnsName"], sim.boto3_client("ec2")
    try:
        wait_for("the node to register", lambda: read_node(core, name), timeout=10)
        sim.advance(sim.state["ready_delay"])
        wait_for("the node to turn Ready", lambda: ready(read_node(core, name)), timeout=5)

        ec2.stop_instances(InstanceIds=[instance["InstanceId"]])
        node = wait_for("the node to go NotReady", lambda: (n := read_node(core, name)) and not ready(n) and n)
        assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["Unknown"]
        assert ("node.kubernetes.io/unreachable", "NoExecute") in {(t.key, t.effect) for t in node.spec.taints}

        ec2.start_instances(InstanceIds=[instance["InstanceId"]])
        node = wait_for("the node to come back", lambda: (n := read_node(core, name)) and ready(n) and n)
        assert not {t.key for t in node.spec.taints or []} & {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}
    finally:
        ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
    wait_for("the node to be removed", lambda: read_node(core, name) is None, timeout=10)


def test_an_instance_that_ends_between_the_kubelets_state_list_and_its_describe_never_registers(
    sim: Environment,
) -> None:
    """A kubelet is gone with its instance: an instance listed running and terminated before it was described
    gets no Node. Before, the kubelet registered it from its stale list (the Node lived until the next pass
    deleted it), and a test starting in that window counted the NotReady Node as capacity in flight (the CI
    failures of test_node_labels and test_interruption's impostor test on 5abd433)."""
    from sim.clock import Clock
    from sim.kube.store import Store
    from sim.nodes.kubelet import Kubelet

    image = ssm_image(sim, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")
    instance = launch(sim, image, AL2_USER_DATA.format(team="ended"), "m5.large", "us-east-1b")
    iid = instance["InstanceId"]
    sim.boto3_client("ec2").terminate_instances(InstanceIds=[iid])
    store = Store(Clock())
    kubelet = Kubelet(store, store.clock, sim.state["moto_url"], sim.cluster, ready_delay=0)
    kubelet._states = lambda: {iid: "running"}  # type: ignore[method-assign]  # listed before it ended
    kubelet.poll_once()
    assert store.list("v1/nodes") == [] and iid not in kubelet.status()["nodes"].values()
