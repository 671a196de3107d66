"""`nodescale status` and `nodescale explain` on `sim/`: one scene, read the way an operator reads it.

The module starts its own environment and builds one scene: the default spot NodePool, three
`inflate` pods running on capacity the provisioner launched, one node of them being drained, and
pending pods of every kind (too big for any type, one a new node would take, one for another
scheduler). The CLI runs as a subprocess with the environment's settings, as a shell would.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodescale.clock import CLOCK_URL
from nodescale.k8s import nodes as k8s_nodes
from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import explain as explaining
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.status import DISRUPTION_REASON_ANNOTATION, read_status
from sim.environment import Environment
from tests.integration.helpers import Registrar, runtime_for, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
NS = "team-a"
CLUSTER_LIMITS = {"cpu": "100", "pricePerHour": "50"}


# A second SSM parameter: a pool whose node class's subnet selector matches no subnet (tainted, so no pod of
# the scene is planned onto it), and a pool refused because its node class is not defined.
BROKEN = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: nosubnets}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: nosubnets}
      taints: [{key: broken, effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: nosubnets}
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: no-such-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: orphan}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
      taints: [{key: broken, effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
"""


def pods(env: Environment) -> list[dict]:
    return request_json(env.kube_api_client(), "GET", f"/api/v1/namespaces/{NS}/pods").get("items") or []


def pod(name: str, cpu: str, **spec: Any) -> dict:
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                     **spec}}


@dataclasses.dataclass
class Scene:
    env: Environment
    rt: Runtime
    launches: list[dict]
    drained: str  # the node carrying the disruption taint
    on_drained: list[str]  # inflate pods bound to it


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    env = Environment(tmp_path_factory.mktemp("status-sim"), ready_delay=1.0)
    env.start()
    patch = pytest.MonkeyPatch()
    patch.setenv(CLOCK_URL, env.env[CLOCK_URL])
    # The deployed provisioner's watch registers nodes as they join (#30.4).
    registrar = Registrar(env).start()
    try:
        api = env.kube_api_client()
        path = env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
        env.boto3_client("ssm").put_parameter(
            Name=f"{path}/default", Value=(EXAMPLES / "karpenter-v1alpha5/default-spot.yaml").read_text(),
            Type="String", Overwrite=True)
        env.boto3_client("ssm").put_parameter(Name=f"{path}/broken", Value=BROKEN, Type="String", Overwrite=True)
        request_json(api, "POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        doc = yaml.safe_load((EXAMPLES / "workloads/inflate.yaml").read_text())
        doc["metadata"]["namespace"] = NS
        doc["spec"]["replicas"] = 3
        request_json(api, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", body=doc)
        wait_for("3 unschedulable pods", lambda: sum(map(is_provisionable, pods(env))) == 3)
        rt = runtime_for(env, cluster_limits=CLUSTER_LIMITS)
        launches = provisioning.provision_once(rt).launches
        running = wait_for("3 running pods", lambda: len(
            found := [p for p in pods(env) if p["status"].get("phase") == "Running"]) == 3 and found)

        # Pods that stay pending: no type is that big; one a new node would take (the scheduler gave
        # up on it, nothing was launched yet); one for a scheduler nodescale does not serve.
        request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods", body=pod("huge", "5000"))
        request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods", body=pod("big", "30"))
        request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods",
                     body=pod("custom", "1", schedulerName="my-scheduler"))
        wait_for("huge and big to be unschedulable", lambda: {
            p["metadata"]["name"] for p in pods(env) if is_provisionable(p)} == {"huge", "big"})

        drained = running[0]["spec"]["nodeName"]
        k8s_nodes.mark_disrupted(api, drained)
        k8s_nodes.patch_metadata(api, drained, annotations={DISRUPTION_REASON_ANNOTATION: "Empty"})
        on_drained = sorted(f"{NS}/{p['metadata']['name']}" for p in running if p["spec"]["nodeName"] == drained)
        yield Scene(env, rt, launches, drained, on_drained)
    finally:
        registrar.close()
        patch.undo()
        env.stop()


def cli(scene: Scene, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **scene.env.env, "NODESCALE_CLUSTER_LIMITS": json.dumps(CLUSTER_LIMITS),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/nodescale/python")])}
    return subprocess.run([sys.executable, "-m", "nodescale.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def status_json(scene: Scene) -> dict:
    done = cli(scene, "status", "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ---------------------------------------------------------------------------------------------- status


def test_status_counts_nodes_by_pool_capacity_type_and_zone_with_catalog_prices(
    scene: Scene, status_json: dict
) -> None:
    world_status = read_status(scene.rt)
    by_name = {n.name: n for n in world_status.nodes}
    nodes = status_json["nodes"]
    launched = {x.instance_id: x for x in scene.launches}
    assert len(nodes) == len(launched) and status_json["totals"]["nodes"] == len(launched)
    for n in nodes:
        assert (n["nodePool"], n["capacityType"]) == ("default", "spot")
        assert n["state"] == ("Draining" if n["name"] == scene.drained else "Ready")
        # the price a person sees is the catalog's for the node's type, zone and capacity type
        assert n["pricePerHour"] > 0
        assert n["pricePerHour"] == pytest.approx(by_name[n["name"]].price, abs=1e-6)
    assert sorted((n["instanceType"], n["zone"]) for n in nodes) == sorted(
        (x.instance_type, x.zone) for x in launched.values())
    assert sum(x.price for x in launched.values()) == pytest.approx(status_json["totals"]["pricePerHour"], abs=1e-4)
    groups = status_json["groups"]
    assert sum(g["nodes"] for g in groups) == len(nodes)
    assert {(g["nodePool"], g["capacityType"], g["zone"]) for g in groups} == {
        (n["nodePool"], n["capacityType"], n["zone"]) for n in nodes}


def test_status_utilization_is_requests_over_allocatable(scene: Scene, status_json: dict) -> None:
    api = scene.env.kube_api_client()
    all_pods = request_json(api, "GET", "/api/v1/pods")["items"]
    for n in status_json["nodes"]:
        node = request_json(api, "GET", f"/api/v1/nodes/{n['name']}")
        on_node = [p for p in all_pods if p["spec"].get("nodeName") == n["name"]]
        # inflate asks for 1 cpu a pod; nothing else runs on these nodes in this scene
        assert n["cpu"]["requested"] == pytest.approx(float(len(on_node)))
        alloc = node["status"]["allocatable"]["cpu"]
        cores = int(alloc[:-1]) / 1000 if alloc.endswith("m") else float(alloc)
        assert n["cpu"]["allocatable"] == pytest.approx(cores)
        assert n["cpu"]["utilization"] == pytest.approx(len(on_node) / cores, abs=1e-3)
    assert status_json["totals"]["cpu"]["requested"] == pytest.approx(3.0)


def test_status_says_why_each_pending_pod_waits(scene: Scene, status_json: dict) -> None:
    pending = {p["pod"]: p for p in status_json["pending"]}
    assert set(pending) == {f"{NS}/huge", f"{NS}/big", f"{NS}/custom"}
    huge, big, custom = pending[f"{NS}/huge"], pending[f"{NS}/big"], pending[f"{NS}/custom"]
    assert huge["verdict"] == "unschedulable" and "no instance type has room" in huge["message"]
    assert huge["schedulerMessage"]  # what kube-scheduler said is kept next to nodescale's reason
    assert big["verdict"] == "new-node" and big["nodePool"] == "default"
    assert big["instanceTypes"] and big["capacityTypes"] == ["spot"] and big["zones"]
    assert custom["verdict"] == "not-provisionable" and "my-scheduler" in custom["message"]


def test_status_lists_the_drain_under_way_with_the_pods_left(scene: Scene, status_json: dict) -> None:
    [drain] = status_json["drains"]
    assert drain["node"] == scene.drained and drain["nodePool"] == "default"
    assert drain["reason"] == "Empty" and drain["since"]
    assert drain["podsRemaining"] == len(scene.on_drained) and drain["pods"] == scene.on_drained


def test_status_shows_nodepool_and_cluster_wide_limits(scene: Scene, status_json: dict) -> None:
    limits = {(x["scope"], x["resource"]): x for x in status_json["limits"]}
    pool_cpu = limits[("default", "cpu")]
    assert pool_cpu["limit"] == 1000
    capacity = sum(float(request_json(scene.env.kube_api_client(), "GET", f"/api/v1/nodes/{n['name']}")
                         ["status"]["capacity"]["cpu"]) for n in status_json["nodes"])
    assert pool_cpu["used"] == pytest.approx(capacity)
    assert limits[("cluster", "cpu")]["limit"] == 100 and limits[("cluster", "cpu")]["used"] == pytest.approx(capacity)
    price = limits[("cluster", "pricePerHour")]
    assert price["limit"] == 50 and price["used"] == pytest.approx(status_json["totals"]["pricePerHour"], abs=1e-4)


def test_status_text_is_aligned_tables(scene: Scene) -> None:
    done = cli(scene, "status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Cluster demo-cluster at ") and "pending pods" in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("NODEPOOL  CAPACITY  ZONE"))
    row = lines[header + 1]
    # each column starts where its header does
    for word in ("CAPACITY", "ZONE"):
        start = lines[header].index(word)
        assert row[start - 2:start] == "  " and row[start] != " "
    assert any(line.startswith(f"{NS}/huge") and "unschedulable" in line for line in lines)
    assert any(line.startswith(scene.drained) and "Empty" in line for line in lines)


def test_status_with_unusable_settings_is_one_line_and_exit_2(scene: Scene) -> None:
    env = {**os.environ, **scene.env.env, "NODESCALE_CLUSTER_LIMITS": "{\"gpus\": 3}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/nodescale/python")])}
    done = subprocess.run([sys.executable, "-m", "nodescale.cli", "status"], capture_output=True, text=True,
                          env=env, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "NODESCALE_CLUSTER_LIMITS" in done.stderr
    assert "Traceback" not in done.stderr


def _conds(entry: dict) -> dict[str, dict]:
    return {c["type"]: c for c in entry["status"]["conditions"]}


def test_status_shows_an_ssm_pool_and_its_node_class_as_karpenter_would(scene: Scene, status_json: dict) -> None:
    """#30.2: a pool from SSM parameters reports through `nodescale status -o json` what Karpenter writes on a
    NodePool (node count and resources after a launch, Ready) and its node class's resolved subnets, security
    groups, AMIs and instance profile (kubernetes-sigs/karpenter pkg/controllers/nodepool/counter/suite_test.go
    "Counter"; aws/karpenter-provider-aws pkg/controllers/nodeclass/subnet_test.go "NodeClass Subnet Status
    Provider" / "should resolve a valid selectors for Subnet by tags")."""
    [pool] = [p for p in status_json["nodePools"] if p["name"] == "default"]
    assert pool["kind"] == "Provisioner" and pool["source"].startswith("ssm:")
    assert pool["status"]["resources"]["nodes"] == str(len(scene.launches))
    assert _conds(pool)["Ready"]["status"] == "True" and _conds(pool)["NodeClassReady"]["status"] == "True"
    [nc] = [c for c in status_json["nodeClasses"] if c["name"] == "default"]
    ec2 = scene.env.boto3_client("ec2")
    tagged = [{"Name": "tag:karpenter.sh/discovery", "Values": ["demo-cluster"]}]
    subnets = {s["SubnetId"] for s in ec2.describe_subnets(Filters=tagged)["Subnets"]}
    groups = {g["GroupId"] for g in ec2.describe_security_groups(Filters=tagged)["SecurityGroups"]}
    assert {s["id"] for s in nc["status"]["subnets"]} == subnets and subnets
    assert {g["id"] for g in nc["status"]["securityGroups"]} == groups and groups
    launched_images = {i["ImageId"] for r in ec2.describe_instances(
        InstanceIds=[x.instance_id for x in scene.launches])["Reservations"] for i in r["Instances"]}
    assert launched_images <= {a["id"] for a in nc["status"]["amis"]}
    assert nc["status"]["instanceProfile"]
    assert all(c["status"] == "True" for c in nc["status"]["conditions"])


def test_status_shows_why_a_broken_ssm_node_class_is_not_ready(scene: Scene, status_json: dict) -> None:
    """#30.2: a node class whose subnet selector matches nothing shows SubnetsReady False with its reason and
    message, and its pool NodeClassReady False; a pool refused for a node class that is not defined shows it too
    (aws/karpenter-provider-aws pkg/controllers/nodeclass/subnet_test.go "should not resolve a invalid
    selectors for Subnet"; kubernetes-sigs/karpenter pkg/controllers/nodepool/readiness/suite_test.go
    "should have status condition on nodePool as not ready if nodeClass is not ready")."""
    [nc] = [c for c in status_json["nodeClasses"] if c["name"] == "nosubnets"]
    subnets = _conds(nc)["SubnetsReady"]
    assert (subnets["status"], subnets["reason"]) == ("False", "SubnetsNotFound")
    assert "subnetSelectorTerms" in subnets["message"] and "subnets" not in nc["status"]
    assert _conds(nc)["Ready"]["status"] == "False" and "SubnetsReady" in _conds(nc)["Ready"]["message"]
    assert _conds(nc)["SecurityGroupsReady"]["status"] == "True"
    [pool] = [p for p in status_json["nodePools"] if p["name"] == "nosubnets"]
    assert _conds(pool)["NodeClassReady"]["status"] == "False" and _conds(pool)["Ready"]["status"] == "False"
    assert pool["status"]["resources"]["nodes"] == "0"
    [orphan] = [p for p in status_json["nodePools"] if p["source"].startswith("ssm:") and p["name"] == ""]
    assert '"missing"' in _conds(orphan)["NodeClassReady"]["message"]
    assert _conds(orphan)["NodeClassReady"]["status"] == "False"


def test_status_text_shows_pool_and_node_class_status(scene: Scene) -> None:
    """#30.2: the text output has a row per pool and node class and each failing condition with its message."""
    done = cli(scene, "status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["NODEPOOL", "SOURCE"])
    assert any(line.startswith("provisioner/default") and line.endswith("True") for line in lines[header:])
    assert any(line.startswith("  ec2nodeclass/nosubnets: SubnetsReady False (SubnetsNotFound): ")
               for line in lines)
    assert any(line.startswith("nodepool/nosubnets") and line.endswith("False") for line in lines[header:])


# --------------------------------------------------------------------------------------------- explain


def test_explain_an_unschedulable_pod_gives_the_bin_packers_reason(scene: Scene) -> None:
    fate = explaining.explain(scene.rt, NS, "huge")
    provisioner = provisioning.provision_once(scene.rt, dry_run=True)
    [why] = [u.reason for u in provisioner.unschedulable if u.pod == f"{NS}/huge"]
    assert fate.verdict == "unschedulable" and fate.message == f"unschedulable: {why}"


def test_explain_a_pod_a_new_node_would_take_names_pool_types_and_zones(scene: Scene) -> None:
    done = cli(scene, "explain", "big", "-n", NS, "-o", "json")
    assert done.returncode == 0, done.stderr
    fate = json.loads(done.stdout)
    planned = provisioning.provision_once(scene.rt, dry_run=True).planned
    [claim] = [c for c in planned if f"{NS}/big" in c.pods]
    assert fate["verdict"] == "new-node" and fate["nodePool"] == claim.nodepool == "default"
    assert fate["instanceTypes"][:10] == claim.instance_types[:10]
    assert fate["zones"] == claim.zone.split(",") and fate["capacityTypes"] == ["spot"]


def test_explain_a_bound_pod_and_a_pod_of_another_scheduler(scene: Scene) -> None:
    [name] = scene.on_drained[:1]
    bound = explaining.explain(scene.rt, NS, name.split("/")[1])
    assert bound.verdict == "bound" and bound.node == scene.drained
    done = cli(scene, "explain", f"{NS}/custom")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{NS}/custom: not for nodescale: it is scheduled by my-scheduler")
    assert "Verdict:        not-provisionable" in done.stdout


def test_explain_an_unknown_pod_is_one_line_and_exit_2(scene: Scene) -> None:
    done = cli(scene, "explain", "nope", "-n", NS)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"nodescale explain: no pod 'nope' in namespace '{NS}'\n"
