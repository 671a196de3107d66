"""Pods on the nodes nodescale is taking out are planned with the pending ones, by every function that launches.

Restates kubernetes-sigs/karpenter pkg/controllers/provisioning/suite_test.go, It "should schedule all pods on
one inflight node when node is in deleting state": the pods of a node being deleted and the pods pending are
planned together, onto one new node.

On `sim/` the provisioner and the interruption function both launch, each under the launch lease: whichever
goes second must find the other's launch in flight with room for the drained node's pods. The demo's story
(#33's drain beside the replacement) once launched four nodes for five pods: the provisioner launched for the
pod the first eviction recreated, while the interruption function launched for the four still on the node.
"""

from __future__ import annotations

import pytest

from nodescale.k8s import nodes as k8s_nodes
from nodescale.k8s.raw import MERGE_PATCH, request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.test_interruption import (
    deploy,
    event,
    fleet_calls,
    instance_of,
    nodes_of,
    one_size_spot_pool,
    pods,
    provision,
    replay,
    wait_running,
)

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("leaving", sim_clock=False, prepare=one_size_spot_pool)
sim = helpers.emptied_environment_fixture(keep_pools=True)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()


def _three_on_one_node(sim: Environment, rt: Runtime, ns: str) -> tuple[str, list[dict]]:
    """Three inflate pods of half a CPU on one node nodescale launched (the pool launches xlarge only: room
    for seven)."""
    deploy(sim, ns, "inflate.yaml", inflate={"replicas": 3, "cpu": "500m", "terminationGracePeriodSeconds": 1})
    running = provision(sim, rt, ns, 3)
    (victim,) = nodes_of(running)
    return victim, running


def _unbound(sim: Environment, ns: str) -> list[dict]:
    return [p for p in pods(sim, ns) if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


def test_pods_of_a_deleted_node_and_pending_pods_go_on_one_new_node(sim: Environment, rt: Runtime, ns: str) -> None:
    victim, running = _three_on_one_node(sim, rt, ns)
    api = sim.kube_api_client()
    # `kubectl delete node`: the termination finalizer holds it while it drains; cordoned, as a drain does, so
    # the two pods scaled up next are pending.
    request_json(api, "DELETE", f"/api/v1/nodes/{victim}")
    request_json(api, "PATCH", f"/api/v1/nodes/{victim}", body={"spec": {"unschedulable": True}},
                 content_type=MERGE_PATCH)
    request_json(api, "PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/inflate",
                 body={"spec": {"replicas": 5}}, content_type=MERGE_PATCH)
    helpers.wait_for("two more pods pending", lambda: len(_unbound(sim, ns)) == 2)

    summary = provisioning.provision_once(rt)

    (launch,) = summary.launches
    on_victim = {f"{ns}/{p['metadata']['name']}" for p in running}
    pending = {f"{ns}/{p['metadata']['name']}" for p in _unbound(sim, ns)}
    assert set(launch.pods) == on_victim | pending
    assert instance_of(helpers.node_named(sim, victim)) != launch.instance_id
    # The next pass finds room on the new node, in flight or joined, for the deleted node's pods and those
    # not bound yet: nothing is launched again.
    again = provisioning.provision_once(rt)
    assert not again.launches and again.pods_seen >= 3, again
    assert again.waiting_for_in_flight + again.placed_on_existing == again.pods_seen, again


def test_a_provisioner_pass_beside_a_spot_drain_launches_once_for_all_the_nodes_pods(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    victim, running = _three_on_one_node(sim, rt, ns)
    api = sim.kube_api_client()
    fleets_before = len(fleet_calls(sim))
    # The interruption function has tainted the node and evicted a first pod; the Deployment recreated it.
    k8s_nodes.mark_disrupted(api, victim)
    first = running[0]["metadata"]["name"]
    request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods/{first}/eviction",
                 body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": first, "namespace": ns}})
    helpers.wait_for("the evicted pod's recreation pending", lambda: len(_unbound(sim, ns)) == 1)

    # The provisioner's pass comes first (the launch lease is its): one node for the recreation and the two
    # pods still on the tainted node.
    summary = provisioning.provision_once(rt)
    (launch,) = summary.launches
    assert len(launch.pods) == 3, launch

    # Then the interruption function's replacement finds that node in flight and launches nothing more.
    report = replay(rt, event("spot-interruption-warning.json", instance_of(helpers.node_named(sim, victim)), sim))
    (item,) = report.instances
    assert not item.replacement.launched, item.replacement
    moved = wait_running(sim, ns, 3, timeout=60)
    assert nodes_of(moved) == {helpers.node_of(sim, launch.instance_id)["metadata"]["name"]}
    assert len(fleet_calls(sim)) - fleets_before == 1
