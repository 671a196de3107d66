"""Acceptance (#15): a capacity reservation is used before spot, on sim.

Restates Karpenter's reserved capacity (karpenter-provider-aws docs, "NodeClasses: spec.capacityReservationSelectorTerms"
and "NodePools: reserved capacity type"; kubernetes-sigs/karpenter scheduling suite_test.go, Context "Reserved
Capacity", "should correctly track multiple reservations for the same instance pool"): a NodePool allowing
`reserved` and `spot` launches into the reservations its EC2NodeClass selects first, its nodes are labelled
`karpenter.sh/capacity-type: reserved` with the reservation's id and type, and once the reservation is full the
next node is spot; the count comes from DescribeCapacityReservations every run.
"""

from __future__ import annotations

import time
import uuid

import pytest

from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import node_of, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("reserved")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

ZONE = "us-east-1a"
POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: reserved-first
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: reserved-first}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["reserved", "spot"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: reserved-first
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-demo-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  capacityReservationSelectorTerms: [{tags: {team: TEAM}}]
"""


def _pod(ns: str, name: str) -> dict:
    # 1.5 CPU: one pod per m5.large (2 vCPU), so each pod is one node.
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1500m"}}}]}}


def _pending(sim: Environment, ns: str, count: int) -> None:
    wait_for(f"{count} unschedulable pods", lambda: len([p for p in pods(sim, ns) if is_provisionable(p)]) >= count)


def _available(sim: Environment, rid: str) -> int:
    found = sim.boto3_client("ec2").describe_capacity_reservations(CapacityReservationIds=[rid])
    return int(found["CapacityReservations"][0]["AvailableInstanceCount"])


def test_a_capacity_reservation_is_used_before_spot(sim: Environment, rt: Runtime, ns: str) -> None:
    # A letter first: an all-digit hex string is a YAML integer, which a tag selector refuses.
    team = f"t{uuid.uuid4().hex[:8]}"
    ec2 = sim.boto3_client("ec2")
    rid = ec2.create_capacity_reservation(
        InstanceType="m5.large", InstancePlatform="Linux/UNIX", AvailabilityZone=ZONE, InstanceCount=2,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": team}]}],
    )["CapacityReservation"]["CapacityReservationId"]
    try:
        put_pool(sim, POOL.replace("TEAM", team), "reserved-first")
        api = sim.kube_api_client()
        for i in range(3):
            request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, f"p{i}"))
        _pending(sim, ns, 3)

        # #31.5: with Karpenter's ReservedCapacity gate off (on by default) no reservation is offered.
        off = provisioning.provision_once(helpers.runtime_for(sim, feature_gates=FeatureGates(reserved_capacity=False)),
                                          dry_run=True)
        assert off.planned and all("reserved" not in x.capacity_type.split(",") for x in off.planned), off
        first = provisioning.provision_once(rt)

        launches = first.launches
        assert len(launches) == 3 and not first.unschedulable, first
        # Two into the reservation (all it has), the third spot: the plan does not count on a third.
        assert sorted(x.capacity_type for x in launches) == ["reserved", "reserved", "spot"]
        assert _available(sim, rid) == 0
        for launch in launches:
            node_of(sim, launch.instance_id)  # registered with what its kubelet may set
        synced = provisioning.provision_once(helpers.runtime_for(sim))  # syncs the rest, launches nothing
        assert synced.launches == []
        for launch in launches:
            labels = node_of(sim, launch.instance_id)["metadata"]["labels"]
            assert labels["karpenter.sh/capacity-type"] == launch.capacity_type
            if launch.capacity_type == "reserved":
                assert launch.zone == ZONE
                assert labels["karpenter.k8s.aws/capacity-reservation-id"] == rid
                assert labels["karpenter.k8s.aws/capacity-reservation-type"] == "default"
                instance = ec2.describe_instances(InstanceIds=[launch.instance_id])["Reservations"][0]["Instances"][0]
                assert instance["CapacityReservationId"] == rid
            else:
                assert "karpenter.k8s.aws/capacity-reservation-id" not in labels

        # The next run reads the reservation again: full, so the next node is spot.
        request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p3"))
        _pending(sim, ns, 1)
        second = provisioning.provision_once(rt)
        assert [x.capacity_type for x in second.launches] == ["spot"]

        # A reserved node going away gives its place back, and the next node takes it again.
        reserved = [x.instance_id for x in launches if x.capacity_type == "reserved"]
        ec2.terminate_instances(InstanceIds=reserved[:1])
        assert _available(sim, rid) == 1
        request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p4"))
        _pending(sim, ns, 1)
        for _ in range(5):  # the pod cache may see the new pod a pass later (podcache.py)
            third = provisioning.provision_once(rt)
            if third.launches or third.unschedulable:
                break
            time.sleep(0.5)
        assert [x.capacity_type for x in third.launches] == ["reserved"], third
        assert _available(sim, rid) == 0
    finally:
        ec2.cancel_capacity_reservation(CapacityReservationId=rid)


BLOCK_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: block
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: block}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.xlarge"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["reserved", "on-demand"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: block
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-demo-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  capacityReservationSelectorTerms: [{tags: {block: TEAM}}]
"""


def test_a_capacity_block_node_is_replaced_40_minutes_before_the_block_ends(sim: Environment, ns: str) -> None:
    # karpenter-provider-aws controllers/capacityreservation/expiration: "should delete nodeclaims associated with
    # expiring capacity-block reservations" (40 minutes before the block's end).
    from datetime import UTC, datetime, timedelta

    from nodescale.usecases.disrupt import run as disrupting

    def runtime() -> Runtime:
        # moto stamps launch times with the real clock while the simulated one moves ahead.
        return helpers.runtime_for(sim, registration_timeout_seconds=10.0**6)

    # A letter first: an all-digit hex string is a YAML integer, which a tag selector refuses.
    team = f"t{uuid.uuid4().hex[:8]}"
    end = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
    rid = sim.create_capacity_block("m5.xlarge", ZONE, 1, end, tags={"block": team})
    put_pool(sim, BLOCK_POOL.replace("TEAM", team), "block")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods",
                 body={"metadata": {"name": "trainer", "namespace": ns},
                       "spec": {"containers": [{"name": "c", "image": "pause",
                                                "resources": {"requests": {"cpu": "3"}}}]}})
    _pending(sim, ns, 1)

    [launch] = provisioning.provision_once(runtime()).launches
    assert launch.capacity_type == "reserved"
    ec2 = sim.boto3_client("ec2")
    instance = ec2.describe_instances(InstanceIds=[launch.instance_id])["Reservations"][0]["Instances"][0]
    assert instance["CapacityReservationId"] == rid and instance["InstanceLifecycle"] == "capacity-block"
    node_of(sim, launch.instance_id)
    provisioning.provision_once(runtime())  # syncs the labels
    labels = node_of(sim, launch.instance_id)["metadata"]["labels"]
    assert labels["karpenter.k8s.aws/capacity-reservation-type"] == "capacity-block"
    wait_for("the pod running", lambda: [p for p in pods(sim, ns) if p["status"].get("phase") == "Running"])

    before = disrupting.disrupt_once(runtime())
    assert [d for d in before["decisions"] if d["reason"] == "CapacityBlockExpiring"] == []

    # 2h25m later (simulated), 35 minutes before the end: inside the 40-minute window.
    now = datetime.fromisoformat(sim.clock()["now"].replace("Z", "+00:00"))
    sim.advance((end - timedelta(minutes=35) - now).total_seconds())
    after = disrupting.disrupt_once(runtime())
    [decision] = [d for d in after["decisions"] if d["reason"] == "CapacityBlockExpiring"]
    assert decision["action"] == "replace" and rid in decision["detail"]
    [replacement] = decision["replacementInstances"]
    replaced = ec2.describe_instances(InstanceIds=[replacement])["Reservations"][0]["Instances"][0]
    # The block offers nothing any more: the replacement is on-demand, outside it.
    assert "CapacityReservationId" not in replaced and "InstanceLifecycle" not in replaced
