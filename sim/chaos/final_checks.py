"""Invariants checked once a chaos run has settled (faults cleared, a few clean rounds run).

Pure functions of the final state: the pods, the Nodes, this cluster's instances and the plan the
bin-packer makes for the same pods from scratch. Each returns the violations it finds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .checkers import (
    CLUSTER_TAG,
    LIVE_STATES,
    InstanceRecord,
    Violation,
    node_instance_id,
    pod_finished,
    pod_key,
    pod_terminating,
)


def pods_not_running(pods: Iterable[Mapping[str, Any]], cannot_run: Iterable[str]) -> list[Violation]:
    """Every pod that can run is Running; `cannot_run` names ("namespace/name") the pods the
    bin-packer finds no place for with any pool (those may wait)."""
    excused = set(cannot_run)
    out = []
    for pod in pods:
        key = pod_key(pod)
        if pod_finished(pod) or pod_terminating(pod) or key in excused:
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running":
            node = (pod.get("spec") or {}).get("nodeName") or "no node"
            out.append(Violation("pods-running", f"pod {key} is {phase} ({node}) though the pools can run it"))
    return out


def leaks(
    instances: Iterable[InstanceRecord], nodes: Iterable[Mapping[str, Any]], cluster: str,
    foreign_nodes: Iterable[str] = (),
) -> list[Violation]:
    """Every live instance of this cluster has a Node, and every Node of this cluster a live instance.

    A Node is this cluster's when its provider ID names one of this cluster's instances (any state)
    or it carries a NodePool label; `foreign_nodes` are left out (they are someone else's).
    """
    ours = {i.instance_id: i for i in instances if i.tags.get(CLUSTER_TAG) == cluster}
    skip = set(foreign_nodes)
    node_by_instance: dict[str, str] = {}
    out = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        if name in skip:
            continue
        iid = node_instance_id(node)
        node_labels = (node.get("metadata") or {}).get("labels") or {}
        # A NodePool's node, or a v1alpha5 Provisioner's (which Karpenter v0.32 labels only this way).
        labelled = "karpenter.sh/nodepool" in node_labels or "karpenter.sh/provisioner-name" in node_labels
        if iid:
            node_by_instance[iid] = name
        if iid in ours or labelled:
            inst = ours.get(iid)
            if inst is None or inst.state not in LIVE_STATES:
                state = inst.state if inst else "unknown to EC2"
                out.append(Violation("leak", f"node {name} stays while its instance {iid or '(none)'} is {state}"))
    for iid, inst in sorted(ours.items()):
        if inst.state in LIVE_STATES and iid not in node_by_instance:
            out.append(Violation("leak", f"instance {iid} ({inst.instance_type}, pool {inst.nodepool or '?'}) is "
                                 f"{inst.state} with no Node"))
    return out


# Why the disruption function may rightly keep a node that a fresh plan would not need: a user's rule
# (a PodDisruptionBudget allowing no disruption, a do-not-disrupt pod) or Karpenter's (spot is replaced by
# spot only with the SpotToSpotConsolidation gate on and enough cheaper types to keep it flexible). Budgets
# and timing are not among them: the clean rounds advance the clock past those.
PROTECTING_BLOCKS = ("pdb", "do-not-disrupt", "not-consolidatable")


def protected_nodes(disruption_summary: Any) -> set[str]:
    """Nodes a disruption run refused to consolidate for one of PROTECTING_BLOCKS."""
    if not isinstance(disruption_summary, dict):
        return set()
    return {node for refused in disruption_summary.get("refused") or []
            if refused.get("blockedBy") in PROTECTING_BLOCKS for node in refused.get("nodes") or []}


def excess_capacity(nodes_in_use: int, nodes_from_scratch: int, allowed_extra: int = 1,
                    detail: str = "", protected: int = 0) -> list[Violation]:
    """No more than `allowed_extra` nodes above what the bin-packer would launch from scratch, besides the
    `protected` nodes the disruption function may not consolidate (see PROTECTING_BLOCKS)."""
    if nodes_in_use <= nodes_from_scratch + allowed_extra + protected:
        return []
    kept = f", {protected} kept by a PDB, do-not-disrupt or spot flexibility" if protected else ""
    return [Violation("capacity", f"{nodes_in_use} nodes in use; from scratch the bin-packer needs "
                      f"{nodes_from_scratch} (+{allowed_extra} allowed{kept}){': ' + detail if detail else ''}")]


def managed_live(instances: Iterable[InstanceRecord], cluster: str) -> list[InstanceRecord]:
    return [i for i in instances if i.tags.get(CLUSTER_TAG) == cluster and i.state in LIVE_STATES]


def by_pool(instances: Iterable[InstanceRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for inst in instances:
        counts[inst.nodepool or "?"] = counts.get(inst.nodepool or "?", 0) + 1
    return counts


def instance_types_summary(records: Iterable[InstanceRecord]) -> Mapping[str, int]:
    counts: dict[str, int] = {}
    for inst in records:
        counts[inst.instance_type] = counts.get(inst.instance_type, 0) + 1
    return dict(sorted(counts.items()))
