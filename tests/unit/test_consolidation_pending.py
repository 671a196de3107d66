"""Consolidation leaves pending pods the room they wait for (#32 Bursts, found in the 2,000-node scale run).

Restates kubernetes-sigs/karpenter pkg/controllers/disruption (helpers.go SimulateScheduling): the pods
still pending are scheduled in the simulation before the candidates' pods, so capacity launched for them
(a node just registered, still empty) is not taken as room for the pods of a node being consolidated.
"""

from __future__ import annotations

from dataclasses import replace

from nodescale.disruption.replacement import Simulation
from nodescale.disruption.simulator import bin_packing_simulator
from nodescale.model.pod import Pod
from tests.builders import LARGE, MEDIUM, SMALL, existing_node, node, pods, scheduling_pool


def consolidate_beside_a_pending_pod(cpu: str) -> tuple[Pod, Simulation]:
    """Node "old" runs one pod of a Deployment, another of its pods is pending, and "fresh" (2 CPUs) has
    just been launched for it: the simulation of "old" gone, and the pod it ran."""
    running, waiting = pods(2, name="edge", cpu=cpu)
    waiting = replace(waiting, node_name="", phase="Pending")
    simulate = bin_packing_simulator([existing_node("fresh", cpu=2, pool="default")], [scheduling_pool()],
                                     {"default": [SMALL, MEDIUM, LARGE]}, pending=[waiting])
    return running, simulate([node("old", [running])])


def test_a_node_just_launched_for_a_pending_pod_is_not_room_for_a_consolidated_nodes_pod() -> None:
    """The empty node launched for a pending pod holds one pod of its Deployment; the pod of the node being
    consolidated, of the same Deployment, then needs a node of its own, so the move is a replacement, not a
    free delete. Before, the candidate's pod took the empty node in the simulation, the pending pod's new
    node was dropped as "the provisioner's business", and the delete looked free: at 2,000 nodes the
    disruption function deleted a node of a hostname anti-affinity Deployment every pass, and the
    provisioner launched one for its pod, over and over."""
    running, sim = consolidate_beside_a_pending_pod("1500m")
    assert sim.unschedulable == []
    assert [r.pods for r in sim.replacements] == [[running.key]], sim.replacements


def test_a_pending_pod_that_fits_beside_the_moved_pods_changes_nothing() -> None:
    """With room for both on the empty node, the consolidated node's pod moves there and nothing new is
    needed: pending pods come first, they do not block a move that leaves them their room."""
    _, sim = consolidate_beside_a_pending_pod("900m")
    assert sim.unschedulable == [] and sim.replacements == []
