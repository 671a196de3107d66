"""EC2's spot interruption in sim: warned now, the instance ended when the notice runs out, the drain recorded."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.environment import Environment, SimEnvironmentError
from tests.integration.helpers import wait_for
from tests.sim.test_sim_env_nodes import AL2_USER_DATA, launch, read_node, ready, ssm_image

pytestmark = pytest.mark.integration

AL2_IMAGE = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"


@pytest.fixture(scope="module")
def core(sim_env: Environment) -> client.CoreV1Api:
    return client.CoreV1Api(sim_env.kube_api_client())


def _ready_spot_node(sim: Environment, core: client.CoreV1Api, team: str) -> tuple[str, str]:
    instance = launch(sim, ssm_image(sim, AL2_IMAGE), AL2_USER_DATA.format(team=team), "m5.large", "us-east-1a",
                      capacity_type="spot")
    name = instance["PrivateDnsName"]
    wait_for("the node to register", lambda: read_node(core, name), timeout=10)
    sim.advance(sim.state["ready_delay"])
    wait_for("the node to turn Ready", lambda: ready(read_node(core, name)), timeout=5)
    return instance["InstanceId"], name


def _pod(core: client.CoreV1Api, ns: str, name: str, node: str, team: str, app: str) -> None:
    core.create_namespaced_pod(ns, client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": app}),
        spec=client.V1PodSpec(
            node_name=node, containers=[client.V1Container(name="app", image="nginx")],
            tolerations=[client.V1Toleration(key="dedicated", operator="Equal", value=team, effect="NoSchedule")])))
    wait_for(f"{name} to run", lambda: core.read_namespaced_pod(name, ns).status.phase == "Running", timeout=10)


def _evict(core: client.CoreV1Api, ns: str, name: str) -> int:
    try:
        core.create_namespaced_pod_eviction(name, ns, client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=ns)))
        return 201
    except ApiException as exc:
        return exc.status


def _entry(sim: Environment, iid: str) -> dict[str, Any]:
    return next(e for e in sim.spot_interruption_record() if e["instanceId"] == iid)


def test_a_warned_spot_instance_ends_with_its_notice_and_the_pods_left_are_lost_and_told_apart(
    sim: Environment, core: client.CoreV1Api,
) -> None:
    """#33.1 and #33.2: as EC2 does, the warned instance is terminated when the two-minute notice runs out,
    whatever is still on it; its Node and pods go with it. The record says when the Node was tainted and
    cordoned and first evicted from, and which pods were lost: held by a PDB that allowed no more, or not
    reached in time."""
    team = f"t{uuid.uuid4().hex[:6]}"
    ns = f"spot-{team}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    iid, node = _ready_spot_node(sim, core, team)
    for name, app in (("evicted", "free"), ("held", "guarded"), ("forgotten", "free2")):
        _pod(core, ns, name, node, team, app)
    client.PolicyV1Api(core.api_client).create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "guard"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}})

    (warning,) = sim.spot_interruptions([iid])
    assert warning["node"] == node and warning["time"]
    assert _entry(sim, iid)["evictablePods"] == 3
    core.patch_node(node, {"spec": {"unschedulable": True,
                                    "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
                                               {"key": "dedicated", "value": team, "effect": "NoSchedule"}]}})
    assert _evict(core, ns, "evicted") == 201
    assert _evict(core, ns, "held") == 429
    sim.advance(60)
    assert _entry(sim, iid)["endedAt"] is None  # half the notice: still there
    assert read_node(core, node) is not None

    sim.advance(61)
    entry = wait_for("the notice to run out", lambda: (e := _entry(sim, iid))["endedAt"] is not None and e)
    ec2 = sim.boto3_client("ec2")
    state = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    wait_for("the Node to go with its instance", lambda: read_node(core, node) is None, timeout=10)
    wait_for("the pods left on it to go", lambda: not core.list_namespaced_pod(ns).items, timeout=10)
    assert entry["lostHeldByPdb"] == [f"{ns}/held"]
    assert entry["lostNotReached"] == [f"{ns}/forgotten"]
    assert entry["lastEvictablePodGoneAt"] is None  # never drained
    assert entry["warnedAt"] <= entry["cordonedAt"] <= entry["firstEvictionAt"] < entry["endedAt"]
    assert entry["noticeEndsAt"] - entry["warnedAt"] == pytest.approx(120.0)
    assert entry["endedAt"] >= entry["noticeEndsAt"] and entry["evictionRequests"] == 2


def test_a_drained_node_has_its_last_pod_gone_time_and_nothing_lost(sim: Environment, core: client.CoreV1Api) -> None:
    """#33.2: a node emptied in time: the last evictable pod's going is recorded and nothing is lost."""
    team = f"t{uuid.uuid4().hex[:6]}"
    ns = f"spot-{team}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    iid, node = _ready_spot_node(sim, core, team)
    _pod(core, ns, "only", node, team, "free")
    sim.spot_interruptions([iid], notice_seconds=30)
    assert _evict(core, ns, "only") == 201
    sim.advance(31)
    entry = wait_for("the notice to run out", lambda: (e := _entry(sim, iid))["endedAt"] is not None and e)
    assert entry["lostHeldByPdb"] == [] and entry["lostNotReached"] == []
    assert entry["firstEvictionAt"] <= entry["lastEvictablePodGoneAt"] < entry["endedAt"]
    assert entry["cordonedAt"] is None  # nobody cordoned it


def test_only_running_spot_instances_are_interrupted(sim: Environment, core: client.CoreV1Api) -> None:
    """#33.1: EC2 warns spot instances only; a bad request names its field."""
    instance = launch(sim, ssm_image(sim, AL2_IMAGE), AL2_USER_DATA.format(team="od"), "m5.large", "us-east-1a")
    with pytest.raises(SimEnvironmentError, match="is not a spot instance"):
        sim.spot_interruptions([instance["InstanceId"]])
    with pytest.raises(SimEnvironmentError, match="noticeSeconds"):
        sim.spot_interruptions([instance["InstanceId"]], notice_seconds=500)
    with pytest.raises(SimEnvironmentError, match="instanceIds"):
        sim.spot_interruptions([])
