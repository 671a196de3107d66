"""#31.5: with ``instanceStorePolicy: RAID0`` a node's ephemeral storage is its instance store, and the
planner sees it (aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``, ``ephemeralStorage``)."""

from __future__ import annotations

from nodescale.aws.catalog import bundled_catalog
from nodescale.aws.pricing import ebs_prices
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.nodepool import NodeClass, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.pooltypes import pool_types
from nodescale.scheduling.scheduler import solve

GIB = 2**30
POOL = NodePool(name="default", node_class="default", requirements=Requirements([
    Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"]),
    Requirement.create(wk.OS, "In", ["linux"]),
]))


def types_for(node_class: NodeClass) -> dict:
    types = pool_types([POOL], {"default": node_class}, bundled_catalog("us-east-1"), ebs_prices("us-east-1"))[0]
    return {t.name: t for t in types[POOL.name]}


def storage_pod(request: str) -> Pod:
    return Pod.from_dict({"metadata": {"name": "big-scratch", "namespace": "default"},
                          "spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": request}}}]}})


def test_raid0_makes_the_instance_store_the_nodes_ephemeral_storage() -> None:
    """#31.5. Restates aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go, It "should pack
    pods if the pod's ephemeral-storage exceeds node capacity and instance storage is mounted": under RAID0
    an m6idn.32xlarge has 7600G of ephemeral storage (its 7600 GB instance store), and a pod asking for
    5000Gi gets a node, every type of its claim having that room; without RAID0 (20Gi root volume) none."""
    raid0 = types_for(NodeClass("default", "AL2023", instance_store_policy="RAID0"))
    assert raid0["m6idn.32xlarge"].capacity[res.EPHEMERAL_STORAGE] == 7600 * 10**9
    plan = solve([storage_pod("5000Gi")], [POOL], {POOL.name: list(raid0.values())})
    assert not plan.unschedulable and len(plan.node_claims) == 1
    for name in plan.node_claims[0].instance_types:
        assert raid0[name].allocatable[res.EPHEMERAL_STORAGE] >= 5000 * GIB, name
    plain = types_for(NodeClass("default", "AL2023"))
    assert plain["m6idn.32xlarge"].capacity[res.EPHEMERAL_STORAGE] == 20 * GIB
    assert solve([storage_pod("5000Gi")], [POOL], {POOL.name: list(plain.values())}).unschedulable


def test_raid0_keeps_the_root_volume_on_a_type_without_an_instance_store() -> None:
    """#31.5. As the provider's ephemeralStorage: RAID0 counts only where the type has an instance store;
    m5.large keeps its root volume (here the node class's 80Gi), and the eviction threshold follows the
    storage the node has."""
    mappings = ({"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 80}},)
    raid0 = types_for(NodeClass("default", "AL2023", instance_store_policy="RAID0", block_device_mappings=mappings))
    assert raid0["m5.large"].capacity[res.EPHEMERAL_STORAGE] == 80 * GIB
    plain = types_for(NodeClass("default", "AL2023", block_device_mappings=mappings))
    nvme = "m5d.large"
    assert raid0[nvme].capacity[res.EPHEMERAL_STORAGE] == 75 * 10**9
    assert plain[nvme].capacity[res.EPHEMERAL_STORAGE] == 80 * GIB
    assert raid0[nvme].overhead[res.EPHEMERAL_STORAGE] < plain[nvme].overhead[res.EPHEMERAL_STORAGE]
