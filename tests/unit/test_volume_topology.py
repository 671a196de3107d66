"""Volume topology (#31.1): a pod's persistent volumes add requirements to where it may run, in the solver, in
``explain`` and in consolidation, as Karpenter's volume topology does.

Upstream: kubernetes-sigs/karpenter pkg/controllers/provisioning/suite_test.go, Context "Volume Topology
Requirements"; pkg/controllers/provisioning/scheduling/volumetopology.go. Every test here fails on the code
before #31.1 (no volume requirements: the pod got any zone, or was planned for with a missing claim).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodescale.disruption.nodes import NodeView
from nodescale.disruption.simulator import bin_packing_simulator
from nodescale.model import labels as wk
from nodescale.model.node import ClusterNode
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirements
from nodescale.scheduling.volumetopology import (
    BIND_COMPLETED,
    VolumeObjects,
    VolumeTopologyError,
    volume_requirements,
)
from nodescale.usecases.world_sources import with_volume_topology
from tests.builders import TYPES, existing_node, plan_for
from tests.builders import scheduling_pool as pool


def raw_pod(name: str = "db-0", claims: tuple[str, ...] = ("data",), node: str = "",
            ephemeral: tuple[str, ...] = (), affinity: dict | None = None) -> dict[str, Any]:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                            "volumes": volumes}
    if node:
        spec["nodeName"] = node
    if affinity:
        spec["affinity"] = affinity
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def claim(name: str, volume: str = "", storage_class: str | None = "gp3", bound: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    annotations = {BIND_COMPLETED: "yes"} if volume and bound else {}
    return {"metadata": {"name": name, "namespace": "default", "annotations": annotations}, "spec": spec}


def zonal_volume(name: str, zone: str, key: str = wk.ZONE, **spec: Any) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    return {"metadata": {"name": name},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}, **spec}}


def storage_class(name: str = "gp3", mode: str = "WaitForFirstConsumer", zones: tuple[str, ...] = ()) -> dict:
    sc: dict[str, Any] = {"metadata": {"name": name}, "volumeBindingMode": mode, "provisioner": "ebs.csi.aws.com"}
    if zones:
        sc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": wk.EBS_CSI_ZONE, "values": list(zones)}]}]
    return sc


def objects(claims: list[dict] = (), volumes: list[dict] = (), classes: list[dict] = ()) -> VolumeObjects:  # type: ignore[assignment]
    return VolumeObjects(claims={("default", c["metadata"]["name"]): c for c in claims},
                         volumes={v["metadata"]["name"]: v for v in volumes},
                         classes={c["metadata"]["name"]: c for c in classes})


def zones_of(reqs: Requirements) -> set[str]:
    return set(reqs.get(wk.ZONE).values)


# ------------------------------------------------------------------------------------------- the core function


def test_a_bound_volume_pins_the_pod_to_its_zone() -> None:
    """#31.1; upstream It "should schedule to volume zones if volume already bound"."""
    reqs = volume_requirements(raw_pod(), objects([claim("data", "pv-1")], [zonal_volume("pv-1", "zone-b")]))
    assert zones_of(reqs) == {"zone-b"}


def test_the_ebs_csi_zone_key_is_the_zone() -> None:
    """#31.1: karpenter-provider-aws adds topology.ebs.csi.aws.com/zone to NormalizedLabels as the zone key."""
    reqs = volume_requirements(raw_pod(), objects([claim("data", "pv-1")],
                                                  [zonal_volume("pv-1", "zone-c", key=wk.EBS_CSI_ZONE)]))
    assert zones_of(reqs) == {"zone-c"} and wk.EBS_CSI_ZONE not in dict(reqs.items())


def test_an_unbound_wait_for_first_consumer_claim_takes_its_class_allowed_topologies() -> None:
    """#31.1; upstream It "should schedule to storage class zones if volume does not exist"."""
    reqs = volume_requirements(raw_pod(), objects([claim("data")], classes=[storage_class(zones=("zone-a", "zone-c"))]))
    assert zones_of(reqs) == {"zone-a", "zone-c"}


def test_an_ephemeral_volume_names_its_generated_claim_until_the_pod_is_bound() -> None:
    """#31.1; upstream Its "should schedule to storage class zones if volume does not exist (ephemeral volume)"
    and volumetopology.go's skip of a bound pod's ephemeral volumes (it gets a new claim where it moves)."""
    objs = objects([claim("web-0-scratch", "pv-e")], [zonal_volume("pv-e", "zone-a")])
    assert zones_of(volume_requirements(raw_pod("web-0", (), ephemeral=("scratch",)), objs)) == {"zone-a"}
    bound = raw_pod("web-0", (), node="n1", ephemeral=("scratch",))
    assert volume_requirements(bound, objs) == Requirements()


def test_a_local_volume_drops_its_hostname_but_a_csi_volume_keeps_it() -> None:
    """#31.1; upstream Its "should ignore hostname affinity when using local volumes" (DescribeTable entries)
    and "should not ignore hostname affinity when using non-local path volumes"."""
    def with_host(**spec: Any) -> dict:
        pv = zonal_volume("pv-1", "zone-a", **spec)
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"].append(
            {"key": wk.HOSTNAME, "operator": "In", "values": ["old-node"]})
        return pv

    local = volume_requirements(raw_pod(), objects([claim("data", "pv-1")], [with_host(local={"path": "/mnt"})]))
    csi = volume_requirements(raw_pod(), objects([claim("data", "pv-1")], [with_host(csi={"driver": "x"})]))
    assert wk.HOSTNAME not in dict(local.items()) and zones_of(local) == {"zone-a"}
    assert set(csi.get(wk.HOSTNAME).values) == {"old-node"}


@pytest.mark.parametrize(("objs", "words"), [
    (objects(), "persistentvolumeclaim default/data not found"),
    (objects([claim("data", "pv-gone")]), "persistentvolume pv-gone not found"),
    (objects([claim("data", "pv-1", bound=False)], [zonal_volume("pv-1", "zone-a")]), BIND_COMPLETED),
    (objects([claim("data", storage_class="")]), "names no storageClassName"),
    (objects([claim("data", storage_class="missing")]), "storageclass missing not found"),
    (objects([claim("data")], classes=[storage_class(mode="Immediate")]), "binds Immediate"),
])
def test_a_pending_pod_whose_claim_cannot_be_honoured_is_refused_with_the_reason(objs: VolumeObjects,
                                                                                 words: str) -> None:
    """#31.1; upstream Its "should not schedule if invalid pvc", "should not schedule with an empty storage
    class if the pvc is not bound", "should not schedule with a missing storage class if the pvc is not bound",
    "should schedule valid pods when a pod with an invalid pvc is encountered (volume name)"."""
    with pytest.raises(VolumeTopologyError, match=words.replace(".", r"\.")):
        volume_requirements(raw_pod(), objs)


def test_a_bound_claim_needs_no_storage_class() -> None:
    """#31.1; upstream It "should schedule with a missing storage class if the pvc is bound"."""
    objs = objects([claim("data", "pv-1", storage_class="missing")], [zonal_volume("pv-1", "zone-b")])
    assert zones_of(volume_requirements(raw_pod(), objs)) == {"zone-b"}


def test_refused_pods_leave_the_others_planned_and_bound_pods_are_never_refused() -> None:
    """#31.1; upstream It "should schedule valid pods when a pod with an invalid pvc is encountered (pvc)"."""
    bad, good = Pod.from_dict(raw_pod("bad")), Pod.from_dict(raw_pod("good", ()))
    running = Pod.from_dict(raw_pod("running", node="n1"))
    kept, refused = with_volume_topology({"n1": [running]}, [bad, good], objects([claim("other")]))
    assert [p.name for p in kept] == ["good"]
    assert refused == [("default/bad", "persistentvolumeclaim default/data not found")]


# ------------------------------------------------------------------------------------------- solver, consolidation


def _with_volume(raw: dict, objs: VolumeObjects) -> Pod:
    pod = Pod.from_dict(raw)
    pod.volume_requirements = volume_requirements(raw, objs)
    return pod


def test_the_solver_launches_in_the_volume_zone_and_not_outside_the_pods_own_affinity() -> None:
    """#31.1; upstream Its "should schedule to volume zones if volume already bound", "should not schedule if
    volume zones are incompatible"."""
    objs = objects([claim("data", "pv-1")], [zonal_volume("pv-1", "zone-b", key=wk.EBS_CSI_ZONE)])
    plan = plan_for([_with_volume(raw_pod(), objs)])
    assert [c.zones for c in plan.node_claims] == [["zone-b"]]
    elsewhere = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["zone-a"]}]}]}}}
    plan = plan_for([_with_volume(raw_pod(affinity=elsewhere), objs)])
    assert not plan.node_claims and len(plan.unschedulable) == 1


def test_the_volume_zone_holds_in_every_required_term_and_is_never_relaxed_away() -> None:
    """#31.1; upstream It "should not relax an added volume topology zone node-selector away"."""
    terms = [{"matchExpressions": [{"key": "example.com/label", "operator": "In", "values": ["unsupported"]}]},
             {"matchExpressions": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    objs = objects([claim("data", "pv-1")], [zonal_volume("pv-1", "zone-c")])
    plan = plan_for([_with_volume(raw_pod(affinity=affinity), objs)])
    assert [c.zones for c in plan.node_claims] == [["zone-c"]]


def test_pods_of_one_template_with_volumes_in_different_zones_are_not_grouped_together() -> None:
    """#31.1: replicas of a StatefulSet differ in their volume's zone; each gets a node in its own."""
    objs = objects([claim("data-0", "pv-0"), claim("data-1", "pv-1")],
                   [zonal_volume("pv-0", "zone-a"), zonal_volume("pv-1", "zone-c")])
    first = _with_volume(raw_pod("db-0", ("data-0",)), objs)
    second = replace(first, name="db-1", volume_requirements=volume_requirements(raw_pod("db-1", ("data-1",)), objs))
    plan = plan_for([first, second])
    assert sorted(z for c in plan.node_claims for z in c.zones) == ["zone-a", "zone-c"]


def test_consolidation_never_moves_a_pod_out_of_its_volume_zone() -> None:
    """#31.1: a pod bound to a zonal volume, on a node in zone-b, is not moved onto the emptier node of zone-a
    (its deletion would need a new node in zone-b); a pod without a volume is."""
    objs = objects([claim("data", "pv-1")], [zonal_volume("pv-1", "zone-b")])
    pinned = _with_volume(raw_pod("db-0", node="b1"), objs)
    free = Pod.from_dict(raw_pod("web-0", (), node="b1"))
    existing = [existing_node("a1", cpu=16, zone="zone-a"), existing_node("b1", cpu=4, zone="zone-b")]
    simulate = bin_packing_simulator(existing, [pool()], {"default": TYPES})
    node_b = ClusterNode.from_dict({"metadata": {"name": "b1", "labels": {wk.ZONE: "zone-b"}}})

    assert not simulate([NodeView.from_node(node_b, [free], 0.4)]).replacements
    moved = simulate([NodeView.from_node(node_b, [pinned], 0.4)])
    [replacement] = moved.replacements
    assert not moved.unschedulable
    assert replacement.claim.zones == ["zone-b"]
