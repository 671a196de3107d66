"""#30.1: the karpenter.sh/v1 NodeClaim a planned node becomes (scheduling/nodeclaim_manifest.py), pure.

Restates kubernetes-sigs/karpenter:
- pkg/controllers/provisioning/scheduling/nodeclaim.go + pkg/apis/v1/nodeclaim.go (NodeClaimTemplate.ToNodeClaim):
  the NodeClaim carries the pool template's labels and annotations, the nodepool label and requirement, the
  instance types it may launch as an In requirement, the pods' requests, the pool's taints, startup taints,
  nodeClassRef, expireAfter and terminationGracePeriod, and the termination finalizer; its NodePool owns it;
- pkg/controllers/nodeclaim/lifecycle/launch_test.go "should add the Launched status condition after creating the
  NodeClaim" and operatorpkg's condition shape (type, status, reason, message, lastTransitionTime,
  observedGeneration), the root Ready condition True only once Launched, Registered and Initialized are;
- pkg/controllers/nodeclaim/lifecycle/liveness_test.go (the registration TTL), each test naming its Entry/It.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import Disruption, NodePool
from nodescale.model.nodepool_hash import hash_annotations
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.model.timestamps import parse_timestamp
from nodescale.scheduling import nodeclaim_manifest as ncm
from nodescale.scheduling.scheduler import solve

GIB = 2**30
ZONES = ("us-east-1a", "us-east-1b")
T0, T1 = "2026-11-27T10:00:00Z", "2026-11-27T10:05:00Z"


def itype(name: str, cpu: int, price: float) -> InstanceType:
    offerings = tuple(Offering(z, c, price) for z in ZONES for c in ("on-demand", "spot"))
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: "amd64", wk.OS: "linux"}
    return InstanceType(name, labels, {"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110}, {}, offerings)


TYPES = [itype("m5.large", 2, 0.096), itype("m5.xlarge", 4, 0.192), itype("m5.2xlarge", 8, 0.384)]


def pool() -> NodePool:
    reqs = Requirements([Requirement.create(wk.CAPACITY_TYPE, "In", ["on-demand"]),
                         Requirement.create(wk.ZONE, "In", ["us-east-1a"])])
    return NodePool(name="default", requirements=reqs, node_class="default", labels={"team": "platform"},
                    annotations={"example.com/owner": "ops"},
                    taints=(Taint("dedicated", "NoSchedule", "gpu"),),
                    startup_taints=(Taint("example.com/agent", "NoExecute"),),
                    disruption=Disruption(expire_after_seconds=720 * 3600.0, termination_grace_period_seconds=5400.0),
                    source="cluster:NodePool/default")


def pods(n: int) -> list[Pod]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    first = Pod.from_dict({"metadata": {"name": "app-0", "namespace": "default"}, "spec": body})
    return [first] + [replace(first, name=f"app-{i}") for i in range(1, n)]


def test_the_nodeclaim_of_a_planned_node_is_the_one_karpenter_writes() -> None:
    p = pool()
    [claim] = solve(pods(2), [p], {p.name: TYPES}).node_claims
    offered = [t for t in claim.instance_types]

    obj = ncm.nodeclaim_object(claim, p, offered, name="default-ab12c", owner_uid="uid-1")

    meta = obj["metadata"]
    assert obj["apiVersion"] == "karpenter.sh/v1" and obj["kind"] == "NodeClaim"
    assert meta["name"] == "default-ab12c" and meta["finalizers"] == ["karpenter.sh/termination"]
    assert meta["labels"] == {**meta["labels"], "team": "platform", wk.NODEPOOL: "default", wk.NODECLASS: "default"}
    # #31.5: plus nodescale's record of the template it was launched from (drift compares the pool with it).
    assert meta["annotations"] == {"example.com/owner": "ops", **hash_annotations(p)}
    assert meta["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default",
                                        "uid": "uid-1", "blockOwnerDeletion": True}]
    spec = obj["spec"]
    reqs = {r["key"]: r for r in spec["requirements"]}
    assert reqs[wk.INSTANCE_TYPE] == {"key": wk.INSTANCE_TYPE, "operator": "In", "values": sorted(offered)}
    assert reqs[wk.ZONE]["values"] == ["us-east-1a"] and reqs[wk.CAPACITY_TYPE]["values"] == ["on-demand"]
    assert reqs[wk.NODEPOOL] == {"key": wk.NODEPOOL, "operator": "In", "values": ["default"]}
    assert wk.HOSTNAME not in reqs
    assert spec["resources"]["requests"]["cpu"] == "3" and spec["resources"]["requests"]["pods"] == "2"
    assert spec["taints"] == [{"key": "dedicated", "effect": "NoSchedule", "value": "gpu"}]
    assert spec["startupTaints"] == [{"key": "example.com/agent", "effect": "NoExecute"}]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["expireAfter"] == "720h" and spec["terminationGracePeriod"] == "1h30m"


def test_a_pool_from_ssm_owns_nothing_and_never_expires_as_never() -> None:
    p = replace(pool(), source="ssm:/nodescale/demo/nodepools/a#0", disruption=Disruption(expire_after_seconds=None))
    [claim] = solve(pods(1), [p], {p.name: TYPES}).node_claims
    obj = ncm.nodeclaim_object(claim, p, claim.instance_types, name="default-x")
    assert "ownerReferences" not in obj["metadata"]
    assert obj["spec"]["expireAfter"] == "Never" and "terminationGracePeriod" not in obj["spec"]


def test_the_launched_status_and_the_conditions_karpenter_sets() -> None:
    status = ncm.launched_status(TYPES[0], "us-east-1a", "i-0abc", "ami-123", now=T0, generation=1)
    assert status["providerID"] == "aws:///us-east-1a/i-0abc" and status["imageID"] == "ami-123"
    assert status["capacity"]["cpu"] == "2" and status["allocatable"]["memory"]
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Launched"] == {"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                                   "lastTransitionTime": T0, "observedGeneration": 1}
    assert by_type["Registered"]["status"] == "Unknown" and by_type["Registered"]["reason"] == "AwaitingReconciliation"
    assert by_type["Ready"]["status"] == "Unknown"

    later = ncm.set_condition(status["conditions"], ncm.REGISTERED, ncm.TRUE, now=T1, generation=1)
    later = ncm.set_condition(later, ncm.INITIALIZED, ncm.TRUE, now=T1, generation=1)
    later = ncm.set_condition(later, ncm.LAUNCHED, ncm.TRUE, now=T1, generation=1)  # unchanged: time kept
    ready = {c["type"]: c for c in ncm.with_ready(later, now=T1, generation=1)}
    assert ready["Ready"]["status"] == "True" and ready["Ready"]["lastTransitionTime"] == T1
    assert ready["Launched"]["lastTransitionTime"] == T0


def test_a_duration_as_go_prints_it() -> None:
    assert [ncm.go_duration(s) for s in (0, 45, 5400, 720 * 3600, 3661)] == ["0s", "45s", "1h30m", "720h", "1h1m1s"]


def test_a_long_pool_name_is_cut_as_generate_name_cuts_it() -> None:
    """#30.1, hostile input: a NodePool may be named with up to 253 characters; kube-apiserver's generateName
    (names.SimpleNameGenerator, maxGeneratedNameLength 58) keeps 58 of the prefix, so the name fits 63."""
    assert ncm.claim_name("default", "abcde") == "default-abcde"
    long = "p" * 253
    name = ncm.claim_name(long, "abcde")
    assert len(name) == 63 and name == "p" * 58 + "abcde"


# ----------------------------------------------------------------------------------- registration TTL (#30.1)
TTL = 900.0


def at(text: str) -> datetime:
    parsed = parse_timestamp(text)
    assert parsed is not None
    return parsed


def ours(**status: object) -> dict:
    """A NodeClaim nodescale created for cluster "demo", created at T0."""
    return {"metadata": {"name": "default-ab12c", "creationTimestamp": T0,
                         "annotations": {ncm.OWNER_ANNOTATION: "demo"}}, "status": dict(status)}


def launched_at(since: str, **extra: object) -> dict:
    conditions = ncm.set_condition([], ncm.REGISTERED, ncm.UNKNOWN, now=since, generation=1)
    return ours(providerID="aws:///us-east-1a/i-0abc", conditions=conditions, **extra)


def test_nodescale_marks_the_nodeclaims_it_creates_with_its_cluster() -> None:
    """#30.1: the annotation that lets the registration TTL tell nodescale's NodeClaims from any other's."""
    p = pool()
    [claim] = solve(pods(1), [p], {p.name: TYPES}).node_claims
    obj = ncm.nodeclaim_object(claim, p, claim.instance_types, name="default-x", cluster="demo")
    assert obj["metadata"]["annotations"] == {"example.com/owner": "ops", ncm.OWNER_ANNOTATION: "demo",
                                              **hash_annotations(p)}
    assert ncm.created_by(obj, "demo") and not ncm.created_by(obj, "other")


def test_a_nodeclaim_whose_node_has_not_registered_past_the_ttl_expires() -> None:
    """#30.1: kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness_test.go, Describe "Liveness",
    Entry "should delete the nodeClaim when the Node hasn't registered past the registration ttl": the TTL runs
    from the launch (the Registered condition's transition), not from the creation."""
    claim = launched_at(T1)
    assert not ncm.registration_expired(claim, "demo", now=at(T1) + timedelta(seconds=TTL), ttl_seconds=TTL)
    assert ncm.registration_expired(claim, "demo", now=at(T1) + timedelta(seconds=TTL + 1), ttl_seconds=TTL)
    assert ncm.instance_of(claim) == "i-0abc"


def test_a_nodeclaim_never_launched_expires_past_the_ttl_from_its_creation() -> None:
    """#30.1: liveness_test.go It "should delete the NodeClaim when the NodeClaim hasn't launched past the
    registration ttl" (no providerID: the function stopped between the create and the Fleet call)."""
    claim = ours()
    assert ncm.instance_of(claim) == ""
    assert not ncm.registration_expired(claim, "demo", now=at(T0) + timedelta(seconds=TTL), ttl_seconds=TTL)
    assert ncm.registration_expired(claim, "demo", now=at(T0) + timedelta(seconds=TTL + 1), ttl_seconds=TTL)


def test_a_registered_nodeclaim_never_expires() -> None:
    """#30.1: liveness_test.go It "shouldn't delete the nodeClaim when the node has registered past the
    registration ttl": a nodeName or Registered=True keeps it, however old."""
    late = at(T0) + timedelta(days=3)
    named = launched_at(T0, nodeName="ip-10-0-0-1.ec2.internal")
    joined = launched_at(T0)
    joined["status"]["conditions"] = ncm.set_condition(joined["status"]["conditions"], ncm.REGISTERED, ncm.TRUE,
                                                       now=T1, generation=1)
    for claim in (named, joined):
        assert not ncm.registration_expired(claim, "demo", now=late, ttl_seconds=TTL, stale={"i-0abc"})


def test_a_nodeclaim_nodescale_did_not_create_never_expires() -> None:
    """#30.1: liveness_test.go Entry "should ignore NodeClaims not managed by this Karpenter instance": one
    without nodescale's annotation (Karpenter's, during a migration) or another cluster's is never deleted."""
    late = at(T0) + timedelta(days=3)
    foreign = launched_at(T0)
    del foreign["metadata"]["annotations"]
    other = launched_at(T0)
    other["metadata"]["annotations"] = {ncm.OWNER_ANNOTATION: "other"}
    for claim in (foreign, other):
        assert not ncm.registration_expired(claim, "demo", now=late, ttl_seconds=TTL, stale={"i-0abc"})


def test_the_nodeclaim_of_an_instance_timed_out_in_ec2_expires_with_it() -> None:
    """#30.1: the instance's own timeout (EC2's launch time, a little before the NodeClaim's launch was written)
    terminating it takes its NodeClaim too; one being deleted is left to the finalizer."""
    claim = launched_at(T1)
    assert ncm.registration_expired(claim, "demo", now=at(T1), ttl_seconds=TTL, stale={"i-0abc"})
    assert not ncm.registration_expired(claim, "demo", now=at(T1), ttl_seconds=TTL, stale={"i-0def"})
    claim["metadata"]["deletionTimestamp"] = T1
    assert not ncm.registration_expired(claim, "demo", now=at(T1) + timedelta(days=1), ttl_seconds=TTL)
