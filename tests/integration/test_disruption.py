"""The disruption function on `sim/`, on simulated time: emptiness, consolidation, budgets, drift, leaks.

Capacity comes from the provisioner's own code (NodePools in SSM, Deployments in the API); time is
the environment's clock, which the product reads through NODESCALE_CLOCK_URL, so a 30-second TTL
takes a clock advance, not a sleep.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from nodescale import cli
from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.disrupt.state import RunState
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import (
    EXAMPLES,
    delete_quietly,
    fresh_clients,
    instance_ids,
    instance_state,
    managed_nodes,
    pods,
    put_pool,
    use_settings,
    wait_for,
)

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------------------------------ fixtures

env = helpers.environment_fixture("disruption")
sim = helpers.emptied_environment_fixture()
ns = helpers.namespace_fixture()


def runtime_for(sim: Environment, **changes: Any) -> Runtime:
    # moto stamps LaunchTime with the real clock while these tests move the simulated one ahead, so a
    # fresh instance would look older than the registration timeout; the leak test has its own module.
    changes.setdefault("registration_timeout_seconds", 10.0**6)
    return helpers.runtime_for(sim, **changes)


@pytest.fixture
def rt(sim: Environment) -> Runtime:
    return runtime_for(sim)


# ------------------------------------------------------------------------------------------- helpers


def deployment(sim: Environment, ns: str, name: str, replicas: int, cpu: str, annotations: dict | None = None,
               anti_affinity: bool = False, node_selector: dict | None = None) -> None:
    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": ns}
    doc["spec"]["replicas"] = replicas
    doc["spec"]["selector"] = {"matchLabels": {"app": name}}
    template = doc["spec"]["template"]
    template["metadata"] = {"labels": {"app": name}, "annotations": annotations or {}}
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    if node_selector:
        template["spec"]["nodeSelector"] = node_selector
    if anti_affinity:
        template["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    request_json(sim.kube_api_client(), "POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body=doc)


def scale(sim: Environment, ns: str, name: str, replicas: int) -> None:
    request_json(sim.kube_api_client(), "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/{name}",
                 body={"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)


def running(sim: Environment, ns: str) -> list[dict]:
    return [p for p in pods(sim, ns) if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def provision_until_running(sim: Environment, rt: Runtime, ns: str, count: int, seconds: float = 40) -> None:
    """Launch for the pending pods and let the nodes come up until ``count`` pods run."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(running(sim, ns)) >= count:
            return
        provisioning.provision_once(rt)
        sim.advance(2)
        time.sleep(0.5)
    raise AssertionError(f"{count} pods never ran in {ns}: {[p['status'].get('phase') for p in pods(sim, ns)]}")


def node_events(sim: Environment, node: str) -> list[dict]:
    items = request_json(sim.kube_api_client(), "GET", "/api/v1/namespaces/default/events").get("items") or []
    return [e for e in items if e["involvedObject"].get("name") == node and e["source"]["component"] == "nodescale"]


def settle(sim: Environment, rt: Runtime, runs: int = 8, advance: float = 5.0) -> list[dict]:
    """Disruption runs with time between them, until nothing is under way; returns their summaries."""
    out = []
    for _ in range(runs):
        summary = disrupting.disrupt_once(rt)
        out.append(summary)
        busy = summary["decisions"] or summary["waitingForReplacement"] or [
            t for t in summary["terminations"] if t["state"] != "terminated"]
        if not busy:
            break
        sim.advance(advance)
        time.sleep(0.7)  # the kubelet and the scheduler catch up (they poll in real time)
    return out


SPOT_TTL_POOL = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()


# --------------------------------------------------------------------------------------------- tests


def test_empty_node_goes_about_30_simulated_seconds_after_it_empties_not_before(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pool(sim, SPOT_TTL_POOL)
    deployment(sim, ns, "inflate", 5, "1")
    provision_until_running(sim, rt, ns, 5)
    nodes = {n["metadata"]["name"] for n in managed_nodes(sim)}
    launched = set(instance_ids(sim))
    assert nodes and launched

    scale(sim, ns, "inflate", 0)
    wait_for("the pods to go", lambda: not pods(sim, ns))
    first = disrupting.disrupt_once(rt)
    emptied_at = sim.clock()["now"]
    assert first["decisions"] == []
    marked = [n for n in managed_nodes(sim) if "nodescale.io/empty-since" in n["metadata"].get("annotations", {})]
    assert {n["metadata"]["name"] for n in marked} == nodes

    sim.advance(20)
    early = disrupting.disrupt_once(rt)
    assert early["decisions"] == []
    assert {n["metadata"]["name"] for n in managed_nodes(sim)} == nodes

    sim.advance(11)
    removed_at = sim.clock()["now"]
    summaries = settle(sim, rt, advance=1)
    decided = [d for s in summaries for d in s["decisions"]]
    assert decided and {d["reason"] for d in decided} == {"Empty"}
    assert {n for d in decided for n in d["nodes"]} == nodes
    wait_for("the nodes to be deleted", lambda: not managed_nodes(sim))
    assert all(instance_state(sim, i) in ("shutting-down", "terminated") for i in launched)
    waited = (_ts(removed_at) - _ts(emptied_at))
    assert 30 <= waited < 40
    events = node_events(sim, sorted(nodes)[0])
    # #30.5: Karpenter's DisruptionTerminating (disruption/events/events.go Terminating), was DisruptionDecision.
    assert any(e["reason"] == "DisruptionTerminating" and e["message"] == "Disrupting Node: Empty" for e in events)


LEGACY_AND_CURRENT = """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: legacy
spec:
  labels: {generation: legacy}
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  providerRef: {name: legacy}
  ttlSecondsAfterEmpty: 30
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: legacy
spec:
  subnetSelector: {karpenter.sh/discovery: demo-cluster}
  securityGroupSelector: {karpenter.sh/discovery: demo-cluster}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: current
spec:
  template:
    metadata:
      labels: {generation: current}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: current}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: current
spec:
  role: KarpenterNodeRole-demo-cluster
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo-cluster}
"""


def nodes_of(sim: Environment, generation: str) -> set[str]:
    return {n["metadata"]["name"] for n in managed_nodes(sim) if n["metadata"]["labels"].get("generation") == generation}


def test_twenty_empty_nodes_of_a_v1alpha5_pool_all_go_in_one_run_while_a_v1_pool_keeps_its_10_percent_budget(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """Karpenter v0.2x had no budgets: ttlSecondsAfterEmpty deleted every empty node past it at once (restates
    karpenter v0.31 pkg/controllers/deprovisioning/suite_test.go "should deprovision all empty Machine and
    NodeClaims in parallel (Emptiness)"). A v1 NodePool beside it keeps the default budget: 2 of 20 a run."""
    put_pool(sim, LEGACY_AND_CURRENT)
    for generation in ("legacy", "current"):
        deployment(sim, ns, generation, 20, "1", anti_affinity=True, node_selector={"generation": generation})
    provision_until_running(sim, rt, ns, 40, seconds=120)
    legacy, current = nodes_of(sim, "legacy"), nodes_of(sim, "current")
    assert len(legacy) == 20 and len(current) == 20

    for generation in ("legacy", "current"):
        scale(sim, ns, generation, 0)
    wait_for("the pods to go", lambda: not pods(sim, ns), timeout=60)
    assert disrupting.disrupt_once(rt)["decisions"] == []  # first seen empty: the clocks start
    sim.advance(31)
    run = disrupting.disrupt_once(rt)
    decided = {n for d in run["decisions"] for n in d["nodes"]}
    assert {d["reason"] for d in run["decisions"]} == {"Empty"}
    assert decided & legacy == legacy, "every empty v1alpha5 node goes in the one run"
    assert len(decided & current) == 2, "the v1 pool's default budget (10% of 20) allows 2"
    assert {r["blockedBy"] for r in run["refused"]} == {"budget"} and len(run["refused"]) == 18
    wait_for("the v1alpha5 nodes to be deleted", lambda: not nodes_of(sim, "legacy"), timeout=60)
    assert len(nodes_of(sim, "current")) == 18


M5_ON_DEMAND = """\
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"""

SPOT_CMR = """\
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}"""


def v1_pool(budgets: str = '      - nodes: "50%"', labels: str = "", policy: str = "WhenEmptyOrUnderutilized",
            after: str = "0s", expire: str = "720h", requirements: str = M5_ON_DEMAND, grace: str = "",
            annotations: str = "") -> str:
    """A v1 NodePool (default: on-demand m5.large nodes that consolidate at once) with the given budgets."""
    grace_line = f"\n      terminationGracePeriod: {grace}" if grace else ""
    annotation_lines = f"\n      annotations:\n        {annotations}" if annotations else ""
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        team: platform{labels}{annotation_lines}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: {expire}{grace_line}
      requirements:
{requirements}
  disruption:
    consolidationPolicy: {policy}
    consolidateAfter: {after}
    budgets:
{budgets}
""" + helpers.DEMO_NODECLASS


def three_half_empty_nodes(sim: Environment, rt: Runtime, ns: str, pinned: bool = False) -> dict[str, str]:
    """Three m5.large nodes, each left with one small pod (all three fit on one node); pod -> node.

    A 1.5-CPU pod per node is launched first, one node at a time, then the small pods fill the room
    left on each node (one each), then the big pods go.
    """
    for i in range(3):
        deployment(sim, ns, f"big{i}", 1, "1500m")
        provision_until_running(sim, rt, ns, i + 1)
    assert len(managed_nodes(sim)) == 3
    if pinned:
        deployment(sim, ns, "pinned", 1, "300m", annotations={"karpenter.sh/do-not-disrupt": "true"})
    deployment(sim, ns, "small", 2 if pinned else 3, "300m")
    wait_for("the small pods to run", lambda: len(running(sim, ns)) == 6)
    for i in range(3):
        delete_quietly(sim.kube_api_client(), f"/apis/apps/v1/namespaces/{ns}/deployments/big{i}")
    wait_for("the big pods to go", lambda: len(pods(sim, ns)) == 3)
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in running(sim, ns)}
    assert len(set(placed.values())) == 3
    return placed


def dry_run_cli(sim: Environment, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    """`nodescale disrupt --once --dry-run -o json` with the environment's settings, as a shell runs it."""
    use_settings(sim, monkeypatch)
    capsys.readouterr()
    with fresh_clients():
        assert cli.main(["disrupt", "--once", "--dry-run", "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)

def test_three_half_empty_nodes_consolidate_to_one_with_every_pod_running_and_the_price_lower(
    sim: Environment, rt: Runtime, ns: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    put_pool(sim, v1_pool())
    three_half_empty_nodes(sim, rt, ns)
    before = dry_run_cli(sim, capsys, monkeypatch)
    [planned] = before["decisions"]
    assert planned["reason"] == "Underutilized" and len(planned["nodes"]) == 2 and planned["savingPerHour"] > 0
    assert len(managed_nodes(sim)) == 3  # a dry run changes nothing

    summaries = settle(sim, rt)
    wait_for("two nodes to go", lambda: len(managed_nodes(sim)) == 1)
    wait_for("every pod to run again", lambda: len(running(sim, ns)) == 3)
    assert {p["spec"]["nodeName"] for p in running(sim, ns)} == {managed_nodes(sim)[0]["metadata"]["name"]}
    after = disrupting.disrupt_once(rt)
    assert after["cluster"]["pricePerHour"] < before["cluster"]["pricePerHour"]
    assert summaries[0]["decisions"][0]["nodes"] == planned["nodes"]


def test_a_do_not_disrupt_pod_keeps_its_node_and_the_refusal_is_recorded(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pool(sim, v1_pool())
    placed = three_half_empty_nodes(sim, rt, ns, pinned=True)
    pinned_pod, pinned_node = next((p, n) for p, n in placed.items() if p.startswith("pinned"))

    summaries = settle(sim, rt)
    refused = [r for s in summaries for r in s["refused"] if r["nodes"] == [pinned_node]]
    assert refused and refused[0]["blockedBy"] == "do-not-disrupt"
    assert refused[0]["why"] == f"not consolidated: pod {ns}/{pinned_pod} has karpenter.sh/do-not-disrupt"
    wait_for("the other nodes to go", lambda: len(managed_nodes(sim)) == 1)
    assert managed_nodes(sim)[0]["metadata"]["name"] == pinned_node
    wait_for("every pod to run", lambda: len(running(sim, ns)) == 3)
    events = node_events(sim, pinned_node)
    assert any(e["reason"] == "DisruptionBlocked" and pinned_pod in e["message"] for e in events)


def test_a_do_not_disrupt_refusal_is_disruption_blocked_on_the_node_and_its_nodeclaim(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#30.5: restates kubernetes-sigs/karpenter pkg/controllers/disruption/events/events.go Blocked (published
    from disruption/types.go when a candidate's pod has karpenter.sh/do-not-disrupt): a DisruptionBlocked
    event on the Node and on its karpenter.sh/v1 NodeClaim, both naming the pod."""
    helpers.install_karpenter_crds(sim)
    put_pool(sim, v1_pool())
    placed = three_half_empty_nodes(sim, rt, ns, pinned=True)
    pinned_pod, pinned_node = next((p, n) for p, n in placed.items() if p.startswith("pinned"))
    api = sim.kube_api_client()
    (claim,) = [c["metadata"]["name"] for c in request_json(api, "GET", "/apis/karpenter.sh/v1/nodeclaims")["items"]
                if c.get("status", {}).get("providerID") == helpers.node_named(sim, pinned_node)["spec"]["providerID"]]
    disrupting.disrupt_once(rt)
    items = request_json(api, "GET", "/api/v1/namespaces/default/events").get("items") or []
    blocked = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["involvedObject"].get("apiVersion"))
               for e in items if e["reason"] == "DisruptionBlocked" and pinned_pod in e["message"]}
    assert blocked == {("Node", pinned_node, "v1"), ("NodeClaim", claim, "karpenter.sh/v1")}


def window(sim: Environment, starts_in_minutes: int) -> str:
    """A budget of 0 nodes for drift and consolidation, one hour from ``starts_in_minutes`` from now."""
    start = datetime.fromtimestamp(_ts(sim.clock()["now"]), UTC) + timedelta(minutes=starts_in_minutes)
    return (
        f'      - nodes: "0"\n        schedule: "{start.minute} {start.hour} * * *"\n        duration: 1h\n'
        f'        reasons: [Drifted, Underutilized]\n      - nodes: "50%"'
    )


def test_a_zero_budget_inside_its_window_blocks_consolidation_and_drift_and_outside_they_proceed(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pool(sim, v1_pool(window(sim, -2)))
    three_half_empty_nodes(sim, rt, ns)
    names = {n["metadata"]["name"] for n in managed_nodes(sim)}

    held = disrupting.disrupt_once(rt)
    assert held["decisions"] == []
    budget = [r for r in held["refused"] if r["blockedBy"] == "budget"]
    assert {r["reason"] for r in budget} == {"Underutilized"} and {n for r in budget for n in r["nodes"]} == names
    assert all(r["why"].startswith("not consolidated: budget nodes=0") for r in budget)
    assert any(e["reason"] == "DisruptionBlocked" and "budget nodes=0" in e["message"]
               for e in node_events(sim, sorted(names)[0]))

    put_pool(sim, v1_pool(window(sim, -2), labels="\n        tier: gold"))
    drifted = disrupting.disrupt_once(rt)
    assert drifted["decisions"] == []
    blocked = [r for r in drifted["refused"] if r["reason"] == "Drifted"]
    assert {n for r in blocked for n in r["nodes"]} == names
    assert all(r["blockedBy"] == "budget" and "not replaced (drifted): budget nodes=0" in r["why"] for r in blocked)
    assert len(managed_nodes(sim)) == 3

    put_pool(sim, v1_pool(window(sim, 120)))
    summaries = settle(sim, rt)
    assert summaries[0]["decisions"] and summaries[0]["decisions"][0]["reason"] == "Underutilized"
    wait_for("consolidation to leave one node", lambda: len(managed_nodes(sim)) == 1)
    wait_for("every pod to run", lambda: len(running(sim, ns)) == 3)


AL2023 = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"


def images_of(sim: Environment, ids: list[str]) -> dict[str, str]:
    out = sim.boto3_client("ec2").describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["ImageId"] for r in out["Reservations"] for i in r["Instances"]}


def test_a_new_ami_in_ssm_drifts_the_nodes_and_they_are_replaced_one_at_a_time_within_the_budget(
    sim: Environment, ns: str
) -> None:
    from sim.aws.amis import eks_release

    put_pool(sim, v1_pool('      - nodes: "1"', policy="WhenEmpty", after="10m"))
    rt = runtime_for(sim)
    for i in range(2):
        deployment(sim, ns, f"big{i}", 1, "1500m")
        provision_until_running(sim, rt, ns, i + 1)
    old_instances = instance_ids(sim)
    ssm = sim.boto3_client("ssm")
    old_image = ssm.get_parameter(Name=AL2023)["Parameter"]["Value"]
    assert set(images_of(sim, old_instances).values()) == {old_image}

    sim.publish_release(eks_release("1.31", "v20250115"))
    new_image = ssm.get_parameter(Name=AL2023)["Parameter"]["Value"]
    assert new_image != old_image
    reasons = []
    for _ in range(30):
        summary = disrupting.disrupt_once(runtime_for(sim))
        reasons += [d["reason"] for d in summary["decisions"]]
        disrupting_now = [n for n in managed_nodes(sim)
                          if "nodescale.io/disruption-reason" in n["metadata"].get("annotations", {})]
        assert len(disrupting_now) <= 1, "the budget allows one node at a time"
        live = instance_ids(sim)
        if not set(live) & set(old_instances) and len(running(sim, ns)) == 2 and not disrupting_now:
            break
        sim.advance(3)
        time.sleep(0.6)
    assert reasons == ["Drifted", "Drifted"]
    live = instance_ids(sim)
    assert len(live) == 2 and not set(live) & set(old_instances)
    assert set(images_of(sim, live).values()) == {new_image}
    wait_for("both pods to run", lambda: len(running(sim, ns)) == 2)


def test_a_changed_template_annotation_drifts_a_node_launched_from_the_old_template(sim: Environment, ns: str) -> None:
    """#31.5, restating kubernetes-sigs/karpenter pkg/controllers/nodeclaim/disruption/drift_test.go, DescribeTable
    "should detect drift on changes to the static fields", Entry "Annoations", end to end: the NodeClaim records
    nodescale's template digest, registration copies it onto the Node, and a template annotation added afterwards
    drifts the node (NodePoolDrifted), which the node's labels and taints alone never showed."""
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m"))
    rt = runtime_for(sim)
    deployment(sim, ns, "web", 1, "1500m")
    provision_until_running(sim, rt, ns, 1)
    [node] = managed_nodes(sim)
    recorded = node["metadata"].get("annotations") or {}
    assert recorded.get("nodescale.io/nodepool-hash") and recorded.get("nodescale.io/nodepool-hash-version") == "v1"
    assert "karpenter.sh/nodepool-hash" not in recorded
    assert [d for d in disrupting.disrupt_once(rt)["decisions"] if d["reason"] == "Drifted"] == []

    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", annotations="example.com/owner: ops"))
    drifted = [d for d in disrupting.disrupt_once(rt)["decisions"] if d["reason"] == "Drifted"]
    assert [(d["nodes"], d["drift"]) for d in drifted] == [([node["metadata"]["name"]], "NodePoolDrifted")]


def test_an_expired_node_is_replaced_first_and_without_a_grace_period_keeps_its_do_not_disrupt_pod(
    sim: Environment, ns: str
) -> None:
    # Karpenter v1 docs, Expiration: do-not-disrupt pods "may block draining indefinitely" when the pool
    # sets no terminationGracePeriod. (Until issue #15 this test asserted the pod was evicted at once.)
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", expire="1h"))
    rt = runtime_for(sim)
    deployment(sim, ns, "held", 1, "1500m", annotations={"karpenter.sh/do-not-disrupt": "true"})
    provision_until_running(sim, rt, ns, 1)
    [old] = instance_ids(sim)
    [old_node] = [n["metadata"]["name"] for n in managed_nodes(sim)]

    assert disrupting.disrupt_once(runtime_for(sim))["decisions"] == []
    sim.advance(3601)
    first = disrupting.disrupt_once(runtime_for(sim))
    [decision] = first["decisions"]
    assert decision["reason"] == "Expired" and decision["action"] == "replace"
    [new] = decision["replacementInstances"]
    for _ in range(12):
        disrupting.disrupt_once(runtime_for(sim))
        sim.advance(600)
        time.sleep(0.4)
    assert sorted(instance_ids(sim)) == sorted([old, new]) and instance_state(sim, old) == "running"
    assert [p["spec"]["nodeName"] for p in running(sim, ns)] == [old_node]


def test_an_expired_node_keeps_its_do_not_disrupt_pod_until_termination_grace_period_while_its_other_pods_move(
    sim: Environment, ns: str
) -> None:
    # Karpenter v1 docs, TerminationGracePeriod + Expiration: an expired node begins draining at once,
    # do-not-disrupt pods are respected "until the TGP is reached", then deleted and the instance
    # terminated (pkg/apis/v1/nodepool.go TerminationGracePeriod; terminator.go DeleteExpiringPods).
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", expire="1h", grace="10m"))
    rt = runtime_for(sim)
    deployment(sim, ns, "held", 1, "1000m", annotations={"karpenter.sh/do-not-disrupt": "true"})
    deployment(sim, ns, "web", 1, "500m")
    provision_until_running(sim, rt, ns, 2)
    [old] = instance_ids(sim)
    [old_node] = [n["metadata"]["name"] for n in managed_nodes(sim)]

    sim.advance(3601)
    [decision] = disrupting.disrupt_once(runtime_for(sim))["decisions"]
    assert decision["reason"] == "Expired"
    [new] = decision["replacementInstances"]

    def where(app: str) -> list[str]:
        return [p["spec"]["nodeName"] for p in running(sim, ns) if p["metadata"]["labels"]["app"] == app]

    for _ in range(20):
        disrupting.disrupt_once(runtime_for(sim))
        if where("web") and where("web") != [old_node]:
            break
        sim.advance(3)
        time.sleep(0.6)
    # The other pod moved to the replacement; the do-not-disrupt one stays, and so does its node.
    assert where("web") and where("web") != [old_node]
    assert where("held") == [old_node] and instance_state(sim, old) == "running"
    sim.advance(300)
    disrupting.disrupt_once(runtime_for(sim))
    assert where("held") == [old_node] and instance_state(sim, old) == "running"

    sim.advance(301)  # past the taint's timeAdded + 10m
    for _ in range(20):
        disrupting.disrupt_once(runtime_for(sim))
        if instance_ids(sim) == [new] and len(running(sim, ns)) == 2:
            break
        sim.advance(3)
        time.sleep(0.6)
    assert instance_ids(sim) == [new]
    wait_for("both pods to run on the replacement", lambda: len(running(sim, ns)) == 2)
    assert {p["spec"]["nodeName"] for p in running(sim, ns)} != {old_node}


def test_a_do_not_disrupt_out_of_range_is_ignored_with_a_warning_and_its_expired_node_is_replaced(
    sim: Environment, ns: str
) -> None:
    """#27.1: a tenant's `karpenter.sh/do-not-disrupt: "99999999999999999h"` made every pass raise
    OverflowError. Now it is ignored, as Karpenter ignores an invalid value (a Warning
    InvalidDoNotDisruptAnnotation on the pod, once per pass), and the pod's expired node is replaced,
    drained and terminated as any other."""
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", expire="1h"))
    rt = runtime_for(sim)
    deployment(sim, ns, "tenant", 1, "1500m", annotations={"karpenter.sh/do-not-disrupt": "99999999999999999h"})
    provision_until_running(sim, rt, ns, 1)
    [old] = instance_ids(sim)
    [old_node] = [n["metadata"]["name"] for n in managed_nodes(sim)]
    [pod] = running(sim, ns)

    quiet = disrupting.disrupt_once(runtime_for(sim))
    assert quiet["decisions"] == [] and quiet["errors"] == [], quiet
    assert any("invalid karpenter.sh/do-not-disrupt" in n and pod["metadata"]["name"] in n for n in quiet["notes"])
    disrupting.disrupt_once(runtime_for(sim))  # a second pass inside the event window adds no second event
    items = request_json(sim.kube_api_client(), "GET", f"/api/v1/namespaces/{ns}/events").get("items") or []
    warnings = [e for e in items if e["involvedObject"].get("name") == pod["metadata"]["name"]
                and e["reason"] == "InvalidDoNotDisruptAnnotation"]
    assert [(e["type"], e["count"]) for e in warnings] == [("Warning", 1)]
    assert "out of range" in warnings[0]["message"] and "ignored" in warnings[0]["message"]

    sim.advance(3601)
    [decision] = disrupting.disrupt_once(runtime_for(sim))["decisions"]
    assert decision["reason"] == "Expired" and decision["action"] == "replace"
    [new] = decision["replacementInstances"]
    for _ in range(20):
        summary = disrupting.disrupt_once(runtime_for(sim))
        assert summary["errors"] == [], summary["errors"]
        if instance_ids(sim) == [new] and len(running(sim, ns)) == 1:
            break
        sim.advance(3)
        time.sleep(0.6)
    assert instance_ids(sim) == [new] and instance_state(sim, old) != "running"
    wait_for("the pod to run on the replacement", lambda: len(running(sim, ns)) == 1)
    assert {p["spec"]["nodeName"] for p in running(sim, ns)} != {old_node}


def _ts(value: str) -> float:
    from nodescale.clock import parse_timestamp

    parsed = parse_timestamp(value)
    assert parsed is not None
    return parsed.timestamp()


# #31.5: repair and spot-to-spot consolidation run only with Karpenter's gates on (off by default).
REPAIR = FeatureGates(node_repair=True)
SPOT_TO_SPOT = FeatureGates(spot_to_spot_consolidation=True)


def test_a_node_notready_past_its_toleration_is_replaced_and_its_pod_moves(sim: Environment, ns: str) -> None:
    # Five nodes, one goes bad: repair acts only while at most 20% of a pool is unhealthy. #31.5: NotReady is
    # tolerated Karpenter's 30 minutes (karpenter-provider-aws RepairPolicies), not NODESCALE_REPAIR_THRESHOLD_SECONDS.
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m"))
    rt = runtime_for(sim, repair_threshold_seconds=600.0, feature_gates=REPAIR)
    deployment(sim, ns, "web", 5, "1500m")
    provision_until_running(sim, rt, ns, 5)
    by_node = {n["metadata"]["name"]: n["spec"]["providerID"].rsplit("/", 1)[-1] for n in managed_nodes(sim)}
    assert len(by_node) == 5
    old_node, old = sorted(by_node.items())[0]

    # The instance stops answering (stopped under its kubelet): its Node goes NotReady.
    sim.boto3_client("ec2").stop_instances(InstanceIds=[old])

    def not_ready() -> bool:
        [node] = [n for n in managed_nodes(sim) if n["metadata"]["name"] == old_node]
        return {c["type"]: c["status"] for c in node["status"].get("conditions") or []}.get("Ready") != "True"

    wait_for("the node to go NotReady", not_ready)
    sim.advance(900)  # past the status-check threshold (600s), within Ready's toleration
    early = disrupting.disrupt_once(runtime_for(sim, repair_threshold_seconds=600.0, feature_gates=REPAIR))
    assert [d for d in early["decisions"] if d["reason"] == "Unhealthy"] == []

    sim.advance(901)
    decided: list[dict] = []
    for _ in range(25):
        summary = disrupting.disrupt_once(runtime_for(sim, repair_threshold_seconds=600.0, feature_gates=REPAIR))
        decided += [d for d in summary["decisions"] if d["reason"] == "Unhealthy"]
        provisioning.provision_once(rt)  # the evicted pod is recreated and needs room
        if instance_state(sim, old) in ("shutting-down", "terminated") and len(running(sim, ns)) == 5:
            break
        sim.advance(3)
        time.sleep(0.6)
    assert [d["nodes"] for d in decided] == [[old_node]]
    assert instance_state(sim, old) in ("shutting-down", "terminated")
    wait_for("every pod to run on a healthy node", lambda: len(running(sim, ns)) == 5)
    assert old_node not in {p["spec"]["nodeName"] for p in running(sim, ns)}
    assert old_node not in {n["metadata"]["name"] for n in managed_nodes(sim)}


SPOT_POOL = v1_pool(budgets='      - nodes: "100%"', requirements=SPOT_CMR)


def test_an_underused_spot_node_is_replaced_by_a_cheaper_spot_node_when_there_are_enough_cheaper_types(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pool(sim, SPOT_POOL)
    deployment(sim, ns, "big", 1, "6")
    deployment(sim, ns, "small", 1, "500m")
    provision_until_running(sim, rt, ns, 2)
    [old_node] = managed_nodes(sim)
    [old] = instance_ids(sim)
    delete_quietly(sim.kube_api_client(), f"/apis/apps/v1/namespaces/{ns}/deployments/big")
    wait_for("the big pod to go", lambda: len(pods(sim, ns)) == 1)
    # #31.5: spot replaced by spot only with Karpenter's SpotToSpotConsolidation gate on (off by default).
    off = disrupting.disrupt_once(runtime_for(sim))
    assert [d for d in off["decisions"] if d["reason"] == "Underutilized"] == []
    assert any("SpotToSpotConsolidation is disabled" in r["why"] for r in off["refused"]), off["refused"]
    gated = runtime_for(sim, feature_gates=SPOT_TO_SPOT)
    first = disrupting.disrupt_once(gated)
    before = first["cluster"]["pricePerHour"]
    summaries = [first, *settle(sim, gated)]
    [decision] = [d for s in summaries for d in s["decisions"]]
    assert decision["reason"] == "Underutilized" and decision["action"] == "replace"
    assert decision["nodes"] == [old_node["metadata"]["name"]] and decision["savingPerHour"] > 0
    wait_for("the old spot instance to go", lambda: old not in instance_ids(sim))
    wait_for("the small pod to run on the replacement", lambda: len(running(sim, ns)) == 1
             and running(sim, ns)[0]["spec"]["nodeName"] != old_node["metadata"]["name"])
    [new_node] = managed_nodes(sim)
    assert new_node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert disrupting.disrupt_once(runtime_for(sim))["cluster"]["pricePerHour"] < before


def test_an_underused_spot_node_stays_when_fewer_than_fifteen_cheaper_spot_types_could_replace_it(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    # m5 only: too few cheaper spot types, so the replacement would likely be the next one interrupted.
    m5_only = SPOT_CMR + "\n        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}"
    put_pool(sim, v1_pool(budgets='      - nodes: "100%"', requirements=m5_only))
    deployment(sim, ns, "big", 1, "6")
    deployment(sim, ns, "small", 1, "500m")
    provision_until_running(sim, rt, ns, 2)
    [old] = instance_ids(sim)
    delete_quietly(sim.kube_api_client(), f"/apis/apps/v1/namespaces/{ns}/deployments/big")
    wait_for("the big pod to go", lambda: len(pods(sim, ns)) == 1)

    # #31.5: with the SpotToSpotConsolidation gate on, so that the fifteen-types rule is what keeps the node.
    summaries = [disrupting.disrupt_once(runtime_for(sim, feature_gates=SPOT_TO_SPOT)) for _ in range(2)]
    assert [d for s in summaries for d in s["decisions"]] == []
    assert instance_ids(sim) == [old] and len(running(sim, ns)) == 1


M5_TWO_SIZES = """\
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"""


def instance_types_of(sim: Environment, ids: list[str]) -> dict[str, str]:
    out = sim.boto3_client("ec2").describe_instances(InstanceIds=ids)
    return {i["InstanceId"]: i["InstanceType"] for r in out["Reservations"] for i in r["Instances"]}


def test_an_expired_node_is_replaced_by_exactly_the_claim_its_command_carries_not_by_a_new_plan(
    sim: Environment, ns: str
) -> None:
    """#29.2: deliberate plan change. The expiry command carries the NodeClaim the simulation made: the
    expiring node's pod and the pod pending beside it, together on one m5.xlarge (as Karpenter's
    SimulateScheduling plans pending pods with the candidates'), and the act step launches exactly that.
    Before, the act step planned again for the node's pod alone and launched an m5.large instead."""
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", expire="1h", requirements=M5_TWO_SIZES))
    rt = runtime_for(sim)
    deployment(sim, ns, "held", 1, "1500m")
    provision_until_running(sim, rt, ns, 1)
    [old] = instance_ids(sim)
    assert instance_types_of(sim, [old]) == {old: "m5.large"}
    deployment(sim, ns, "late", 1, "1500m")  # no room on the m5.large: pending, no provisioner run

    def late_pending() -> bool:
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for p in pods(sim, ns) if p["metadata"]["name"].startswith("late-")
                   for c in p["status"].get("conditions") or [])

    wait_for("the late pod to be unschedulable", late_pending)
    sim.advance(3601)
    [decision] = disrupting.disrupt_once(runtime_for(sim))["decisions"]
    assert decision["reason"] == "Expired" and decision["action"] == "replace", decision
    [new] = decision["replacementInstances"]
    assert instance_types_of(sim, [new]) == {new: "m5.xlarge"}, "one node for both pods, as decided"
    assert decision["replacement"] == {"nodePool": "default", "instanceType": "m5.xlarge",
                                       "pricePerHour": decision["replacement"]["pricePerHour"]}


def test_a_command_whose_node_got_a_do_not_disrupt_pod_after_the_decision_is_dropped_before_acting(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#29.2: the validation before acting reads the world again: a candidate's pod annotated do-not-disrupt
    between the decision and the act drops the command (reported, evented); no node is tainted or drained."""
    put_pool(sim, v1_pool())
    placed = three_half_empty_nodes(sim, rt, ns)
    run = RunState(rt, read_world(rt, pod_cache=True), False, time.monotonic() + 60)
    outcome, views = disrupting.plan_run(run, set(), set())
    [command] = outcome.decisions
    assert command.reason == "Underutilized" and len(command.nodes) == 2
    pod = next(p for p, n in placed.items() if n == command.nodes[0])
    request_json(sim.kube_api_client(), "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod}", content_type=MERGE_PATCH,
                 body={"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})

    disrupting.apply(run, outcome, views)
    [entry] = run.report.decisions
    assert entry.nodes == command.nodes and entry.action == "none", entry
    assert entry.error == (f"command no longer valid (do-not-disrupt): pod {ns}/{pod} has "
                           "karpenter.sh/do-not-disrupt")
    nodes = managed_nodes(sim)
    assert len(nodes) == 3 and not any(t.get("key") == "karpenter.sh/disrupted"
                                       for n in nodes for t in n["spec"].get("taints") or [])
    assert any(e["reason"] == "DisruptionBlocked" and "no longer valid" in e["message"]
               for e in node_events(sim, command.nodes[0]))
    assert len(running(sim, ns)) == 3


def test_an_expired_node_whose_replacement_would_exceed_its_pools_cpu_limit_is_not_replaced(
    sim: Environment, ns: str
) -> None:
    """#29.2: the replaced node runs until its replacement is up, so a pool at its limits launches no
    replacement (as Karpenter: kubernetes-sigs/karpenter pkg/controllers/disruption/staticdrift_test.go
    "should not drift nodes when we cannot acquire limits"; its Provisioner.Create refuses a NodeClaim past
    the pool's limits). The command carries its claim, planned without the candidate, so the validation
    before acting counts it: not launched, said as before this branch (the report's error, a Warning on the
    node), nothing launched or tainted."""
    put_pool(sim, v1_pool(policy="WhenEmpty", after="10m", expire="1h").replace(
        "  disruption:", "  limits:\n    cpu: 2\n  disruption:"))
    rt = runtime_for(sim)
    deployment(sim, ns, "held", 1, "1500m")
    provision_until_running(sim, rt, ns, 1)
    [old] = instance_ids(sim)
    [node] = [n["metadata"]["name"] for n in managed_nodes(sim)]
    sim.advance(3601)

    summary = disrupting.disrupt_once(runtime_for(sim))
    [entry] = summary["decisions"]
    assert entry["reason"] == "Expired" and entry["action"] == "none", entry
    why = ("the new node would take NodePool default past its limits.cpu (2): its nodes, those being replaced "
           "included, count 2 and the new node up to 2 more")
    assert entry["error"] == f"replacement could not be launched: {why}", entry
    assert summary["errors"] == [f"{node}: replacement could not be launched: {why}"]
    assert instance_ids(sim) == [old]
    [still] = managed_nodes(sim)
    assert not still["spec"].get("unschedulable") and not any(
        t.get("key") == "karpenter.sh/disrupted" for t in still["spec"].get("taints") or [])
    assert any(e["reason"] == "DisruptionBlocked" and e["type"] == "Warning" and why in e["message"]
               for e in node_events(sim, node))
    assert len(running(sim, ns)) == 1
