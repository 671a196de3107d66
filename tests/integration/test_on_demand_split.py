"""A spot/on-demand split per NodePool (nodescale.io/on-demand-min-percent, aws/karpenter-provider-aws#331)
on sim: launches keep at least that share of the pool's instances on-demand, and emptiness removes spot
nodes before it would break the minimum."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from nodescale import clock
from nodescale.k8s.listing import is_provisionable
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.scheduling.capacity_split import required_on_demand
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt.summary import EventSummary
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.provision.launch import Launch
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import instance_ids, managed_nodes, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("split")
sim = helpers.emptied_environment_fixture(node_timeout=40)
ns = helpers.namespace_fixture()

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: mixed
  annotations:
    nodescale.io/on-demand-min-percent: "30"
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets:
      - nodes: "100%"
""" + helpers.DEMO_NODECLASS


def _pod(ns: str, i: int) -> dict:
    # 1.5 vCPU: one pod per m5.large (2 vCPU, about 1.93 allocatable), so ten pods are ten nodes' worth.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                                     "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}]}}


def _deployment(ns: str, replicas: int) -> dict:
    """The same pods, recreated when evicted (an interruption moves them)."""
    pod = _pod(ns, 0)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod["spec"]}}}


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def instance_lifecycles(sim: Environment) -> dict[str, str]:
    """Instance id -> "spot" or "on-demand", as EC2 says (what was really launched)."""
    found = sim.boto3_client("ec2").describe_instances(InstanceIds=instance_ids(sim))["Reservations"]
    return {i["InstanceId"]: i.get("InstanceLifecycle", "on-demand") for r in found for i in r["Instances"]}


def test_a_30_percent_pool_launches_three_on_demand_of_ten_and_empties_nodes_without_breaking_it(sim: Environment, ns: str) -> None:
    put_pool(sim, POOL)
    rt = helpers.runtime_for(sim, registration_timeout_seconds=10.0**6)
    api = sim.kube_api_client()
    for i in range(10):
        request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, i))
    wait_for("10 unschedulable pods", lambda: len([p for p in helpers.pods(sim, ns)
                                                   if any(c.get("reason") == "Unschedulable"
                                                          for c in (p.get("status") or {}).get("conditions") or [])]) == 10)

    summary = provisioning.provision_once(rt)
    assert len(summary.launches) == 10, summary
    by_type = sorted(x.capacity_type for x in summary.launches)
    assert by_type.count("on-demand") == 3 and by_type.count("spot") == 7, by_type
    assert sorted(instance_lifecycles(sim).values()).count("on-demand") == 3, "EC2 launched three on-demand"
    wait_for("ten Ready nodes", lambda: len([n for n in managed_nodes(sim) if _ready(n)]) == 10, timeout=60)
    wait_for("the pods to run", lambda: len([p for p in helpers.pods(sim, ns)
                                             if (p.get("status") or {}).get("phase") == "Running"]) == 10, timeout=60)

    # The pods go: emptiness (100% budget) removes empty nodes one after another while at least 30% of
    # the nodes left are on-demand; the on-demand node whose removal would break that is refused.
    for pod in helpers.pods(sim, ns):
        helpers.delete_quietly(api, f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}",
                               body={"gracePeriodSeconds": 0})
    wait_for("the pods to go", lambda: not helpers.pods(sim, ns))
    lifecycle = instance_lifecycles(sim)
    types = {n["metadata"]["name"]: lifecycle[n["spec"]["providerID"].rsplit("/", 1)[-1]] for n in managed_nodes(sim)}
    first = disrupting.disrupt_once(rt)  # marks the nodes empty
    assert first["decisions"] == []
    sim.advance(60)
    time.sleep(0.3)
    run = disrupting.disrupt_once(rt)
    removed = {n for d in run["decisions"] for n in d["nodes"]}
    kept = [types[n] for n in types if n not in removed]
    split_refusals = [r for r in run["refused"] if r["blockedBy"] == "capacity-split"]
    assert split_refusals and all("30% of its nodes off spot" in r["why"] for r in split_refusals)
    assert {n for r in split_refusals for n in r["nodes"]} == {n for n in types if n not in removed}
    assert kept and kept.count("on-demand") >= required_on_demand(30, len(kept)), kept
    assert all(types[n] == "spot" for n in removed) or kept.count("on-demand") == len(kept)


HALF_POOL = POOL.replace('"30"', '"50"')
EVENTS = helpers.ROOT / "tests" / "fixtures" / "events"
SAMPLE_ID = "i-0a1b2c3d4e5f60718"


def _event(sim: Environment, sample: str, instance_id: str) -> dict:
    ev = json.loads((EVENTS / sample).read_text().replace(SAMPLE_ID, instance_id))
    ev["id"] = str(uuid.uuid4())
    now = clock.format_timestamp(clock.parse_timestamp(sim.clock()["now"]))
    ev["time"] = now
    if ev.get("source") == "aws.health":
        ev["detail"]["startTime"] = now.replace("Z", "+00:00")
    return ev


def _replacement(rt: Runtime, ev: dict) -> Launch:
    summary = entry.process(ev, rt.settings, lambda: rt, account="123456789012",
                                   deadline_monotonic=time.monotonic() + 60)
    assert isinstance(summary, EventSummary), summary
    (report,) = summary.instances
    assert report.replacement is not None, report
    launched = report.replacement.launched
    assert len(launched) == 1, report
    (launch,) = launched
    return launch


def test_replacements_after_an_interruption_keep_the_split(sim: Environment, ns: str) -> None:
    # 50%: one on-demand and one spot node. The spot node's replacement may be spot (1 of 2 stays on-demand);
    # the on-demand node's replacement must be on-demand (the spot node alone would be 0 of 2).
    put_pool(sim, HALF_POOL)
    rt = helpers.runtime_for(sim, registration_timeout_seconds=10.0**6)
    api = sim.kube_api_client()
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=_deployment(ns, 2))
    wait_for("2 unschedulable pods", lambda: len([p for p in helpers.pods(sim, ns) if is_provisionable(p)]) == 2)
    launches = provisioning.provision_once(rt).launches
    assert sorted(x.capacity_type for x in launches) == ["on-demand", "spot"]
    wait_for("two Ready nodes", lambda: len([n for n in managed_nodes(sim) if _ready(n)]) == 2, timeout=60)
    # Each pod on its node before the warning: a Ready node may still carry karpenter.sh/unregistered, and a
    # warning for a node not yet holding its pod has nothing to move (seen under CI's load).
    wait_for("both pods running", lambda: len([p for p in helpers.pods(sim, ns)
                                               if (p.get("status") or {}).get("phase") == "Running"]) == 2, timeout=60)
    by_type = {x.capacity_type: x.instance_id for x in launches}

    spot_replacement = _replacement(rt, _event(sim, "spot-interruption-warning.json", by_type["spot"]))
    assert spot_replacement.capacity_type == "spot"
    # The moved pod runs on its replacement before the next notice, so no room is left for the next one.
    wait_for("both pods running", lambda: len([p for p in helpers.pods(sim, ns)
                                               if (p.get("status") or {}).get("phase") == "Running"]) == 2, timeout=60)
    od_replacement = _replacement(rt, _event(sim, "health-scheduled-change.json", by_type["on-demand"]))
    assert od_replacement.capacity_type == "on-demand"
