"""Per-node volume attachment limits (#31.1), as Karpenter counts them: kubernetes-sigs/karpenter
pkg/scheduling/volumeusage.go (VolumeUsage.ExceedsLimits: the union of the node's claims and the pod's, per CSI
driver, within the CSINode's allocatable count) and the scheduler's ExistingNode.CanAdd; e2e restated:
aws/karpenter-provider-aws test/suites/storage/suite_test.go It "should run a pod with a dynamic persistent
volume while respecting volume limits" (EBS limit 1, two pods with their own claims: two nodes). Each test fails
on the code before: nothing counted volumes, so the full node took the pod."""

from __future__ import annotations

from typing import Any

from nodescale.model.pod import Pod
from nodescale.scheduling.volumetopology import VolumeObjects
from nodescale.scheduling.volumeusage import EBS_DRIVER, VolumeUsage, csinode_limits, pod_volumes
from tests.builders import existing_node, plan_for
from tests.unit.test_volume_topology import claim, objects, raw_pod, storage_class


def _pv(name: str, driver: str | None = EBS_DRIVER) -> dict[str, Any]:
    spec = {"csi": {"driver": driver, "volumeHandle": f"vol-{name}"}} if driver else {
        "awsElasticBlockStore": {"volumeID": f"vol-{name}"}}
    return {"metadata": {"name": name}, "spec": spec}


def _objs() -> VolumeObjects:
    intree = storage_class("intree")
    intree["provisioner"] = "kubernetes.io/aws-ebs"
    efs = storage_class("efs")
    efs["provisioner"] = "efs.csi.aws.com"
    return objects([claim("a", "pv-a"), claim("b", "pv-b"), claim("c", "pv-c"), claim("new"),
                    claim("old", storage_class="intree"), claim("shared", storage_class="efs")],
                   [_pv("pv-a"), _pv("pv-b"), _pv("pv-c", None)], [storage_class(), intree, efs])


def _pod(name: str, claims: tuple[str, ...], objs: VolumeObjects, node: str = "") -> Pod:
    pod = Pod.from_dict(raw_pod(name, claims, node=node))
    pod.volumes = pod_volumes(pod.raw, objs)
    return pod


def test_a_pods_claims_count_against_the_pv_driver_else_the_class_provisioner() -> None:
    """#31.1: a bound claim counts against its PV's CSI driver (an in-tree EBS volume: the EBS driver); an unbound
    one against its StorageClass's provisioner (kubernetes.io/aws-ebs migrated to the EBS driver)."""
    objs = _objs()
    assert pod_volumes(raw_pod("p", ("a", "c", "new", "old", "shared", "missing")), objs) == (
        ("ebs.csi.aws.com", "default/a"), ("ebs.csi.aws.com", "default/c"), ("ebs.csi.aws.com", "default/new"),
        ("ebs.csi.aws.com", "default/old"), ("efs.csi.aws.com", "default/shared"))


def test_csinode_counts_per_driver() -> None:
    """#31.1: a CSINode's allocatable count per driver; a driver without one, and a node without any, no limit."""
    csinodes = [{"metadata": {"name": "n1"}, "spec": {"drivers": [
                    {"name": EBS_DRIVER, "nodeID": "i-1", "allocatable": {"count": 25}},
                    {"name": "efs.csi.aws.com", "nodeID": "i-1"}]}},
                {"metadata": {"name": "n2"}, "spec": {"drivers": [{"name": "efs.csi.aws.com", "nodeID": "i-2"}]}}]
    assert csinode_limits(csinodes) == {"n1": {EBS_DRIVER: 25}}


def test_the_union_of_the_nodes_claims_and_the_pods_stays_within_the_count() -> None:
    """#31.1: volumeusage.go ExceedsLimits: claims already on the node cost nothing again; a new one past the count
    is refused; another driver's claims count against that driver only."""
    objs = _objs()
    usage = VolumeUsage({EBS_DRIVER: 2}, [_pod("on", ("a",), objs, node="n1")])
    assert not usage.exceeds(_pod("same", ("a",), objs).volumes)
    assert not usage.exceeds(_pod("one-more", ("b",), objs).volumes)
    assert usage.exceeds(_pod("two-more", ("b", "new"), objs).volumes)
    assert not usage.exceeds(_pod("efs", ("shared",), objs).volumes)
    assert usage.take([_pod("x", ("b",), objs), _pod("y", ("new",), objs), _pod("z", ("a",), objs)]) == 1


def test_a_node_at_its_volume_limit_gets_no_further_volume_pod_a_new_node_is_launched() -> None:
    """#31.1: an existing node with room for cpu but at its EBS count (1, used by its pod) is passed over for a pod
    with another claim: a node is launched for it; without the CSINode count the node takes it (Karpenter: no
    limit known); a pod without volumes still goes on the node, as before."""
    objs = _objs()
    bound = _pod("on", ("a",), objs, node="n1")
    limited = existing_node("n1", pods=[bound], volume_limits={EBS_DRIVER: 1})
    plan = plan_for([_pod("db", ("b",), objs)], existing_nodes=[limited])
    assert not plan.existing and len(plan.node_claims) == 1
    unlimited = existing_node("n1", pods=[bound])
    plan = plan_for([_pod("db", ("b",), objs)], existing_nodes=[unlimited])
    assert [p.node for p in plan.existing] == ["n1"] and not plan.node_claims
    plan = plan_for([Pod.from_dict(raw_pod("web", ()))], existing_nodes=[limited])
    assert [p.node for p in plan.existing] == ["n1"] and not plan.node_claims


def test_replicas_with_their_own_claims_share_a_limited_node_only_up_to_its_count() -> None:
    """#31.1: two pods of one template, each with its own claim, and an empty node with an EBS count of 1: one goes
    there, a node is launched for the other (the e2e It named in the module docstring)."""
    objs = _objs()
    node = existing_node("n1", volume_limits={EBS_DRIVER: 1})
    plan = plan_for([_pod("db-0", ("a",), objs), _pod("db-1", ("b",), objs)], existing_nodes=[node])
    assert len(plan.existing) == 1 and len(plan.node_claims) == 1
