"""#30.1 on sim/: every launch is a karpenter.sh/v1 NodeClaim, and `kubectl get nodeclaims` (the pinned kubectl)
shows it launched, registered and initialized, with its node, in Karpenter's columns.

Karpenter behaviours restated (kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle):
- launch_test.go "Launch" / "should launch an instance when a new NodeClaim is created" and "should add the
  Launched status condition after creating the NodeClaim": the NodeClaim exists before the instance, and after
  the launch carries providerID, imageID, capacity, allocatable and Launched=True;
- registration_test.go "Registration" / "should match the nodeClaim to the Node when the Node comes online" and
  "should add the Registered status condition when the node is registered": status.nodeName, Registered=True;
- initialization_test.go "Initialization" / "should consider the nodeClaim initialized when all initialization
  conditions are met": Initialized=True (and the root Ready) once the node is Ready;
- launch_test.go "should delete the nodeclaim if InsufficientCapacity is returned from the cloudprovider" (and
  any launch error): a launch that gets no instance leaves no NodeClaim.
"""

from __future__ import annotations

import base64
import email
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodescale.k8s.raw import MERGE_PATCH, WatchStream, request_json
from nodescale.model import labels as wk
from nodescale.runtime import Runtime
from nodescale.scheduling import nodeclaim_manifest as ncm
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, node_of, put_pool, runtime_for, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("nodeclaims")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

KUBECTL = Path(sys.executable).parent / "kubectl"
V1 = "karpenter-v1/default.yaml"
COLLECTION = "/apis/karpenter.sh/v1/nodeclaims"


@pytest.fixture(autouse=True)
def no_nodeclaims(sim: Environment) -> None:
    """The module's environment without the NodeClaims an earlier test left (their finalizer removed first)."""
    if not helpers.nodeclaims_served(sim):
        return
    api = sim.kube_api_client()
    for claim in nodeclaims(sim):
        path = f"{COLLECTION}/{claim['metadata']['name']}"
        request_json(api, "PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
        helpers.delete_quietly(api, path)


def kubectl(sim: Environment, *args: str) -> str:
    """The pinned kubectl as the cluster administrator, with its own cache."""
    cache = Path(sim.admin_kubeconfig).parent / "kubectl-cache"
    result = subprocess.run(
        [str(KUBECTL), f"--kubeconfig={sim.admin_kubeconfig}", f"--cache-dir={cache}", *args],
        capture_output=True, text=True, timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(cache)},
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout


def nodeclaims(sim: Environment) -> list[dict[str, Any]]:
    return request_json(sim.kube_api_client(), "GET", COLLECTION).get("items") or []


def conditions(claim: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (claim.get("status") or {}).get("conditions") or []}


def pending_pod(sim: Environment, ns: str, pool_text: str | None = None, name: str = "p",
                requests: dict[str, str] | None = None) -> None:
    """One pod no node takes (``requests``: 500m and 256Mi by default), under the pool ``pool_text`` (the
    Karpenter v1 example by default)."""
    put_pool(sim, pool_text or (EXAMPLES / V1).read_text(), "default")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": requests or {"cpu": "500m", "memory": "256Mi"}}}]}})
    wait_for("the pod unschedulable", lambda: any(
        c.get("reason") == "Unschedulable"
        for p in helpers.pods(sim, ns) for c in (p.get("status") or {}).get("conditions") or []))


def test_kubectl_get_nodeclaims_lists_the_launch_launched_registered_and_initialized(
    sim: Environment, rt: Runtime, ns: str,
) -> None:
    """#30.1 (and #30.7's printer columns): the NodeClaim is written at launch and through registration."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)

    [launch] = provisioning.provision_once(rt).launches
    [claim] = nodeclaims(sim)
    name = claim["metadata"]["name"]
    assert name.startswith("default-") and len(name) == len("default-") + 5
    assert claim["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]
    assert claim["metadata"]["labels"][wk.NODEPOOL] == "default"
    assert claim["metadata"]["labels"][wk.NODECLASS] == "default"
    assert claim["metadata"]["labels"]["team"] == "platform"
    assert claim["metadata"]["labels"][wk.INSTANCE_TYPE] == launch.instance_type
    spec = claim["spec"]
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["expireAfter"] == "720h" and spec["terminationGracePeriod"] == "48h"
    types = next(r for r in spec["requirements"] if r["key"] == wk.INSTANCE_TYPE)
    assert types["operator"] == "In" and launch.instance_type in types["values"]
    assert spec["resources"]["requests"]["pods"] == "1"
    status = claim["status"]
    assert status["providerID"] == f"aws:///{launch.zone}/{launch.instance_id}"
    assert status["imageID"].startswith("ami-") and status["capacity"]["cpu"] and status["allocatable"]["memory"]
    launched = conditions(claim)
    assert launched["Launched"]["status"] == "True" and launched["Launched"]["reason"] == "Launched"
    assert set(launched["Launched"]) == {"type", "status", "reason", "message", "lastTransitionTime",
                                         "observedGeneration"}
    assert launched["Registered"]["status"] == "Unknown" and launched["Ready"]["status"] == "Unknown"

    node = node_of(sim, launch.instance_id)["metadata"]["name"]
    for _ in range(6):  # each pass syncs what registered and became Ready
        provisioning.provision_once(runtime_for(sim))
        if conditions(nodeclaims(sim)[0]).get("Initialized", {}).get("status") == "True":
            break
        sim.advance(2)
    [claim] = nodeclaims(sim)
    assert claim["status"]["nodeName"] == node
    assert {t: c["status"] for t, c in conditions(claim).items()} == {
        "Launched": "True", "Registered": "True", "Initialized": "True", "Ready": "True"}

    table = kubectl(sim, "get", "nodeclaims").splitlines()
    assert table[0].split() == ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
    row = table[1].split()
    assert row[:6] == [name, launch.instance_type, launch.capacity_type, launch.zone, node, "True"]
    wide = kubectl(sim, "get", "nodeclaims", "-o", "wide").splitlines()
    assert wide[0].split()[7:] == ["IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED"]
    assert wide[1].split()[7:11] == [claim["status"]["imageID"], claim["status"]["providerID"], "default", "default"]
    [listed] = json.loads(kubectl(sim, "get", "nodeclaims", "-o", "json"))["items"]
    assert listed["status"]["nodeName"] == node
    assert all(c["status"] == "True" for c in listed["status"]["conditions"])


def test_a_failed_fleet_launch_leaves_no_nodeclaim(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.1: the NodeClaim made before the Fleet call goes (its finalizer first) when EC2 refuses the launch."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)
    sim.add_aws_fault(kind="error", service="ec2", action="CreateFleet", code="UnauthorizedOperation", status=403)
    since = request_json(sim.kube_api_client(), "GET", COLLECTION)["metadata"]["resourceVersion"]

    summary = provisioning.provision_once(rt)

    assert not summary.launches and sim.aws_calls(service="ec2", action="CreateFleet")
    assert nodeclaims(sim) == []
    stream = WatchStream(sim.kube_api_client(), COLLECTION,
                         {"watch": "true", "resourceVersion": since, "timeoutSeconds": 1}, None)
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in stream.events()]
    created = [n for t, n in seen if t == "ADDED"]
    assert created and [n for t, n in seen if t == "DELETED"] == created  # made before the call, gone after


def test_without_the_nodeclaim_crd_the_launch_goes_on(sim: Environment, rt: Runtime, ns: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """#30.1 (3): capacity never waits on bookkeeping: no NodeClaim CRD, one warning, the node is launched."""
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh"
    helpers.delete_quietly(sim.kube_api_client(), crd)
    wait_for("the NodeClaim CRD gone", lambda: not helpers.nodeclaims_served(sim))
    pending_pod(sim, ns)

    with caplog.at_level("WARNING"):
        summary = provisioning.provision_once(rt)

    assert len(summary.launches) == 1
    warnings = [r for r in caplog.records if "no NodeClaim CRD" in r.getMessage()]
    assert len(warnings) == 1



def test_a_cluster_nodepool_owns_its_nodeclaims(sim: Environment, ns: str) -> None:
    """#30.1: a NodePool kept in the cluster is its NodeClaims' owner (Karpenter's ownerReference, so deleting the
    pool collects them), as the pinned kubectl shows."""
    helpers.install_karpenter_crds(sim)
    api = sim.kube_api_client()
    for doc in yaml.safe_load_all((EXAMPLES / V1).read_text()):
        plural = {"NodePool": "karpenter.sh/v1/nodepools", "EC2NodeClass": "karpenter.k8s.aws/v1/ec2nodeclasses"}
        request_json(api, "POST", f"/apis/{plural[doc['kind']]}", body=doc)
    uid = request_json(api, "GET", "/apis/karpenter.sh/v1/nodepools/default")["metadata"]["uid"]
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]}})
    wait_for("the pod unschedulable", lambda: any(
        c.get("reason") == "Unschedulable"
        for p in helpers.pods(sim, ns) for c in (p.get("status") or {}).get("conditions") or []))

    [launch] = provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",))).launches

    [owner] = json.loads(kubectl(sim, "get", "nodeclaims", "-o", "json"))["items"][0]["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": uid,
                     "blockOwnerDeletion": True}
    assert nodeclaims(sim)[0]["status"]["providerID"].endswith(launch.instance_id)


def _claim(sim: Environment, name: str, *, ours: bool, instance: str = "") -> dict[str, Any]:
    """A NodeClaim of the default pool as the admin writes it: nodescale's (its annotation) or another's (as
    Karpenter's, during a migration), launched as ``instance`` when given (Registered Unknown since then)."""
    api = sim.kube_api_client()
    metadata: dict[str, Any] = {"name": name, "labels": {wk.NODEPOOL: "default"},
                                "finalizers": [wk.TERMINATION_FINALIZER]}
    if ours:
        metadata["annotations"] = {ncm.OWNER_ANNOTATION: sim.cluster}
    made = request_json(api, "POST", COLLECTION, body={
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": metadata,
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": wk.NODEPOOL, "operator": "In", "values": ["default"]}]}})
    if instance:
        since = made["metadata"]["creationTimestamp"]
        conditions = ncm.set_condition([], ncm.LAUNCHED, ncm.TRUE, now=since, generation=1)
        conditions = ncm.set_condition(conditions, ncm.REGISTERED, ncm.UNKNOWN, now=since, generation=1)
        request_json(api, "PATCH", f"{COLLECTION}/{name}/status", content_type=MERGE_PATCH, body={
            "status": {"providerID": f"aws:///us-east-1a/{instance}", "conditions": conditions}})
    return made


def _stuck_instance(sim: Environment, *, ours: bool = True) -> str:
    """An instance whose user data can never join a node (as a broken AMI or bootstrap would): this cluster's
    (tagged) or one nodescale did not launch."""
    tags = [{"Key": wk.NODEPOOL, "Value": "default"}]
    if ours:
        tags.append({"Key": helpers.CLUSTER_TAG, "Value": sim.cluster})
    image = sim.boto3_client("ssm").get_parameter(
        Name="/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id")["Parameter"]["Value"]
    return sim.boto3_client("ec2").run_instances(
        ImageId=image, InstanceType="c6a.large", MinCount=1, MaxCount=1, UserData="#!/bin/bash\nexit 1\n",
        Placement={"AvailabilityZone": "us-east-1a"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]


def _state(sim: Environment, instance: str) -> str:
    found = sim.boto3_client("ec2").describe_instances(InstanceIds=[instance])
    return str(found["Reservations"][0]["Instances"][0]["State"]["Name"])


def test_nodeclaims_whose_node_never_registers_are_deleted_after_the_registration_ttl(
    sim: Environment, rt: Runtime,
) -> None:
    """#30.1, kubernetes-sigs/karpenter pkg/controllers/nodeclaim/lifecycle/liveness_test.go, Describe "Liveness":
    Entry "should delete the nodeClaim when the Node hasn't registered past the registration ttl" (its instance
    terminated, its finalizer released: `kubectl get nodeclaims` no longer lists it) and It "should delete the
    NodeClaim when the NodeClaim hasn't launched past the registration ttl" (no providerID); Entry "should ignore
    NodeClaims not managed by this Karpenter instance": a NodeClaim nodescale did not create stays, finalizer
    and all, and its instance runs on."""
    helpers.install_karpenter_crds(sim)
    put_pool(sim, (EXAMPLES / V1).read_text(), "default")
    stuck, foreign_instance = _stuck_instance(sim), _stuck_instance(sim, ours=False)
    _claim(sim, "default-stuck", ours=True, instance=stuck)
    _claim(sim, "default-never", ours=True)
    _claim(sim, "default-karpenter", ours=False, instance=foreign_instance)
    _claim(sim, "default-karpenter-never", ours=False)

    try:
        within = provisioning.provision_once(rt)  # within the TTL: nothing goes
        assert within.registration_timeouts == [] and len(nodeclaims(sim)) == 4

        sim.advance(rt.settings.registration_timeout_seconds + 1)
        after = provisioning.provision_once(runtime_for(sim))

        assert stuck in after.registration_timeouts
        assert _state(sim, stuck) in ("shutting-down", "terminated")
        left = {c["metadata"]["name"]: c for c in nodeclaims(sim)}
        assert sorted(left) == ["default-karpenter", "default-karpenter-never"]
        assert all(c["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER] and "deletionTimestamp" not in c["metadata"]
                   for c in left.values())
        assert "default-stuck" not in kubectl(sim, "get", "nodeclaims")
        assert foreign_instance not in after.registration_timeouts and _state(sim, foreign_instance) == "running"
    finally:  # not this cluster's: the emptying between tests leaves it
        sim.boto3_client("ec2").terminate_instances(InstanceIds=[foreign_instance])


def _launching_claim(sim: Environment, name: str) -> None:
    """A NodeClaim of the default pool as nodescale writes it before the Fleet call (its annotation, requirements
    narrowed to the types offered, one zone and capacity type), with no providerID yet."""
    request_json(sim.kube_api_client(), "POST", COLLECTION, body={
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "default", wk.NODECLASS: "default", "team": "platform"},
                     "annotations": {ncm.OWNER_ANNOTATION: sim.cluster}, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c6a.large", "m6a.large"]},
                                  {"key": wk.NODEPOOL, "operator": "In", "values": ["default"]},
                                  {"key": wk.ZONE, "operator": "In", "values": ["us-east-1a"]},
                                  {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                 "resources": {"requests": {"cpu": "500m", "pods": "1"}}}})


def test_a_nodeclaim_without_its_instance_is_capacity_in_flight(sim: Environment, rt: Runtime, ns: str) -> None:
    """#30.1: capacity in flight is the NodeClaims without a node, not what EC2 shows: a NodeClaim made before
    the Fleet call (no providerID; EC2 shows no instance) takes the pending pod, so the pass launches nothing and
    counts the pod waiting for it; once that NodeClaim is being deleted, the pod gets a node of its own.

    kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/suite_test.go, Describe "In-Flight Nodes":
    It "should not launch a second node if there is an in-flight node that can support the pod" and It "should
    launch a second node if an in-flight node is terminating"."""
    helpers.install_karpenter_crds(sim)
    _launching_claim(sim, "default-fl1gh")
    pending_pod(sim, ns)
    fleets = len(sim.aws_calls(service="ec2", action="CreateFleet"))  # the module's earlier tests launched

    waiting = provisioning.provision_once(rt)

    assert waiting.launches == [] and waiting.waiting_for_in_flight == 1
    assert len(sim.aws_calls(service="ec2", action="CreateFleet")) == fleets
    assert [c["metadata"]["name"] for c in nodeclaims(sim)] == ["default-fl1gh"]

    helpers.delete_quietly(sim.kube_api_client(), f"{COLLECTION}/default-fl1gh")  # its finalizer keeps it, deleting
    assert "deletionTimestamp" in nodeclaims(sim)[0]["metadata"]
    [launch] = provisioning.provision_once(runtime_for(sim)).launches
    assert launch.instance_id


def test_the_launched_instance_and_its_volume_carry_karpenters_tags(sim: Environment, rt: Runtime, ns: str) -> None:
    """#31.5: an instance carries the tags Karpenter writes for AWS's tools and cost reports, through the
    functions' own IAM policy (sim enforces it). Restates aws/karpenter-provider-aws
    pkg/providers/instance/suite_test.go "InstanceProvider" (the tags instance.go writes: karpenter.sh/nodepool,
    karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass, eks:eks-cluster-name); Karpenter's ownership tag kubernetes.io/cluster/<name> is deliberately not written
    (docs/reference.md), so neither adopts the other's instances during a migration."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)

    [launch] = provisioning.provision_once(rt).launches
    [claim] = nodeclaims(sim)
    ec2 = sim.boto3_client("ec2")
    instance = ec2.describe_instances(InstanceIds=[launch.instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["karpenter.sh/nodeclaim"] == claim["metadata"]["name"]
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["eks:eks-cluster-name"] == sim.cluster
    assert tags["nodescale.io/cluster"] == sim.cluster
    assert not [k for k in tags if k.startswith("kubernetes.io/cluster/")]
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [launch.instance_id]}])
    for volume in volumes["Volumes"]:
        assert {"Key": "eks:eks-cluster-name", "Value": sim.cluster} in volume.get("Tags", [])


def test_the_launched_instances_volumes_and_network_interfaces_carry_its_nodeclaim(
        sim: Environment, rt: Runtime, ns: str) -> None:
    """#31.5 (EC2 tags): the instance's volumes and network interfaces carry karpenter.sh/nodeclaim as the
    instance does, tagged through the functions' own IAM policy (sim enforces it). Restates
    aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go, It "should request that tags be
    applied to both instances and volumes" and It "should request that tags be applied to both network
    interfaces and spot instance requests" (Karpenter's tags, karpenter.sh/nodeclaim among them)."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)

    [launch] = provisioning.provision_once(rt).launches
    [claim] = nodeclaims(sim)
    wanted = {"Key": "karpenter.sh/nodeclaim", "Value": claim["metadata"]["name"]}
    ec2 = sim.boto3_client("ec2")
    attached = [{"Name": "attachment.instance-id", "Values": [launch.instance_id]}]
    volumes = ec2.describe_volumes(Filters=attached)["Volumes"]
    interfaces = ec2.describe_network_interfaces(Filters=attached)["NetworkInterfaces"]
    assert volumes and interfaces
    assert [v["VolumeId"] for v in volumes if wanted not in v.get("Tags", [])] == []
    assert [n["NetworkInterfaceId"] for n in interfaces if wanted not in n.get("TagSet", [])] == []


def test_a_raid0_node_registers_its_instance_store_and_runs_the_pod_that_needs_it(
        sim: Environment, rt: Runtime, ns: str) -> None:
    """#31.5 (instance store): under ``instanceStorePolicy: RAID0`` an m5d.large (75 GB NVMe instance store,
    20Gi root volume) is launched for a pod asking 50G of ephemeral storage, its node registers with the
    instance store's size as the AMI's RAID0 set-up gives it, and the pod runs there. Restates
    aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go, It "should launch instances w/
    instance storage for ephemeral storage resource requests when disks are mounted for ephemeral-storage"."""
    text = (EXAMPLES / V1).read_text().replace("  tags:\n    team: platform", "  instanceStorePolicy: RAID0\n  tags:\n    team: platform")
    text = text.replace("      requirements:\n", "      requirements:\n        - key: node.kubernetes.io/instance-type\n"
                        "          operator: In\n          values: [\"m5d.large\"]\n", 1)
    assert "RAID0" in text and "m5d.large" in text
    pending_pod(sim, ns, text, "scratch", {"cpu": "100m", "ephemeral-storage": "50G"})

    [launch] = provisioning.provision_once(rt).launches
    assert launch.instance_type == "m5d.large"
    node = node_of(sim, launch.instance_id)
    assert node["status"]["capacity"]["ephemeral-storage"] == f"{75 * 10**9 // 1024}Ki"
    wait_for("the pod bound to the node", lambda: [
        p for p in helpers.pods(sim, ns) if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]])


def test_the_launched_nodes_user_data_admits_the_pods_the_plan_counted(sim: Environment, rt: Runtime, ns: str) -> None:
    """#31.5: aws/karpenter-provider-aws pkg/providers/launchtemplate/suite_test.go (ENI-based pod density:
    max-pods written per instance type): the kubelet's maxPods in the launched node's NodeConfig is the pods
    capacity the plan gave its type (the NodeClaim's status.capacity.pods)."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)

    [launch] = provisioning.provision_once(rt).launches
    [claim] = nodeclaims(sim)
    raw = sim.boto3_client("ec2").describe_instance_attribute(InstanceId=launch.instance_id, Attribute="userData")
    message = email.message_from_string(base64.b64decode(raw["UserData"]["Value"]).decode())
    (part,) = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    max_pods = yaml.safe_load(part.get_payload())["spec"]["kubelet"]["config"]["maxPods"]
    assert max_pods == int(claim["status"]["capacity"]["pods"]) > 0


def test_the_launched_pod_is_nominated_to_its_nodeclaim_as_karpenter_words_it(
    sim: Environment, rt: Runtime, ns: str,
) -> None:
    """#30.5: restates kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/events.go
    NominatePodEvent: a Normal "Nominated" event on the pod, "Pod should schedule on: nodeclaim/NAME". Karpenter
    publishes no Launched/Registered/Initialized events (those are NodeClaim conditions), so none are expected."""
    helpers.install_karpenter_crds(sim)
    pending_pod(sim, ns)
    [launch] = provisioning.provision_once(rt).launches
    [claim] = nodeclaims(sim)
    name = claim["metadata"]["name"]
    items = request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/events").get("items") or []
    [nominated] = [e for e in items if e["reason"] == "Nominated" and e["involvedObject"]["name"] == "p"]
    assert nominated["type"] == "Normal"
    assert nominated["message"].startswith(f"Pod should schedule on: nodeclaim/{name} (NodePool default: "
                                           f"instance {launch.instance_id} ")
