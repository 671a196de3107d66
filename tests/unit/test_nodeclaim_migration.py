"""#30.6: the pure decisions of the migration to NodeClaims (scheduling/nodeclaim_migration.py): the NodeClaim a node
nodescale launched before it wrote them gets, once, and the verdict on a NodeClaim a previous Karpenter left.

Karpenter behaviours restated (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/disruption/drift_test.go,
Describe "Drift", Context "NodeRequirement Drift"): Entry "should return drifted if the nodePool node requirement is
updated", Entry "should return drifted if a node requirement set to DoesNotExists" and Entry "should not return
drifted if a node requirement is expanded"; It "should not detect drift if the nodePool does not exist" (no verdict
without a managed pool).
"""

from __future__ import annotations

from typing import Any

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import NodePool
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.scheduling import nodeclaim_manifest as ncm
from nodescale.scheduling import nodeclaim_migration as mig

CLUSTER = "demo"
T0 = "2026-11-27T10:00:00Z"


def pool(*reqs: Requirement, taints: tuple[Taint, ...] = ()) -> NodePool:
    return NodePool(name="default", requirements=Requirements(reqs or [Requirement.create(wk.CAPACITY_TYPE, "In",
                                                                                           ["on-demand"])]),
                    node_class="default", labels={"team": "platform"}, taints=taints)


def node(name: str = "ip-10-0-0-1.ec2.internal", **labels: str) -> ClusterNode:
    return ClusterNode.from_dict({
        "metadata": {"name": name, "labels": {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "us-east-1a", wk.ARCH: "amd64",
                                              wk.CAPACITY_TYPE: "on-demand", wk.NODEPOOL: "default",
                                              "team": "platform", wk.HOSTNAME: name, "unrelated": "x", **labels}},
        "spec": {"providerID": "aws:///us-east-1a/i-0abc"}})


def claim(name: str, *, iid: str = "", ours: bool = False, labels: dict[str, str] | None = None,
          ref: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {wk.NODEPOOL: "default", "team": "platform",
                                                     wk.CAPACITY_TYPE: "on-demand", **(labels or {})}}
    if ours:
        meta["annotations"] = {ncm.OWNER_ANNOTATION: CLUSTER}
    spec: dict[str, Any] = {"nodeClassRef": ref or {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                    "name": "default"}}
    if taints is not None:
        spec["taints"] = taints
    out: dict[str, Any] = {"metadata": meta, "spec": spec}
    if iid:
        out["status"] = {"providerID": f"aws:///us-east-1a/{iid}"}
    return out


# ----------------------------------------------------------------------------------------------- backfill


def test_the_backfilled_name_is_karpenters_form_and_the_same_on_every_pass() -> None:
    """#30.6: ``<pool>-<5 lowercase letters or digits>``, drawn from the instance: a second pass finds it."""
    name = mig.backfill_name("default", "i-0abc")
    assert name == mig.backfill_name("default", "i-0abc") != mig.backfill_name("default", "i-0abd")
    suffix = name.removeprefix("default-")
    assert len(suffix) == 5 and suffix.isalnum() and suffix == suffix.lower()


def test_a_node_gets_a_nodeclaim_only_when_none_names_its_instance() -> None:
    """#30.6: created once; nothing when any NodeClaim (ours or Karpenter's) names the instance; an earlier pass's
    NodeClaim without its status is repaired; a name taken by something else is left to a person."""
    name = mig.backfill_name("default", "i-0abc")
    assert mig.backfill_action(name, "i-0abc", [], CLUSTER) is mig.Backfill.CREATE
    assert mig.backfill_action(name, "i-0abc", [claim("other", iid="i-0abc")], CLUSTER) is mig.Backfill.NONE
    assert mig.backfill_action(name, "i-0abc", [claim(name, ours=True)], CLUSTER) is mig.Backfill.REPAIR
    assert mig.backfill_action(name, "i-0abc", [claim(name, ours=True, iid="i-0zzz")], CLUSTER) is mig.Backfill.CONFLICT
    assert mig.backfill_action(name, "i-0abc", [claim(name)], CLUSTER) is mig.Backfill.CONFLICT


def test_the_backfilled_nodeclaim_is_written_as_nodescale_writes_them() -> None:
    """#30.6: the pool's template narrowed to the node's type, zone and capacity type, the node's well-known labels,
    nodescale's annotation and the termination finalizer."""
    p = pool(taints=(Taint("dedicated", "NoSchedule", "gpu"),))
    obj = mig.backfill_object(p, node(), "m5.large", "us-east-1a", "on-demand", name="default-abcde", cluster=CLUSTER)

    meta = obj["metadata"]
    assert meta["name"] == "default-abcde" and meta["finalizers"] == [wk.TERMINATION_FINALIZER]
    assert meta["annotations"] == {ncm.OWNER_ANNOTATION: CLUSTER}
    assert meta["labels"][wk.INSTANCE_TYPE] == "m5.large" and meta["labels"][wk.ARCH] == "amd64"
    assert meta["labels"]["team"] == "platform" and meta["labels"][wk.NODECLASS] == "default"
    assert "unrelated" not in meta["labels"] and wk.HOSTNAME not in meta["labels"]
    reqs = {r["key"]: r["values"] for r in obj["spec"]["requirements"]}
    assert reqs[wk.INSTANCE_TYPE] == ["m5.large"] and reqs[wk.ZONE] == ["us-east-1a"]
    assert reqs[wk.CAPACITY_TYPE] == ["on-demand"] and reqs[wk.NODEPOOL] == ["default"]
    assert obj["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert obj["spec"]["nodeClassRef"]["name"] == "default"


def test_the_backfilled_status_says_launched_and_registered() -> None:
    """#30.6: providerID, nodeName, capacity; Launched and Registered True, Initialized as the node is."""
    it = InstanceType("m5.large", {wk.INSTANCE_TYPE: "m5.large"}, {"cpu": 2000, "pods": 29}, {},
                      (Offering("us-east-1a", "on-demand", 0.1),))
    status = mig.backfill_status(node(), it, "us-east-1a", "i-0abc", initialized=False, now=T0)
    assert status["providerID"] == "aws:///us-east-1a/i-0abc" and status["nodeName"] == "ip-10-0-0-1.ec2.internal"
    assert status["capacity"]["cpu"] == "2"
    found = {c["type"]: c["status"] for c in status["conditions"]}
    assert found == {"Launched": "True", "Registered": "True", "Initialized": "Unknown", "Ready": "Unknown"}
    done = mig.backfill_status(node(), None, "us-east-1a", "i-0abc", initialized=True, now=T0)
    assert all(c["status"] == "True" for c in done["conditions"]) and "capacity" not in done
    assert ncm.registered({"status": done})  # never within the registration TTL's reach


# ----------------------------------------------------------------------------------------------- adoption


def test_a_compatible_karpenter_nodeclaim_of_a_managed_pool_is_adopted() -> None:
    """#30.6: launched, no nodescale annotation, its pool managed, its node class and labels the pool's."""
    verdict = mig.adoption(claim("default-k1", iid="i-0k1"), {"default": pool()}, {"default"}, CLUSTER)
    assert verdict == mig.Verdict("default-k1", "default", adopt=True)


def test_only_karpenters_launched_nodeclaims_of_managed_pools_are_candidates() -> None:
    """#30.6 (and drift_test.go It "should not detect drift if the nodePool does not exist"): ours, one being
    deleted, one never launched or of a pool nodescale does not manage get no verdict at all."""
    pools = {"default": pool()}
    deleting = claim("default-k2", iid="i-0k2")
    deleting["metadata"]["deletionTimestamp"] = T0
    other_pool = claim("other-k3", iid="i-0k3", labels={wk.NODEPOOL: "other"})
    for c in (claim("default-n1", iid="i-0n1", ours=True), deleting, claim("default-k4"), other_pool):
        assert mig.adoption(c, pools, {"default"}, CLUSTER) is None


def test_an_incompatible_karpenter_nodeclaim_is_left_alone_with_why() -> None:
    """#30.6, drift_test.go Context "NodeRequirement Drift": Entry "should return drifted if the nodePool node
    requirement is updated" (on-demand -> spot) and Entry "should return drifted if a node requirement set to
    DoesNotExists"; another node class, a node class nodescale lacks, a missing pool label or taint likewise."""
    spot = pool(Requirement.create(wk.CAPACITY_TYPE, "In", ["spot"]))
    cases = [
        (claim("a", iid="i-1"), {"default": spot}, {"default"}, "requirements"),
        (claim("b", iid="i-2"), {"default": pool(Requirement.create(wk.CAPACITY_TYPE, "DoesNotExist", []))},
         {"default"}, "requirements"),
        (claim("c", iid="i-3", ref={"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}),
         {"default": pool()}, {"default", "gpu"}, "nodeClassRef"),
        (claim("d", iid="i-4"), {"default": pool()}, set(), "not one nodescale has"),
        (claim("e", iid="i-5", labels={"team": "data"}), {"default": pool()}, {"default"}, "label team"),
        (claim("f", iid="i-6", taints=[]), {"default": pool(taints=(Taint("dedicated", "NoSchedule", "gpu"),))},
         {"default"}, "taint"),
    ]
    for c, pools, classes, why in cases:
        verdict = mig.adoption(c, pools, classes, CLUSTER)
        assert verdict is not None and not verdict.adopt and why in verdict.reason, (c["metadata"]["name"], verdict)


def test_an_expanded_requirement_does_not_stop_adoption() -> None:
    """#30.6, drift_test.go Entry "should not return drifted if a node requirement is expanded": a pool that now
    allows more than the NodeClaim has still takes it."""
    wider = pool(Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand", "spot"]),
                 Requirement.create(wk.OS, "In", ["linux", "windows"]))
    verdict = mig.adoption(claim("default-k5", iid="i-0k5", labels={wk.OS: "linux"}), {"default": wider},
                           {"default"}, CLUSTER)
    assert verdict is not None and verdict.adopt


def test_only_an_instance_karpenter_launched_for_this_cluster_and_pool_is_tagged() -> None:
    """#30.6: Karpenter's ownership tag for this cluster, the NodeClaim's pool, and its NodeClaim when named."""
    tags = {"kubernetes.io/cluster/demo": "owned", wk.NODEPOOL: "default", "karpenter.sh/nodeclaim": "default-k1"}
    assert mig.karpenter_instance(tags, CLUSTER, "default", "default-k1") is None
    assert mig.karpenter_instance({**tags, "karpenter.sh/nodeclaim": "x"}, CLUSTER, "default", "default-k1")
    assert mig.karpenter_instance(tags, "other", "default", "default-k1")
    assert mig.karpenter_instance({**tags, wk.NODEPOOL: "gpu"}, CLUSTER, "default", "default-k1")
    assert mig.karpenter_instance({}, CLUSTER, "default", "default-k1")
