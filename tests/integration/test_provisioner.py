"""The provisioner on `sim/`: real boto3 over HTTP to moto, the kubernetes client over HTTP to the sim API.

NodePools reach the function as SSM parameters (and, in one test, as custom objects), workloads are
created in the API, and the sim's scheduler marks what it cannot place Unschedulable, as kube-scheduler does.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
import yaml

from nodescale.aws import pricing
from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.model import nodecost
from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.provision import capacity
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.status import read_status
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import (
    CLUSTER_TAG,
    EXAMPLES,
    load_handler,
    node_of,
    pods,
    put_pool,
    runtime_for,
    use_settings,
    wait_for,
)

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------------------------------ fixtures

env = helpers.environment_fixture("provisioner")
sim = helpers.emptied_environment_fixture(node_timeout=20)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()


# ------------------------------------------------------------------------------------------- helpers


def put_pools(sim: Environment, *files: str, text: str | None = None) -> None:
    for i, f in enumerate(files):
        put_pool(sim, (EXAMPLES / f).read_text(), f"{i}-{Path(f).stem}")
    if text is not None:
        put_pool(sim, text, "inline")


def apply_workloads(sim: Environment, ns: str, file: str, replicas: dict[str, int] | None = None) -> list[str]:
    api = sim.kube_api_client()
    names = []
    for doc in yaml.safe_load_all((EXAMPLES / file).read_text()):
        doc["metadata"]["namespace"] = ns
        name = doc["metadata"]["name"]
        if replicas and name in replicas:
            doc["spec"]["replicas"] = replicas[name]
        request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
        names.append(name)
    return names


def wait_pending(sim: Environment, ns: str, count: int) -> list[dict]:
    return wait_for(f"{count} unschedulable pods in {ns}",
                    lambda: (found := [p for p in pods(sim, ns) if is_provisionable(p)]) and len(found) >= count
                    and found)


def wait_running(sim: Environment, ns: str, count: int, timeout: float = 20.0) -> list[dict]:
    def check() -> list[dict] | None:
        running = [p for p in pods(sim, ns) if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"]
        return running if len(running) >= count else None

    return wait_for(f"{count} running pods in {ns}", check, timeout)


def fleet_calls(sim: Environment) -> list[dict]:
    return sim.aws_calls(service="ec2", action="CreateFleet")


def template_of(sim: Environment, launch: dict) -> tuple[dict, str, str]:
    """(launch template data, image name, decoded user data) of a launch."""
    ec2 = sim.boto3_client("ec2")
    versions = ec2.describe_launch_template_versions(LaunchTemplateName=launch.launch_template,
                                                     Versions=["$Latest"])["LaunchTemplateVersions"]
    data = versions[0]["LaunchTemplateData"]
    image = ec2.describe_images(ImageIds=[data["ImageId"]])["Images"][0]
    return data, image.get("Name", ""), base64.b64decode(data["UserData"]).decode()


def pod_events(sim: Environment, ns: str) -> list[dict]:
    items = request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/events").get("items") or []
    return [e for e in items if (e.get("source") or {}).get("component") == "nodescale"]


# --------------------------------------------------------------------------------------------- tests


def test_inflate_launches_spot_capacity_pods_run_and_a_second_run_launches_nothing(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    apply_workloads(sim, ns, "workloads/inflate.yaml")
    waiting = wait_pending(sim, ns, 5)
    before = len(fleet_calls(sim))

    summary = provisioning.provision_once(rt)

    launches = summary.launches
    assert launches and summary.pods_seen == 5 and not summary.unschedulable
    assert {x.nodepool for x in launches} == {"default"}
    assert {x.capacity_type for x in launches} == {"spot"}
    assert sum(len(x.pods) for x in launches) == 5
    assert len(fleet_calls(sim)) - before == len(launches)
    running = wait_running(sim, ns, 5)
    assert {p["spec"]["nodeName"] for p in running} == {
        node_of(sim, x.instance_id)["metadata"]["name"] for x in launches
    }
    # issue 9: each pod names the pool, type, zone, capacity type and instance it waits for
    launch_of = {pod: x for x in launches for pod in x.pods}
    nominated = {e["involvedObject"]["name"]: e for e in pod_events(sim, ns) if e["reason"] == "Nominated"}
    for p in waiting:
        event = nominated[p["metadata"]["name"]]
        x = launch_of[f"{ns}/{p['metadata']['name']}"]
        assert event["type"] == "Normal"
        for word in ("NodePool default", x.instance_id, x.instance_type, x.zone, "spot"):
            assert word in event["message"]

    calls = len(fleet_calls(sim))
    again = provisioning.provision_once(rt)
    assert again.launches == [] and again.pods_seen == 0
    assert len(fleet_calls(sim)) == calls


def test_a_pass_writes_at_most_the_event_limit_of_nominations_and_still_launches_for_every_pod(
    sim: Environment, rt: Runtime, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: a big scale-up does not cost the API server one event per pod; the launches are whole."""
    monkeypatch.setattr(capacity, "EVENTS_PER_REASON", 2)
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    apply_workloads(sim, ns, "workloads/inflate.yaml")
    wait_pending(sim, ns, 5)

    summary = provisioning.provision_once(rt)

    assert sum(len(x.pods) for x in summary.launches) == 5
    assert len([e for e in pod_events(sim, ns) if e["reason"] == "Nominated"]) == 2
    wait_running(sim, ns, 5)


def test_runs_before_the_first_launch_registers_launch_nothing_extra(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    apply_workloads(sim, ns, "workloads/inflate.yaml", {"inflate": 3})
    wait_pending(sim, ns, 3)

    first = provisioning.provision_once(rt)
    calls = len(fleet_calls(sim))
    # Right after the launch, not waiting for the pending pods to settle (#32 Bursts): sim's nodes come
    # within that second, and these passes are to run before they do.
    second = provisioning.provision_once(runtime_for(sim), deadline=time.monotonic())
    third = provisioning.provision_once(runtime_for(sim), deadline=time.monotonic())

    assert first.launches
    assert second.launches == [] and third.launches == []
    assert second.waiting_for_in_flight + second.placed_on_existing == 3
    assert len(fleet_calls(sim)) == calls
    wait_running(sim, ns, 3)


def test_capacity_error_on_the_cheapest_offering_launches_another_and_the_next_run_skips_it(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    apply_workloads(sim, ns, "workloads/inflate.yaml", {"inflate": 1})
    wait_pending(sim, ns, 1)
    cheapest = provisioning.provision_once(rt, dry_run=True).planned[0]
    itype, zone = cheapest.instance_type, cheapest.zone.split(",")[0]
    world = read_world(rt)
    offers = [o for o in world.instance_type(itype, "default").offerings if o.capacity_type == "spot"]
    zone = min(offers, key=lambda o: (o.price, o.zone)).zone
    sim.add_aws_fault(kind="capacity", instanceType=itype, zone=zone, capacityType="spot",
                      errorCode="InsufficientInstanceCapacity")

    summary = provisioning.provision_once(rt)

    assert summary.errors.get("InsufficientInstanceCapacity", 0) >= 1
    [launch] = summary.launches
    assert (launch.instance_type, launch.zone) != (itype, zone)
    marks = sim.boto3_client("dynamodb").scan(TableName=sim.seed["table_name"])["Items"]
    assert f"offering#{itype}#{zone}#spot" in {m["pk"]["S"] for m in marks}

    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "metadata": {"name": "big"},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}}}]},
    })
    wait_for("the new pod to be unschedulable", lambda: any(
        p["metadata"]["name"] == "big" and is_provisionable(p) for p in pods(sim, ns)))
    fired = [r["fired"] for r in sim.aws_faults()]
    nxt = provisioning.provision_once(runtime_for(sim))
    # The fault still stands: had the next run asked for that offering, EC2 would have refused it again.
    assert nxt.launches and "InsufficientInstanceCapacity" not in nxt.errors
    assert [r["fired"] for r in sim.aws_faults()] == fired


def test_banana_pool_takes_the_tolerating_pods_on_demand(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml", "karpenter-v1alpha5/banana-weighted-tainted.yaml")
    apply_workloads(sim, ns, "workloads/special-team.yaml")
    wait_pending(sim, ns, 3)

    summary = provisioning.provision_once(rt)

    assert summary.launches and {x.nodepool for x in summary.launches} == {"banana"}
    for launch in summary.launches:
        assert launch.capacity_type == "on-demand"
        data, image, user_data = template_of(sim, launch)
        assert image.startswith("amazon-eks-node-1.31-")  # the AL2 EKS image, not AL2023/Bottlerocket
        assert "/etc/eks/bootstrap.sh" in user_data and "billing-team=my-team" in user_data
        node = node_of(sim, launch.instance_id)
        assert node["metadata"]["labels"]["billing-team"] == "my-team"
        assert node["metadata"]["labels"]["karpenter.sh/provisioner-name"] == "banana"  # a v1alpha5 Provisioner (issue 14)
        assert {"key": "example.com/special-taint", "effect": "NoSchedule"} in [
            {k: t[k] for k in ("key", "effect")} for t in node["spec"].get("taints") or []
        ]
    wait_running(sim, ns, 3)


def test_windows_pods_get_windows_nodes_of_their_build(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pools(sim, "karpenter-v1alpha5/windows.yaml")
    apply_workloads(sim, ns, "workloads/windows-iis.yaml",
                    {"windows-server-iis-simple-2022": 2, "windows-server-iis-simple-2019": 2})
    wait_pending(sim, ns, 4)

    summary = provisioning.provision_once(rt)

    by_pool = {x.nodepool: x for x in summary.launches}
    assert set(by_pool) == {"windows2019", "windows2022"}
    for pool, build, name in (("windows2019", "10.0.17763", "2019"), ("windows2022", "10.0.20348", "2022")):
        launch = by_pool[pool]
        data, image, user_data = template_of(sim, launch)
        assert image.startswith(f"Windows_Server-{name}-English-Core-EKS_Optimized-1.31")
        assert "<powershell>" in user_data and "EKSBootstrap" in user_data
        # The Windows node role's profile (its access entry is EC2_WINDOWS), never the Linux one.
        assert data["IamInstanceProfile"]["Name"] == sim.env["NODESCALE_WINDOWS_INSTANCE_PROFILE"]
        assert data["IamInstanceProfile"]["Name"] != sim.env["NODESCALE_INSTANCE_PROFILE"]
        node = node_of(sim, launch.instance_id)
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/os"] == "windows"
        assert labels["node.kubernetes.io/windows-build"] == build
        # As EKS's Windows nodes do: the primary interface's addresses, less the node's own, as a resource.
        addresses = node["status"]["allocatable"]["vpc.amazonaws.com/PrivateIPv4Address"]
        assert addresses == node["status"]["allocatable"]["pods"]
    wait_running(sim, ns, 4, timeout=30)


def test_a_windows_node_is_priced_with_its_license(sim: Environment, rt: Runtime, ns: str) -> None:
    """#28.3: a Windows pool's node costs its Linux price plus the Windows license per vCPU (and its volumes),
    in what status reports and what limits and the price alarm add up (the world's node price)."""
    put_pools(sim, "karpenter-v1alpha5/windows.yaml")
    apply_workloads(sim, ns, "workloads/windows-iis.yaml",
                    {"windows-server-iis-simple-2022": 1, "windows-server-iis-simple-2019": 0})
    wait_pending(sim, ns, 1)
    [launch] = provisioning.provision_once(rt).launches
    data, _, _ = template_of(sim, launch)
    labels = node_of(sim, launch.instance_id)["metadata"]["labels"]

    world = read_world(rt)
    linux = next(it for it in world.catalog if it.name == labels["node.kubernetes.io/instance-type"])
    [offering] = [o for o in linux.offerings
                  if o.zone == labels["topology.kubernetes.io/zone"] and o.capacity_type == "on-demand"]
    volumes = nodecost.volumes_per_hour(data["BlockDeviceMappings"], pricing.ebs_prices(rt.settings.region))
    # AWS's Windows Server charge per vCPU-hour, as bundled (tests/unit/test_pricing.py checks its source).
    license_charge = int(linux.labels["karpenter.k8s.aws/instance-cpu"]) * 0.046
    [node] = [n for n in read_status(rt, world).nodes if n.nodepool == "windows2022"]
    assert node.price == pytest.approx(offering.price + volumes + license_charge)


def test_gpu_pods_go_to_the_tainted_gpu_pool(sim: Environment, rt: Runtime, ns: str) -> None:
    text = (EXAMPLES / "karpenter-v1beta1/gpu-and-team-pools.yaml").read_text()
    put_pools(sim, text=text)
    apply_workloads(sim, ns, "workloads/gpu-and-team.yaml", {"inflate-gpu": 2, "workload-my-team": 4})
    wait_pending(sim, ns, 6)

    summary = provisioning.provision_once(rt)

    gpu = [x for x in summary.launches if x.nodepool == "gpu"]
    team = [x for x in summary.launches if x.nodepool == "generalcompute"]
    assert gpu and team and not summary.unschedulable
    for launch in gpu:
        assert launch.instance_type in ("p3.8xlarge", "p3.16xlarge")
        data, image, user_data = template_of(sim, launch)
        assert image.startswith("amazon-eks-gpu-node-1.31-")  # AL2's accelerated image for GPU types
        node = node_of(sim, launch.instance_id)
        assert any(t["key"] == "nvidia.com/gpu" for t in node["spec"].get("taints") or [])
    for launch in team:
        assert launch.instance_type.split(".")[0] in {"m5", "c5", "c5a", "r5"}
        assert node_of(sim, launch.instance_id)["metadata"]["labels"]["billing-team"] == "my-team"
    wait_running(sim, ns, 6, timeout=30)


LIMITED_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: small
spec:
  limits:
    cpu: "2"
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: small}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["c5.large"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: small
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-demo-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
"""


def _pod(ns: str, name: str, cpu: str) -> dict:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}}


def test_a_nodepool_at_its_cpu_limit_launches_nothing_and_says_so(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pools(sim, text=LIMITED_POOL)
    api = sim.kube_api_client()
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "first", "1"))
    wait_pending(sim, ns, 1)
    first = provisioning.provision_once(rt)
    assert [x.instance_type for x in first.launches] == ["c5.large"]
    wait_running(sim, ns, 1)

    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "second", "1"))
    wait_pending(sim, ns, 1)
    calls = len(fleet_calls(sim))
    summary = provisioning.provision_once(runtime_for(sim))

    assert summary.launches == []
    assert len(fleet_calls(sim)) == calls
    assert [(x.scope, x.nodepool) for x in summary.limits] == [("nodepool", "small")]
    [stuck] = summary.unschedulable
    assert stuck.pod == f"{ns}/second" and "limits" in stuck.reason


def test_cluster_wide_limit_blocks_a_launch_and_is_reported(sim: Environment, ns: str) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p", "1"))
    wait_pending(sim, ns, 1)
    calls = len(fleet_calls(sim))

    summary = provisioning.provision_once(runtime_for(sim, cluster_limits={"pricePerHour": "0.001"}))

    assert summary.launches == [] and len(fleet_calls(sim)) == calls
    [limit] = summary.limits
    assert limit.scope == "cluster" and "pricePerHour" in limit.reason
    assert "cluster-wide limit" in summary.unschedulable[0].reason


def test_unschedulable_pod_gets_one_reason_event_per_minute(sim: Environment, rt: Runtime, ns: str) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "huge", "5000"))
    wait_pending(sim, ns, 1)

    first = provisioning.provision_once(rt)
    second = provisioning.provision_once(runtime_for(sim))

    assert first.launches == [] and second.launches == []
    [why] = first.unschedulable
    events = [e for e in pod_events(sim, ns) if e["involvedObject"]["name"] == "huge"]
    assert len(events) == 1
    [event] = events
    assert event["type"] == "Warning" and event["count"] == 1
    assert why.reason in event["message"]


def test_nodepools_as_custom_objects_in_the_cluster(sim: Environment, ns: str) -> None:
    helpers.install_karpenter_crds(sim)
    api = sim.kube_api_client()
    pool, node_class = yaml.safe_load_all(LIMITED_POOL)
    pool["spec"]["limits"]["cpu"] = "100"
    request_json(api, "POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", body=node_class)
    request_json(api, "POST", "/apis/karpenter.sh/v1/nodepools", body=pool)
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p", "1"))
    wait_pending(sim, ns, 1)

    summary = provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",)))

    assert [(x.nodepool, x.instance_type) for x in summary.launches] == [("small", "c5.large")]
    _, image, user_data = template_of(sim, summary.launches[0])
    assert "nodeadm" in user_data or "NodeConfig" in user_data
    wait_running(sim, ns, 1)


def test_bad_nodepool_is_reported_and_valid_pools_still_launch(sim: Environment, rt: Runtime, ns: str) -> None:
    bad = LIMITED_POOL.replace("name: small\nspec:\n  limits", "name: broken\nspec:\n  limits").replace(
        "operator: In, values: [\"c5.large\"]", "operator: Sometimes, values: [\"c5.large\"]")
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml", text=bad)
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p", "1"))
    wait_pending(sim, ns, 1)

    summary = provisioning.provision_once(rt)

    assert any("Sometimes" in e for e in summary.config_errors)
    assert [x.nodepool for x in summary.launches] == ["default"]
    wait_running(sim, ns, 1)


def test_the_lambda_handler_runs_a_poll_pass_and_returns_the_summary(
    sim: Environment, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from nodescale import base_runtime
    from nodescale.aws import clients

    use_settings(sim, monkeypatch)
    monkeypatch.setattr(base_runtime, "_RUNTIMES", {})
    clients.reset()
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p", "1"))
    wait_pending(sim, ns, 1)
    module = load_handler("provisioner")
    context = SimpleNamespace(function_name="provisioner", memory_limit_in_mb=512, aws_request_id="req-1",
                              invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:provisioner",
                              get_remaining_time_in_millis=lambda: 60_000)

    summary = module.handler({"mode": "poll"}, context)

    assert summary["mode"] == "poll" and [x["nodePool"] for x in summary["launches"]] == ["default"]
    assert module.handler({"mode": "sometimes"}, context) == {
        "error": "event field mode='sometimes': allowed are 'watch' and 'poll'"}
    monkeypatch.setattr(base_runtime, "_RUNTIMES", {})
    clients.reset()


def test_an_instance_that_never_registers_is_terminated_after_the_timeout_and_its_pods_planned_again(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    # Only the stuck instance may be in flight: a node an earlier test left on its way out once took one of
    # the two pods under CI's load (the pass placed it there, so only one was planned again).
    wait_for("no capacity left from earlier tests", lambda: not read_world(rt).existing_nodes())
    # A tagged instance whose user data can never join a node (as a broken AMI or bootstrap would).
    ec2 = sim.boto3_client("ec2")
    image = sim.boto3_client("ssm").get_parameter(
        Name="/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id"
    )["Parameter"]["Value"]
    stuck = ec2.run_instances(
        ImageId=image, InstanceType="c6a.2xlarge", MinCount=1, MaxCount=1, UserData="#!/bin/bash\nexit 1\n",
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": CLUSTER_TAG, "Value": sim.cluster}, {"Key": "karpenter.sh/nodepool", "Value": "default"},
        ]}],
    )["Instances"][0]["InstanceId"]
    apply_workloads(sim, ns, "workloads/inflate.yaml", {"inflate": 2})
    wait_pending(sim, ns, 2)

    # Within the timeout the stuck instance counts as capacity on its way: nothing new is launched.
    waiting = provisioning.provision_once(rt)
    assert waiting.launches == [] and waiting.waiting_for_in_flight == 2

    sim.advance(rt.settings.registration_timeout_seconds + 1)
    after = provisioning.provision_once(runtime_for(sim))

    assert stuck in after.registration_timeouts
    state = ec2.describe_instances(InstanceIds=[stuck])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    seen = {"summary": after.to_json(), "nodes": [n["metadata"]["name"] for n in helpers.managed_nodes(sim)],
            "instances": helpers.instance_ids(sim)}
    assert sum(len(x.pods) for x in after.launches) == 2, json.dumps(seen, default=str)  # planned again at once
    wait_running(sim, ns, 2)


TWO_TYPE_POOL = LIMITED_POOL.replace('values: ["c5.large"]', 'values: ["c5.large", "m5.large"]')
HALF_PRICE_M5 = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "half-price-m5"},
    "spec": {
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}],
        "priceAdjustment": "-50%",
    },
}


def _override_types(call: dict) -> list[str]:
    """The instance types of a CreateFleet call's overrides, in the order sent (EC2 Fleet's priority)."""
    params = call["params"]
    keys = [k for k in params if k.startswith("LaunchTemplateConfigs.") and k.endswith(".InstanceType")]

    def order(key: str) -> tuple[int, ...]:
        return tuple(int(p) for p in key.split(".") if p.isdigit())

    return [params[k] for k in sorted(keys, key=order)]


def test_a_nodeoverlay_halving_a_price_makes_that_type_the_first_choice(sim: Environment, ns: str) -> None:
    # Karpenter NodeOverlay docs: priceAdjustment "-50%" on a type makes scheduling see it at half price;
    # c5.large ($0.085) is otherwise cheaper than m5.large ($0.096). The overlay comes from the cluster.
    helpers.install_karpenter_crds(sim)
    api = sim.kube_api_client()
    pool, node_class = yaml.safe_load_all(TWO_TYPE_POOL)
    pool["spec"]["limits"]["cpu"] = "100"
    request_json(api, "POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", body=node_class)
    request_json(api, "POST", "/apis/karpenter.sh/v1/nodepools", body=pool)
    request_json(api, "POST", "/apis/karpenter.sh/v1alpha1/nodeoverlays", body=HALF_PRICE_M5)
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, "p", "1"))
    wait_pending(sim, ns, 1)
    before = len(fleet_calls(sim))

    # #31.5: without the NodeOverlay gate (off by default, as in Karpenter) the overlay is not read: c5.large first.
    (ignored,) = provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",)), dry_run=True).planned
    assert ignored.instance_types[0] == "c5.large", ignored
    summary = provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",),
                                                      feature_gates=FeatureGates(node_overlay=True)))

    (launch,) = summary.launches
    assert launch.instance_types[0] == "m5.large", launch
    assert _override_types(fleet_calls(sim)[before])[0] == "m5.large"


def test_pods_asking_for_one_host_port_get_a_node_each_and_all_run(sim: Environment, rt: Runtime, ns: str) -> None:
    """Karpenter's "should schedule pods with the same host port to different nodes", end to end: sim's
    scheduler, like kube-scheduler's NodePorts filter, would leave a second pod of a node Pending."""
    put_pools(sim, "karpenter-v1alpha5/default-spot.yaml")
    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"]["namespace"] = ns
    doc["spec"]["replicas"] = 3
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"] = {"cpu": "100m", "memory": "64Mi"}
    container["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    request_json(sim.kube_api_client(), "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)
    wait_pending(sim, ns, 3)
    # The test is about this pass's nodes: what an earlier test left (a node or instance on its way out, which
    # the pass would count as in flight) must be gone first. Under CI's load it once was not (waitingForInFlight 1).
    wait_for("no capacity left from earlier tests", lambda: not read_world(rt).existing_nodes())

    summary = provisioning.provision_once(rt)

    # The whole summary and the world it saw on failure: this test has failed once under CI's load.
    seen = {"summary": summary.to_json(), "nodes": [n["metadata"]["name"] for n in helpers.managed_nodes(sim)],
            "instances": helpers.instance_ids(sim)}
    assert sorted(len(x.pods) for x in summary.launches) == [1, 1, 1], json.dumps(seen, default=str)
    running = wait_running(sim, ns, 3)
    assert len({p["spec"]["nodeName"] for p in running}) == 3
    assert provisioning.provision_once(rt).launches == []
