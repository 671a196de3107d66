"""#30.6 on sim/: the migration to NodeClaims. A node nodescale launched before NodeClaims existed gets exactly one,
whatever the passes; a NodeClaim a previous Karpenter left for a NodePool nodescale manages is adopted (its instance
tagged for the cluster, the NodeClaim annotated, name and spec kept) and not drifted by a disruption pass; an
incompatible one, or one whose instance is not Karpenter's for this cluster, is left alone.

Karpenter behaviours restated (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/disruption/drift_test.go,
Describe "Drift"): It "should not detect drift if the nodePool does not exist" and the Context "NodeRequirement
Drift" entries (a NodeClaim whose labels meet its NodePool's requirements is not drifted); the decision itself is
unit-tested in tests/unit/test_nodeclaim_migration.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.model import labels as wk
from nodescale.scheduling import nodeclaim_manifest as ncm
from nodescale.scheduling import nodeclaim_migration as mig
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import node_of, runtime_for, wait_for
from tests.integration.test_nodeclaims import pending_pod

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("nodeclaim-migration")
sim = helpers.emptied_environment_fixture(node_timeout=20)
ns = helpers.namespace_fixture()

COLLECTION = "/apis/karpenter.sh/v1/nodeclaims"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh"


def nodeclaims(sim: Environment) -> list[dict[str, Any]]:
    return request_json(sim.kube_api_client(), "GET", COLLECTION).get("items") or []


def remove_nodeclaim(sim: Environment, name: str) -> None:
    """Gone, its finalizer released first (as an administrator cleans up)."""
    api = sim.kube_api_client()
    request_json(api, "PATCH", f"{COLLECTION}/{name}", body={"metadata": {"finalizers": None}},
                 content_type=MERGE_PATCH)
    helpers.delete_quietly(api, f"{COLLECTION}/{name}")


@pytest.fixture(autouse=True)
def no_nodeclaims(sim: Environment) -> None:
    """The CRDs installed, and no NodeClaim an earlier test left."""
    helpers.install_karpenter_crds(sim)
    wait_for("NodeClaims served", lambda: helpers.nodeclaims_served(sim))
    for claim in nodeclaims(sim):
        remove_nodeclaim(sim, claim["metadata"]["name"])



def launch_node(sim: Environment, ns: str) -> tuple[str, str, str]:
    """A node of the default pool launched for a pending pod: (instance, zone, node name)."""
    pending_pod(sim, ns)
    [launch] = provisioning.provision_once(runtime_for(sim)).launches
    return launch.instance_id, launch.zone, node_of(sim, launch.instance_id)["metadata"]["name"]


def conditions(claim: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (claim.get("status") or {}).get("conditions") or []}


def test_a_node_launched_before_nodeclaims_gets_exactly_one_after_two_passes(sim: Environment, ns: str) -> None:
    """#30.6: the node nodescale launched while the cluster had no NodeClaim CRD gets one NodeClaim, named as
    Karpenter names them, with its node and providerID, Launched and Registered; a second pass (another
    invocation) makes none; a NodeClaim an interrupted pass left without its status is completed, not doubled."""
    helpers.delete_quietly(sim.kube_api_client(), CRD)
    wait_for("the NodeClaim CRD gone", lambda: not helpers.nodeclaims_served(sim))
    instance, zone, node = launch_node(sim, ns)
    helpers.install_karpenter_crds(sim)
    wait_for("NodeClaims served", lambda: helpers.nodeclaims_served(sim))
    assert nodeclaims(sim) == []

    provisioning.provision_once(runtime_for(sim))
    provisioning.provision_once(runtime_for(sim))

    [claim] = nodeclaims(sim)
    name = mig.backfill_name("default", instance)
    assert claim["metadata"]["name"] == name
    assert claim["metadata"]["annotations"][ncm.OWNER_ANNOTATION] == sim.cluster
    assert claim["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    assert claim["status"]["nodeName"] == node and claim["status"]["providerID"] == f"aws:///{zone}/{instance}"
    assert conditions(claim)["Launched"] == "True" and conditions(claim)["Registered"] == "True"
    types = next(r for r in claim["spec"]["requirements"] if r["key"] == wk.INSTANCE_TYPE)
    assert types["values"] == [claim["metadata"]["labels"][wk.INSTANCE_TYPE]]

    # An earlier pass stopped between the create and the status write: the next one completes that NodeClaim.
    remove_nodeclaim(sim, name)
    request_json(sim.kube_api_client(), "POST", COLLECTION,
                 body={k: claim[k] for k in ("apiVersion", "kind", "spec")} | {"metadata": {
                     k: claim["metadata"][k] for k in ("name", "labels", "annotations", "finalizers")}})
    provisioning.provision_once(runtime_for(sim))
    [repaired] = nodeclaims(sim)
    assert repaired["metadata"]["name"] == name and repaired["status"]["nodeName"] == node


def karpenterize(sim: Environment, instance: str, zone: str, node: str, name: str, **spec: Any) -> None:
    """Make the node look like one a previous Karpenter launched: nodescale's NodeClaim gone, its instance
    without nodescale's tags and with Karpenter's, and Karpenter's NodeClaim ``name`` (no nodescale annotation)."""
    for claim in nodeclaims(sim):
        remove_nodeclaim(sim, claim["metadata"]["name"])
    ec2 = sim.boto3_client("ec2")
    ec2.delete_tags(Resources=[instance], Tags=[{"Key": helpers.CLUSTER_TAG}, {"Key": "nodescale.io/config-hash"},
                                                {"Key": "nodescale.io/launch"}])
    ec2.create_tags(Resources=[instance], Tags=[{"Key": f"kubernetes.io/cluster/{sim.cluster}", "Value": "owned"},
                                                {"Key": "karpenter.sh/nodeclaim", "Value": name}])
    api = sim.kube_api_client()
    current = request_json(api, "GET", f"/api/v1/nodes/{node}")
    labels = current["metadata"]["labels"]
    # Karpenter registered it: its karpenter.sh/unregistered taint is gone (#30.4).
    taints = [t for t in current["spec"].get("taints") or [] if t.get("key") != "karpenter.sh/unregistered"]
    request_json(api, "PATCH", f"/api/v1/nodes/{node}", content_type=MERGE_PATCH, body={"spec": {"taints": taints}})
    keep = (wk.NODEPOOL, wk.NODECLASS, "team", wk.INSTANCE_TYPE, wk.ZONE, wk.CAPACITY_TYPE, wk.ARCH, wk.OS)
    request_json(api, "POST", COLLECTION, body={
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {k: labels[k] for k in keep if k in labels},
                     "annotations": {"karpenter.sh/nodepool-hash": "123"}, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": wk.NODEPOOL, "operator": "In", "values": ["default"]}], **spec}})
    status = ncm.set_condition([], ncm.LAUNCHED, ncm.TRUE, now="2026-01-01T00:00:00Z", generation=1)
    request_json(api, "PATCH", f"{COLLECTION}/{name}/status", content_type=MERGE_PATCH, body={
        "status": {"providerID": f"aws:///{zone}/{instance}", "nodeName": node, "conditions": status}})


def instance_tags(sim: Environment, instance: str) -> dict[str, str]:
    found = sim.boto3_client("ec2").describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    return {t["Key"]: t["Value"] for t in found.get("Tags") or []}


def test_a_karpenter_nodeclaim_of_a_managed_pool_is_adopted_and_not_drifted(sim: Environment, ns: str) -> None:
    """#30.6: adopted (its instance tagged for the cluster, the NodeClaim annotated, its name, spec and Karpenter's
    annotations kept, no second NodeClaim made for the node), then counted as nodescale's and not drifted by a
    disruption pass for having been Karpenter's."""
    instance, zone, node = launch_node(sim, ns)
    karpenterize(sim, instance, zone, node, "default-kpt01")
    try:
        before = nodeclaims(sim)[0]

        provisioning.provision_once(runtime_for(sim))

        [claim] = nodeclaims(sim)
        assert claim["metadata"]["name"] == "default-kpt01"
        assert claim["metadata"]["annotations"] == {"karpenter.sh/nodepool-hash": "123",
                                                    ncm.OWNER_ANNOTATION: sim.cluster}
        assert claim["spec"] == before["spec"]
        assert instance_tags(sim, instance)[helpers.CLUSTER_TAG] == sim.cluster

        summary = disrupting.disrupt_once(runtime_for(sim))

        assert not [d for d in summary["decisions"] if d["reason"] == "Drifted"]
        [still] = nodeclaims(sim)
        assert still["metadata"]["name"] == "default-kpt01" and "deletionTimestamp" not in still["metadata"]
        assert conditions(still).get("Drifted") != "True"

    finally:  # untagged by the test: the emptying between tests would leave it
        sim.boto3_client("ec2").terminate_instances(InstanceIds=[instance])

def test_an_incompatible_or_foreign_karpenter_nodeclaim_is_left_alone(
    sim: Environment, ns: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """#30.6: a Karpenter NodeClaim whose NodePool's template it no longer meets (a taint the pool now has) is not
    adopted, not deleted and its instance not tagged, with a warning naming why; nor is a compatible one whose
    instance is not Karpenter's for this cluster (never a change to what nodescale was not told to manage)."""
    instance, zone, node = launch_node(sim, ns)
    karpenterize(sim, instance, zone, node, "default-kpt02",
                 requirements=[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}])
    try:
        api = sim.kube_api_client()
        # The NodeClaim's labels say on-demand or spot as launched; the pool now wants a label it lacks.
        labels = nodeclaims(sim)[0]["metadata"]["labels"]
        request_json(api, "PATCH", f"{COLLECTION}/default-kpt02", content_type=MERGE_PATCH,
                     body={"metadata": {"labels": {"team": "data"}}})

        with caplog.at_level("WARNING"):
            provisioning.provision_once(runtime_for(sim))

        [claim] = nodeclaims(sim)
        assert ncm.OWNER_ANNOTATION not in claim["metadata"].get("annotations", {})
        assert claim["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER] and "deletionTimestamp" not in claim["metadata"]
        assert helpers.CLUSTER_TAG not in instance_tags(sim, instance)
        assert any("not compatible" in r.getMessage() and getattr(r, "nodeclaim", "") == "default-kpt02"
                   and "team" in getattr(r, "reason", "") for r in caplog.records)

        # Compatible again, but the instance is not Karpenter's for this cluster: still left alone.
        request_json(api, "PATCH", f"{COLLECTION}/default-kpt02", content_type=MERGE_PATCH,
                     body={"metadata": {"labels": {"team": labels["team"]}}})
        sim.boto3_client("ec2").delete_tags(Resources=[instance], Tags=[{"Key": f"kubernetes.io/cluster/{sim.cluster}"}])
        caplog.clear()
        with caplog.at_level("WARNING"):
            provisioning.provision_once(runtime_for(sim))
        assert ncm.OWNER_ANNOTATION not in nodeclaims(sim)[0]["metadata"].get("annotations", {})
        assert helpers.CLUSTER_TAG not in instance_tags(sim, instance)
        assert any("not this cluster's" in r.getMessage() for r in caplog.records)
    finally:  # not nodescale's: the emptying between tests leaves it
        sim.boto3_client("ec2").terminate_instances(InstanceIds=[instance])
