"""Issue 14 on `sim/`: a node carries the labels it was planned with, and a pod is launched for once.

Karpenter behaviours restated here:
- a NodeClaim's labels (pool name, template labels, the type's and offering's well-known labels) are
  copied onto the Node when it registers, which is then labelled karpenter.sh/registered=true, and
  karpenter.sh/initialized=true once Ready (kubernetes-sigs/karpenter, nodeclaim lifecycle: registration
  and initialization); so a pod selecting any well-known label runs on the node launched for it;
- v1alpha5 (Karpenter v0.31) nodes carry karpenter.sh/provisioner-name, v1 nodes karpenter.sh/nodepool and
  karpenter.k8s.aws/ec2nodeclass;
- nothing is launched again for a pod while capacity launched for it exists (Karpenter nominates pods
  to in-flight NodeClaims); nodescale also never re-launches for a pod the launched node cannot take.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.model import labels as wk
from nodescale.runtime import Runtime
from nodescale.usecases import status
from nodescale.usecases.provision import explain as explaining
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.provision import unmet
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, node_of, pods, put_pool, runtime_for, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("labels")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

V1ALPHA5 = "karpenter-v1alpha5/default-spot.yaml"
V1 = "karpenter-v1/default.yaml"


def fleet_calls(sim: Environment) -> int:
    return len(sim.aws_calls(service="ec2", action="CreateFleet"))


def pod_with(ns: str, name: str, selector: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeSelector": selector,
                 "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]},
    }


def start(sim: Environment, ns: str, pool: str, selector: dict[str, str]) -> None:
    put_pool(sim, (EXAMPLES / pool).read_text(), Path(pool).stem)
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=pod_with(ns, "p", selector))
    wait_for("the pod unschedulable", lambda: (p := pods(sim, ns)) and any(
        c.get("reason") == "Unschedulable" for c in (p[0].get("status") or {}).get("conditions") or []))


def a_zone_id(sim: Environment) -> str:
    zones = sim.boto3_client("ec2").describe_availability_zones()["AvailabilityZones"]
    return sorted(z["ZoneId"] for z in zones)[-1]


def bound_node(sim: Environment, ns: str) -> str | None:
    found = pods(sim, ns)
    return found[0]["spec"].get("nodeName") if found else None


@pytest.mark.parametrize("pool, selector", [
    (V1ALPHA5, {wk.INSTANCE_CATEGORY: "c"}),
    (V1ALPHA5, {wk.LEGACY_PROVISIONER: "default"}),
    (V1, {wk.ZONE_ID: None}),  # the zone id is the environment's, read below
    (V1, {wk.NODECLASS: "default", wk.INSTANCE_EBS_BANDWIDTH: None}),
])
def test_a_pod_selecting_a_well_known_label_runs_after_one_launch(
    sim: Environment, rt: Runtime, ns: str, pool: str, selector: dict
) -> None:
    selector = dict(selector)
    if wk.ZONE_ID in selector:
        selector[wk.ZONE_ID] = a_zone_id(sim)
    if wk.INSTANCE_EBS_BANDWIDTH in selector:
        del selector[wk.INSTANCE_EBS_BANDWIDTH]  # any value: only checked on the node below
    start(sim, ns, pool, selector)
    before = fleet_calls(sim)

    [launch] = provisioning.provision_once(rt).launches
    node = node_of(sim, launch.instance_id)  # registered with what its kubelet may set
    for _ in range(4):  # each pass syncs what registered; none launches again
        provisioning.provision_once(runtime_for(sim))
        if bound_node(sim, ns):
            break
        sim.advance(2)
    name = wait_for("the pod bound", lambda: bound_node(sim, ns))

    assert name == node["metadata"]["name"] and fleet_calls(sim) == before + 1
    labels = node_of(sim, launch.instance_id)["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in selector.items())
    world = read_world(runtime_for(sim))
    inst = world.instance(launch.instance_id)
    expected = world.expected_labels(inst, world.nodepools["default"], world.instance_type(inst.instance_type, "default"))
    assert {k: labels.get(k) for k in expected} == expected
    assert labels[wk.REGISTERED] == "true"
    for key in (wk.INSTANCE_CATEGORY, wk.INSTANCE_FAMILY, wk.INSTANCE_GENERATION, wk.INSTANCE_SIZE, wk.INSTANCE_CPU,
                wk.INSTANCE_CPU_MANUFACTURER, wk.INSTANCE_MEMORY, wk.INSTANCE_HYPERVISOR, wk.INSTANCE_NETWORK_BANDWIDTH,
                wk.INSTANCE_EBS_BANDWIDTH, wk.INSTANCE_ENCRYPTION_IN_TRANSIT, wk.ZONE_ID, wk.CAPACITY_TYPE,
                wk.ZONE, wk.REGION, wk.ARCH, wk.OS, wk.INSTANCE_TYPE):
        assert key in labels, key
    if pool == V1ALPHA5:
        assert labels[wk.LEGACY_PROVISIONER] == "default" and wk.NODECLASS not in labels
        assert wk.NODEPOOL not in labels  # issue 14: that names a NodePool's nodes, as in Karpenter v0.32
    else:
        assert labels[wk.NODECLASS] == "default" and wk.LEGACY_PROVISIONER not in labels
        assert labels[wk.NODEPOOL] == "default"
    provisioning.provision_once(runtime_for(sim))
    assert node_of(sim, launch.instance_id)["metadata"]["labels"].get(wk.INITIALIZED) == "true"


def test_a_pod_the_launched_node_cannot_take_is_not_launched_for_again(sim: Environment, rt: Runtime, ns: str) -> None:
    # Something else (here the administrator; in a cluster, an admission webhook or another controller)
    # taints the node as it registers: the node launched for the pod can never take it. Planned again,
    # the pod would get a new node each pass; it gets one, an event and a metric instead.
    start(sim, ns, V1, {})
    before = fleet_calls(sim)
    [launch] = provisioning.provision_once(rt).launches
    node = node_of(sim, launch.instance_id)
    request_json(sim.kube_api_client(), "PATCH", f"/api/v1/nodes/{node['metadata']['name']}", body={
        "spec": {"taints": [*(node["spec"].get("taints") or []),
                            {"key": "example.com/dedicated", "value": "other", "effect": "NoSchedule"}]}},
        content_type=MERGE_PATCH)
    sim.advance(unmet.GRACE_SECONDS + 5)

    summaries = []
    for _ in range(3):
        summaries.append(provisioning.provision_once(runtime_for(sim)))
        sim.advance(unmet.GRACE_SECONDS)

    assert fleet_calls(sim) == before + 1 and all(not s.launches for s in summaries)
    [why] = summaries[-1].unschedulable
    assert node["metadata"]["name"] in why.reason and "example.com/dedicated" in why.reason
    events = request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/events")["items"]
    [event] = [e for e in events if e["reason"] == unmet.REASON]
    assert event["type"] == "Warning" and launch.instance_id in event["message"]
    fate = explaining.explain(runtime_for(sim), ns, "p")
    assert fate.verdict == explaining.UNSCHEDULABLE and "cannot take it" in fate.message
    [pending] = [f for f in status.read_status(runtime_for(sim)).to_dict()["pending"] if f["pod"] == f"{ns}/p"]
    assert "cannot take it" in pending["message"]


def test_the_nomination_is_read_from_the_event_data_not_its_text(sim: Environment, rt: Runtime, ns: str) -> None:
    """#29.3: the Nominated event names its instance in ``related``; a tenant who rewrites the event's
    message (events in their namespace are theirs to write) changes nothing: the pod the launched node
    cannot take is still not launched for again. On the old code the instance came from the message."""
    start(sim, ns, V1, {})
    before = fleet_calls(sim)
    [launch] = provisioning.provision_once(rt).launches
    admin = sim.kube_api_client()
    events = request_json(admin, "GET", f"/api/v1/namespaces/{ns}/events")["items"]
    [nominated] = [e for e in events if e["reason"] == "Nominated"]
    assert nominated["related"] == {"kind": "Instance", "name": launch.instance_id, "apiVersion": "nodescale.io/v1"}
    request_json(admin, "PATCH", f"/api/v1/namespaces/{ns}/events/{nominated['metadata']['name']}",
                 body={"message": "edited by the tenant"}, content_type=MERGE_PATCH)
    node = node_of(sim, launch.instance_id)
    request_json(admin, "PATCH", f"/api/v1/nodes/{node['metadata']['name']}", body={
        "spec": {"taints": [*(node["spec"].get("taints") or []),
                            {"key": "example.com/dedicated", "value": "other", "effect": "NoSchedule"}]}},
        content_type=MERGE_PATCH)
    sim.advance(unmet.GRACE_SECONDS + 5)

    summary = provisioning.provision_once(runtime_for(sim))

    assert fleet_calls(sim) == before + 1 and not summary.launches
    [why] = summary.unschedulable
    assert launch.instance_id in why.reason


V115_REQUIREMENTS = """        - key: karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz
          operator: Gt
          values: ["3000"]
        - key: karpenter.k8s.aws/capacity-reservation-type
          operator: DoesNotExist
"""


def test_v115_labels_are_planned_for_and_written_on_the_node_and_dra_pods_are_not_launched_for(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#31.3, #31.4: a NodePool requiring Karpenter v1.15 labels (sustained clock speed, reservation type) is
    accepted, not refused as restricted; a pod selecting another (nitro-sandbox, instance-capability-flex)
    gets a node that carries them all, as Karpenter labels its nodes (aws/karpenter-provider-aws
    instancetype suite_test.go "should launch pod in non-flex instances"); a pod with resource claims is
    not launched for and the summary says why (kubernetes-sigs/karpenter scheduling suite_test.go,
    "should handle DRA pods correctly", IGNORE_DRA_REQUESTS=true)."""
    text = (EXAMPLES / V1).read_text().replace("  limits:\n", V115_REQUIREMENTS + "  limits:\n", 1)
    assert V115_REQUIREMENTS in text
    selector = {wk.INSTANCE_NITRO_ENCLAVES: "false", wk.INSTANCE_CAPABILITY_FLEX: "false"}
    start(sim, ns, "karpenter-v1/default.yaml", selector)
    put_pool(sim, text, "default")
    dra = pod_with(ns, "dra", {})
    dra["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=dra)
    wait_for("both pods unschedulable", lambda: len([p for p in pods(sim, ns) if any(
        c.get("reason") == "Unschedulable" for c in (p.get("status") or {}).get("conditions") or [])]) == 2)
    before = fleet_calls(sim)

    summary = provisioning.provision_once(rt)
    [launch] = summary.launches
    [stuck] = summary.unschedulable
    assert stuck.pod == f"{ns}/dra" and "IGNORE_DRA_REQUESTS" in stuck.reason
    for _ in range(4):
        provisioning.provision_once(runtime_for(sim))
        if all(p["spec"].get("nodeName") for p in pods(sim, ns) if p["metadata"]["name"] == "p"):
            break
        sim.advance(2)
    wait_for("the pod bound", lambda: next(p for p in pods(sim, ns) if p["metadata"]["name"] == "p")["spec"].get("nodeName"))
    labels = node_of(sim, launch.instance_id)["metadata"]["labels"]
    assert int(labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ]) > 3000
    assert all(labels.get(k) == v for k, v in selector.items())
    assert labels[wk.INSTANCE_TENANCY] == "default" and wk.CAPACITY_RESERVATION_TYPE not in labels
    assert fleet_calls(sim) == before + 1
    assert not next(p for p in pods(sim, ns) if p["metadata"]["name"] == "dra")["spec"].get("nodeName")
