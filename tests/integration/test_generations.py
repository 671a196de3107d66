"""Issue 14 on `sim/`: a v1alpha5 Provisioner/AWSNodeTemplate pair and a v1 NodePool/EC2NodeClass pair, both
named `default`, side by side in SSM (Karpenter's own upgrade path, v0.32-v0.33, has both at once).

Karpenter v0.32 behaviour restated: a Provisioner's machines carry the label and EC2 tag
`karpenter.sh/provisioner-name`, a NodePool's nodeclaims `karpenter.sh/nodepool` (and
`karpenter.k8s.aws/ec2nodeclass`); each counts against its own pool. Pods written for either generation
run on their own pool's nodes, and a disruption run holds each node to its own pool's rules: the
Provisioner has no budget (v0.2x), the NodePool 10% of its nodes.
"""

from __future__ import annotations

import pytest

from nodescale.aws import tags as tagging
from nodescale.model import labels as wk
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, managed_nodes, pods, put_pool, wait_for
from tests.integration.test_disruption import deployment, provision_until_running, runtime_for, scale

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("generations")
sim = helpers.emptied_environment_fixture()
ns = helpers.namespace_fixture()

BOTH = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text() + "\n---\n" + (
    EXAMPLES / "karpenter-v1" / "default.yaml").read_text()
SELECTORS = {"legacy": {wk.LEGACY_PROVISIONER: "default"}, "current": {wk.NODEPOOL: "default"}}


@pytest.fixture
def rt(sim: Environment) -> Runtime:
    return runtime_for(sim)


def nodes_by_generation(sim: Environment) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"legacy": set(), "current": set()}
    for node in managed_nodes(sim):
        labels = node["metadata"]["labels"]
        out["current" if wk.NODEPOOL in labels else "legacy"].add(node["metadata"]["name"])
    return out


def test_both_generations_named_default_run_their_own_pods_and_keep_their_own_disruption_rules(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    put_pool(sim, BOTH)
    for generation, selector in SELECTORS.items():
        deployment(sim, ns, generation, 2, "1", anti_affinity=True, node_selector=selector)
    provision_until_running(sim, rt, ns, 4, seconds=90)

    world = read_world(rt)
    assert world.config_errors == [] and sorted(world.nodepools) == ["default", "provisioner/default"]
    nodes = {n["metadata"]["name"]: n for n in managed_nodes(sim)}
    for pod in pods(sim, ns):
        labels = nodes[pod["spec"]["nodeName"]]["metadata"]["labels"]
        generation = pod["metadata"]["labels"]["app"]
        assert all(labels.get(k) == v for k, v in SELECTORS[generation].items()), (generation, labels)
    by_generation = nodes_by_generation(sim)
    assert {k: len(v) for k, v in by_generation.items()} == {"legacy": 2, "current": 2}
    for name in by_generation["legacy"]:
        labels = nodes[name]["metadata"]["labels"]
        assert labels[wk.LEGACY_PROVISIONER] == "default" and wk.NODEPOOL not in labels
    # The instances are tagged as Karpenter v0.32 tags them, and read back under their own pool.
    for inst in world.instances:
        if inst.tags.get(tagging.PROVISIONER) == "default":
            assert tagging.NODEPOOL not in inst.tags and inst.nodepool == "provisioner/default"
        else:
            assert inst.tags[tagging.NODEPOOL] == "default" and inst.nodepool == "default"
    assert sorted(i.nodepool for i in world.instances) == ["default", "default", "provisioner/default",
                                                           "provisioner/default"]

    for generation in SELECTORS:
        scale(sim, ns, generation, 0)
    wait_for("the pods to go", lambda: not pods(sim, ns), timeout=60)
    assert disrupting.disrupt_once(rt)["decisions"] == []  # first seen empty: the clocks start
    sim.advance(31)  # past the Provisioner's ttlSecondsAfterEmpty
    run = disrupting.disrupt_once(rt)
    decided = {n for d in run["decisions"] for n in d["nodes"]}
    assert decided == by_generation["legacy"], "the Provisioner has no budget; the NodePool waits its 1m"
    sim.advance(35)  # past the NodePool's consolidateAfter: 1m
    run = disrupting.disrupt_once(rt)
    decided = {n for d in run["decisions"] for n in d["nodes"]}
    # Its own budget: 10% of its 2 nodes rounds up to 1, whatever the Provisioner's nodes are doing.
    assert len(decided & by_generation["current"]) == 1 and not decided & by_generation["legacy"]
    assert [(r["blockedBy"], r["nodes"][0] in by_generation["current"]) for r in run["refused"]] == [("budget", True)]
