"""A cluster with no nodes at all (no node group, no Fargate profile) gets its system pods running from a NodePool.

sim starts as EKS hands over a new cluster: an API server and nothing to run pods on. The administrator
applies the workloads EKS installs (`tests/fixtures/addons/eks-addons.yaml`: CoreDNS, the aws-node and
kube-proxy DaemonSets, metrics-server) and one NodePool (`karpenter-v1/system.yaml`, the shape
docs/deploy.md recommends); one provisioner run as the functions must be enough for every system pod to
run, the DaemonSets' pods counted on the very first nodes. The wall time from the add-ons applied to
CoreDNS Running is printed (`pytest -s`): the figure docs/figures.md quotes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import yaml

from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, ROOT, put_pool, wait_for

pytestmark = pytest.mark.integration

ADDONS = ROOT / "tests" / "fixtures" / "addons" / "eks-addons.yaml"
SYSTEM_POOL = EXAMPLES / "karpenter-v1" / "system.yaml"
KUBE_SYSTEM = "kube-system"
DAEMONSETS = ("aws-node", "kube-proxy")
DEPLOYMENTS = {"coredns": 2, "metrics-server": 2}
COLLECTIONS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
}
# A pool as teams write them for their own workloads: every node tainted. CoreDNS does not tolerate it.
TAINTED_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: batch
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: batch}
      taints:
        - {key: dedicated, value: batch, effect: NoSchedule}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: batch
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo-cluster}}]
"""


env = helpers.environment_fixture("from-zero")
rt = helpers.runtime_fixture()


@pytest.fixture
def sim(env: Environment) -> Any:
    yield env
    remove_addons(env)
    helpers.empty(env, node_timeout=20)


# ------------------------------------------------------------------------------------------- helpers


def addon_documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(ADDONS.read_text()) if d]


def apply_addons(sim: Environment) -> None:
    """`kubectl apply -f tests/fixtures/addons/eks-addons.yaml` as the administrator (create, or keep)."""
    api = sim.kube_api_client()
    for doc in addon_documents():
        path = COLLECTIONS[doc["kind"]].format(ns=doc["metadata"]["namespace"])
        if not request_json(api, "GET", path, query={"fieldSelector": f"metadata.name={doc['metadata']['name']}"})[
                "items"]:
            request_json(api, "POST", path, body=doc)


def remove_addons(sim: Environment) -> None:
    api = sim.kube_api_client()
    for doc in addon_documents():
        path = COLLECTIONS[doc["kind"]].format(ns=doc["metadata"]["namespace"])
        helpers.delete_quietly(api, f"{path}/{doc['metadata']['name']}")
    for pod in system_pods(sim):
        helpers.delete_quietly(api, f"/api/v1/namespaces/{KUBE_SYSTEM}/pods/{pod['metadata']['name']}",
                               body={"gracePeriodSeconds": 0})
    wait_for("the add-ons' pods to go", lambda: not system_pods(sim), timeout=20)


def nodes(sim: Environment) -> list[dict[str, Any]]:
    return request_json(sim.kube_api_client(), "GET", "/api/v1/nodes").get("items") or []


def system_pods(sim: Environment) -> list[dict[str, Any]]:
    return request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{KUBE_SYSTEM}/pods").get("items") or []


def running(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") == "Running"


def app_of(pod: dict[str, Any]) -> str:
    """The Deployment or DaemonSet a pod belongs to (its name less the generated suffixes)."""
    [owner] = pod["metadata"]["ownerReferences"]
    return owner["name"] if owner["kind"] == "DaemonSet" else owner["name"].rsplit("-", 1)[0]


def coredns_running(sim: Environment) -> bool:
    return sum(1 for p in system_pods(sim) if app_of(p) == "coredns" and running(p)) == DEPLOYMENTS["coredns"]


def everything_running(sim: Environment) -> list[dict[str, Any]] | None:
    """Every Deployment replica and one pod of each DaemonSet per node, all Running; else None."""
    pods, node_names = system_pods(sim), {n["metadata"]["name"] for n in nodes(sim)}
    if not node_names or not all(running(p) for p in pods):
        return None
    for name, replicas in DEPLOYMENTS.items():
        if sum(1 for p in pods if app_of(p) == name) != replicas:
            return None
    for name in DAEMONSETS:
        if sorted(p["spec"]["nodeName"] for p in pods if app_of(p) == name) != sorted(node_names):
            return None
    return pods


def wait_pending(sim: Environment) -> None:
    wait_for("the add-ons' pods to wait for a node", lambda: sum(
        1 for p in system_pods(sim) if is_provisionable(p)) == sum(DEPLOYMENTS.values()))


def status_cli(sim: Environment) -> dict[str, Any]:
    """`nodescale status -o json` in a shell that sourced DIR/env, as an operator runs it."""
    env = {**os.environ, **sim.env, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/nodescale/python")])}
    done = subprocess.run([sys.executable, "-m", "nodescale.cli", "status", "-o", "json"], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --------------------------------------------------------------------------------------------- tests


def test_empty_cluster_gets_every_system_pod_running_from_one_nodepool(sim: Environment, rt: Runtime) -> None:
    assert not nodes(sim), "sim must start as EKS hands a cluster over: without a single node"
    started = time.monotonic()
    apply_addons(sim)
    put_pool(sim, SYSTEM_POOL.read_text(), "system")
    wait_pending(sim)
    pending = time.monotonic() - started

    summary = provisioning.provision_once(rt)

    launched = time.monotonic() - started
    launches = summary.launches
    assert launches and not summary.unschedulable
    assert {x.nodepool for x in launches} == {"system"} and {x.capacity_type for x in launches} == {"on-demand"}
    assert sorted(p.split("/")[1].rsplit("-", 2)[0] for x in launches for p in x.pods) == sorted(
        name for name, replicas in DEPLOYMENTS.items() for _ in range(replicas))
    wait_for("CoreDNS to run", lambda: coredns_running(sim), timeout=30)
    to_coredns = time.monotonic() - started
    pods = wait_for("every system pod to run", lambda: everything_running(sim), timeout=30)
    print(f"\nempty cluster to CoreDNS Running: {to_coredns:.1f} s wall (add-ons pending at {pending:.1f} s, "
          f"launched at {launched:.1f} s; {len(launches)} node(s): {', '.join(x.instance_type for x in launches)})")

    # The DaemonSets were counted on the first nodes: every pod fits where it was planned, nothing is left.
    assert {p["spec"]["nodeName"] for p in pods} == {n["metadata"]["name"] for n in nodes(sim)}
    assert len(nodes(sim)) == len(launches)
    again = provisioning.provision_once(rt)
    assert not again.launches and not again.unschedulable

    status = status_cli(sim)
    assert status["totals"]["nodes"] == len(launches) and status["totals"]["pendingPods"] == 0
    assert {g["nodePool"] for g in status["groups"]} == {"system"}
    assert sorted(n["name"] for n in status["nodes"]) == sorted(n["metadata"]["name"] for n in nodes(sim))


def test_pools_that_taint_every_node_leave_coredns_pending_until_a_system_pool_is_added(
    sim: Environment, rt: Runtime
) -> None:
    assert not nodes(sim)
    apply_addons(sim)
    put_pool(sim, TAINTED_POOL, "batch")
    wait_pending(sim)

    summary = provisioning.provision_once(rt)

    assert not summary.launches
    stuck = {u.pod.split("/")[1].rsplit("-", 2)[0] for u in summary.unschedulable}
    assert stuck == set(DEPLOYMENTS)
    assert any("dedicated" in u.reason for u in summary.unschedulable), summary.unschedulable
    assert status_cli(sim)["totals"]["pendingPods"] == sum(DEPLOYMENTS.values())

    # The fix docs/deploy.md gives: a small untainted pool for the system pods beside the tainted ones.
    put_pool(sim, SYSTEM_POOL.read_text(), "system")
    fixed = provisioning.provision_once(rt)

    assert {x.nodepool for x in fixed.launches} == {"system"} and not fixed.unschedulable
    wait_for("every system pod to run", lambda: everything_running(sim), timeout=30)


def test_the_addon_fixture_is_what_eks_installs() -> None:
    """The manifests keep the scheduling constraints EKS ships them with (what makes the scenario real)."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in addon_documents()}
    coredns = docs["Deployment", "coredns"]["spec"]["template"]["spec"]
    assert coredns["priorityClassName"] == "system-cluster-critical"
    assert {t["key"] for t in coredns["tolerations"]} == {"CriticalAddonsOnly", "node-role.kubernetes.io/control-plane"}
    [term] = coredns["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        "kubernetes.io/os": ["linux"], "kubernetes.io/arch": ["amd64", "arm64"]}
    for name in DAEMONSETS:
        spec = docs["DaemonSet", name]["spec"]["template"]["spec"]
        assert spec["tolerations"] == [{"operator": "Exists"}] and spec["priorityClassName"] == "system-node-critical"
