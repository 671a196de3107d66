"""sim's kubelet registers the EBS CSI driver's CSINode for every node it creates, with the driver's attachment
limit, and the CSINode goes with its Node (#31.2). The limit restates kubernetes-sigs/aws-ebs-csi-driver
pkg/driver/node.go getVolumesLimit (node_test.go TestGetVolumesLimit cases: a Nitro type's 28 shared slots less
ENIs and NVMe instance stores, a Xen type's 39, less the mapped devices and the root volume)."""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sim.environment import Environment
from sim.nodes.csinode import ebs_attach_limit
from tests.integration.helpers import wait_for
from tests.sim.test_sim_env_nodes import AL2_USER_DATA, launch, ssm_image

NITRO = {"Hypervisor": "nitro"}
NITRO_ONE_NVME = {"Hypervisor": "nitro", "InstanceStorageInfo": {"NvmeSupport": "required",
                                                                  "Disks": [{"Count": 1, "SizeInGB": 50}]}}
NITRO_TWO_NVME = {"Hypervisor": "nitro", "InstanceStorageInfo": {"NvmeSupport": "required",
                                                                  "Disks": [{"Count": 2, "SizeInGB": 900}]}}
XEN_STORE = {"Hypervisor": "xen", "InstanceStorageInfo": {"NvmeSupport": "unsupported",
                                                          "Disks": [{"Count": 2, "SizeInGB": 40}]}}


@pytest.mark.parametrize(("itype", "enis", "mapped", "limit"), [
    (NITRO, 1, 0, 26),            # 28 - 1 ENI - root
    (NITRO, 3, 0, 24),            # every attached ENI takes a slot
    (NITRO_ONE_NVME, 1, 0, 25),   # so does each NVMe instance-store disk
    (NITRO_TWO_NVME, 1, 1, 23),   # and each device mapped at launch besides the root
    ({"Hypervisor": "xen"}, 2, 0, 38),  # Xen: 39 EBS slots of its own, less the root
    (XEN_STORE, 1, 0, 38),        # a Xen type's (non-NVMe) instance store shares nothing
    (NITRO, 30, 0, 1),            # never below 1
])
def test_the_ebs_attachment_limit_follows_the_drivers_rule(itype: dict, enis: int, mapped: int, limit: int) -> None:
    """#31.2: the count the EBS CSI driver reports (aws-ebs-csi-driver getVolumesLimit)."""
    assert ebs_attach_limit(itype, enis, mapped) == limit


@pytest.fixture(scope="module")
def storage(sim_env: Environment) -> client.StorageV1Api:
    return client.StorageV1Api(sim_env.kube_api_client())


def _csinode(storage: client.StorageV1Api, name: str) -> client.V1CSINode | None:
    try:
        return storage.read_csi_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


@pytest.mark.integration
@pytest.mark.parametrize(("instance_type", "limit"), [("m5.large", 26), ("c5d.large", 25)])
def test_a_joining_node_registers_its_csinode_which_goes_with_the_node(
    sim: Environment, storage: client.StorageV1Api, instance_type: str, limit: int,
) -> None:
    """#31.2: the kubelet's CSINode names the node, is owned by it, carries the EBS driver with the instance id,
    its zone key and the attachment limit of the type; terminating the instance deletes both."""
    image = ssm_image(sim, "/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")
    instance = launch(sim, image, AL2_USER_DATA.format(team=f"t{uuid.uuid4().hex[:6]}"), instance_type,
                      "us-east-1b")
    name = instance["PrivateDnsName"]
    csinode = wait_for("the csinode to register", lambda: _csinode(storage, name), timeout=10)
    node = client.CoreV1Api(storage.api_client).read_node(name)
    owner = csinode.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid) == ("Node", name, node.metadata.uid)
    [driver] = csinode.spec.drivers
    assert (driver.name, driver.node_id) == ("ebs.csi.aws.com", instance["InstanceId"])
    assert driver.topology_keys == ["topology.ebs.csi.aws.com/zone"]
    assert driver.allocatable.count == limit

    sim.boto3_client("ec2").terminate_instances(InstanceIds=[instance["InstanceId"]])
    wait_for("the csinode to go with its node", lambda: _csinode(storage, name) is None, timeout=15)
