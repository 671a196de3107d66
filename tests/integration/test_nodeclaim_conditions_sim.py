"""#30.1 on sim/: the disruption pass writes Karpenter's disruption conditions on the NodeClaims of its nodes.

Karpenter behaviours restated (kubernetes-sigs/karpenter):
- pkg/controllers/nodeclaim/disruption/consolidation_test.go "Underutilized" / "should mark NodeClaims as
  consolidatable": Consolidatable True once consolidateAfter has passed since the last pod event, not before;
- pkg/controllers/disruption/queue.go (its orchestration tests mark the candidates): DisruptionReason, reason
  and message the command's reason, when the disruption starts; pkg/controllers/node/termination: the instance's
  deletion asked for, InstanceTerminating True;
- pkg/controllers/nodeclaim/disruption/drift_test.go "Drift" / "should detect drift": Drifted True with the
  cloud provider's drift reason (karpenter-provider-aws: AMIDrift).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import provisioner as provisioning
from sim.aws.amis import eks_release
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import managed_nodes, pods, put_pool, wait_for
from tests.integration.test_disruption import deployment, provision_until_running, runtime_for, scale, v1_pool

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("nodeclaimconditions")
sim = helpers.emptied_environment_fixture()
ns = helpers.namespace_fixture()
COLLECTION = "/apis/karpenter.sh/v1/nodeclaims"


@pytest.fixture(autouse=True)
def no_nodeclaims(sim: Environment) -> None:
    """The module's environment without the NodeClaims an earlier test left (their finalizer removed first)."""
    try:
        left = claims(sim)
    except ApiException as exc:
        if exc.status == 404:  # the CRD is not installed yet
            return
        raise
    api = sim.kube_api_client()
    for claim in left:
        path = f"{COLLECTION}/{claim['metadata']['name']}"
        request_json(api, "PATCH", path, body={"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
        helpers.delete_quietly(api, path)


def claims(sim: Environment) -> list[dict[str, Any]]:
    return request_json(sim.kube_api_client(), "GET", COLLECTION).get("items") or []


def conditions(claim: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (claim.get("status") or {}).get("conditions") or []}


def one_initialized_node(sim: Environment, rt: Runtime, ns: str, name: str) -> dict[str, Any]:
    """One node running one pod, its NodeClaim Initialized (registration runs with each provisioning pass)."""
    deployment(sim, ns, name, 1, "1500m")
    provision_until_running(sim, rt, ns, 1)
    for _ in range(10):
        provisioning.provision_once(rt)
        [claim] = claims(sim)
        if conditions(claim).get("Initialized", {}).get("status") == "True":
            return claim
        sim.advance(2)
        time.sleep(0.3)
    raise AssertionError(f"the NodeClaim never initialized: {conditions(claims(sim)[0])}")


def test_an_empty_nodes_nodeclaim_is_consolidatable_after_consolidate_after_then_says_its_disruption(
    sim: Environment, ns: str,
) -> None:
    """#30.1: no Consolidatable before consolidateAfter (30s) has passed since the node emptied; then True, and
    DisruptionReason Empty as the pass starts removing it; InstanceTerminating once its instance goes."""
    helpers.install_karpenter_crds(sim)
    put_pool(sim, v1_pool('      - nodes: "100%"', policy="WhenEmpty", after="30s"))
    rt = runtime_for(sim)
    one_initialized_node(sim, rt, ns, "solo")
    scale(sim, ns, "solo", 0)
    wait_for("the pod to go", lambda: not pods(sim, ns))

    assert disrupting.disrupt_once(rt)["decisions"] == []  # the emptiness clock starts
    sim.advance(20)
    assert disrupting.disrupt_once(rt)["decisions"] == []
    [claim] = claims(sim)
    assert "Consolidatable" not in conditions(claim) and "DisruptionReason" not in conditions(claim)

    sim.advance(11)
    summary = disrupting.disrupt_once(rt)
    assert [d["reason"] for d in summary["decisions"]] == ["Empty"]
    [claim] = claims(sim)
    got = conditions(claim)
    assert got["Consolidatable"]["status"] == "True" and got["Consolidatable"]["reason"] == "Consolidatable"
    assert (got["DisruptionReason"]["status"], got["DisruptionReason"]["reason"],
            got["DisruptionReason"]["message"]) == ("True", "Empty", "Empty")
    for _ in range(8):  # the drain goes on until the instance's termination is asked for
        if "InstanceTerminating" in conditions(claims(sim)[0]):
            break
        sim.advance(2)
        time.sleep(0.5)
        disrupting.disrupt_once(rt)
    assert conditions(claims(sim)[0])["InstanceTerminating"]["status"] == "True"
    assert got["Registered"]["status"] == "True", "registration's conditions are kept"


def test_a_new_ami_in_ssm_shows_drifted_on_the_nodeclaim(sim: Environment, ns: str) -> None:
    """#30.1: the AMI the node class selects changes (a new EKS release in SSM): Drifted True, reason AMIDrift,
    written even while a zero budget holds the replacement."""
    helpers.install_karpenter_crds(sim)
    put_pool(sim, v1_pool('      - nodes: "0"', policy="WhenEmpty", after="10m"))
    rt = runtime_for(sim)
    one_initialized_node(sim, rt, ns, "big")
    disrupting.disrupt_once(rt)
    [claim] = claims(sim)
    assert "Drifted" not in conditions(claim)

    sim.publish_release(eks_release("1.31", "v20250115"))
    summary = disrupting.disrupt_once(runtime_for(sim))
    assert summary["decisions"] == []
    [claim] = claims(sim)
    drifted = conditions(claim)["Drifted"]
    assert (drifted["status"], drifted["reason"], drifted["message"]) == ("True", "AMIDrift", "AMIDrift")
    assert len(managed_nodes(sim)) == 1
