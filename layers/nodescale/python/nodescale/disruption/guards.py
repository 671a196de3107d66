"""What holds a voluntary disruption: do-not-disrupt on pods or nodes, and PodDisruptionBudgets at zero.

Each guard answers with a ``Hold`` (the kind of guard and why, for the refusal) or None; the do-not-disrupt rule itself is
``model.pod.do_not_disrupt``, shared with the drain.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ..model.pdb import PodDisruptionBudget
from ..model.pod import DO_NOT_DISRUPT, LEGACY_DO_NOT_CONSOLIDATE, Pod, do_not_disrupt
from .decisions import Blocker, Hold
from .nodes import NodeView


def pod_blocks(pod: Pod, now: datetime, legacy: bool = False) -> Hold | None:
    """Why this pod blocks a voluntary disruption of its node, or None (a duration counts from its start);
    ``legacy``: the node's pool honours karpenter.sh/do-not-evict (NodePool.legacy_annotations)."""
    # Without a clock the rule only protects more, so most pods (no annotation) need no start time parsed.
    if do_not_disrupt(pod.annotations, legacy=legacy) is None:
        return None
    held_by = do_not_disrupt(pod.annotations, pod.started, now, legacy=legacy)
    return None if held_by is None else Hold(Blocker.DO_NOT_DISRUPT, f"pod {pod.key} has {held_by}")


def node_blocks(node: NodeView, now: datetime, legacy: bool = False) -> Hold | None:
    """Why the node (its own annotations, then each of its pods) blocks a voluntary disruption, or None;
    ``legacy``: its pool honours the v1alpha5/v1beta1 annotations (NodePool.legacy_annotations)."""
    # On a node only "true" counts: Karpenter gives node annotations no duration.
    for key in (DO_NOT_DISRUPT, LEGACY_DO_NOT_CONSOLIDATE) if legacy else (DO_NOT_DISRUPT,):
        if node.annotations.get(key) == "true":
            return Hold(Blocker.DO_NOT_DISRUPT, f"node {node.name} has {key}")
    for pod in node.pods:
        hold = pod_blocks(pod, now, legacy)
        if hold:
            return hold
    return None


def pdb_blocks(pods: Iterable[Pod], pdbs: Sequence[PodDisruptionBudget]) -> Hold | None:
    """A pod whose PodDisruptionBudget allows no eviction now: a voluntary drain would stall on it."""
    for pod in pods:
        for pdb in pdbs:
            if pdb.at_zero and pdb.selects(pod):
                return Hold(Blocker.PDB, f"pod {pod.key} is protected by PodDisruptionBudget {pdb.key} "
                                         "(0 disruptions allowed)")
    return None
