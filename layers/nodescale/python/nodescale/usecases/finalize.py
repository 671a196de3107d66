"""Termination through the ``karpenter.sh/termination`` finalizer: ``kubectl delete node`` or ``kubectl delete
nodeclaim`` on what nodescale launched.

The finalizer goes on a Node when it registers (``provision/registration.add_finalizers``). A Node deleted
with it keeps its deletionTimestamp until nodescale lets it go: ``start`` taints it
``karpenter.sh/disrupted:NoSchedule`` and labels it out of the load balancers, and from then on it is a
node under way like any other (``terminate.continue_termination``, run by the disruption function every
pass): drained in Karpenter's order, its VolumeAttachments awaited, its instance terminated (only with this
cluster's tag), and the finalizer removed last. Nothing is stored: every pass reads the Node, its pods, its
VolumeAttachments and EC2 again and goes on from there.

A NodeClaim deleted with the finalizer (``finalize_nodeclaims``): its Node is deleted (and goes the way
above); once neither the Node nor the instance is left, the NodeClaim's finalizer is removed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from ..aws import instances as ec2_instances
from ..aws.ownership import GONE_STATES, classify
from ..k8s import finalizers as k8s_finalizers
from ..k8s import nodes as k8s_nodes
from ..k8s.listing import collection_path, list_objects
from ..k8s.raw import path_segment
from ..model.labels import EXCLUDE_FROM_LOAD_BALANCERS, TERMINATION_FINALIZER
from ..model.node import ClusterNode, parse_provider_id

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .world import World

log = logging.getLogger(__name__)

EXCLUDED_BY = "karpenter"  # the label's value, as Karpenter writes it (only its presence matters)
NODECLAIMS = collection_path("karpenter.sh", "v1", "nodeclaims")


def deleting(obj: Mapping[str, Any]) -> bool:
    """Deleted, and held by nodescale's finalizer: its termination is nodescale's to carry out (a NodeClaim as
    listed; a Node of the snapshot: ``node_deleting``)."""
    meta = obj.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and TERMINATION_FINALIZER in (meta.get("finalizers") or [])


def node_deleting(node: ClusterNode) -> bool:
    """``deleting`` for a Node of the world snapshot."""
    return node.deleting and TERMINATION_FINALIZER in node.finalizers


def start(rt: Runtime, name: str) -> dict[str, Any]:
    """Taint the deleted node ``name`` and take it out of the load balancers (each only if not yet done);
    returns the node as it is now."""
    current = k8s_nodes.mark_disrupted(rt.api, name).node
    labels = (current.get("metadata") or {}).get("labels") or {}
    if EXCLUDE_FROM_LOAD_BALANCERS not in labels:
        current = k8s_nodes.patch_metadata(rt.api, name, labels={EXCLUDE_FROM_LOAD_BALANCERS: EXCLUDED_BY})
        log.info("deleted node tainted for termination", extra={"node": name})
    return current


@dataclass
class ClaimStep:
    name: str
    state: str  # "deleting-node" | "waiting" | "released" | "skipped"
    reason: str = ""

    def summary(self) -> dict[str, str]:
        out = {"nodeClaim": self.name, "state": self.state}
        if self.reason:
            out["reason"] = self.reason
        return out


def finalize_nodeclaims(rt: Runtime, world: World) -> list[ClaimStep]:
    """One step for every NodeClaim deleted with nodescale's finalizer (none when the CRD is not served)."""
    try:
        claims = list_objects(rt.api, NODECLAIMS).items
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    return [_claim_step(rt, world, claim) for claim in claims if deleting(claim)]


def _claim_step(rt: Runtime, world: World, claim: dict[str, Any]) -> ClaimStep:
    name = str(claim["metadata"]["name"])
    status = claim.get("status") or {}
    parsed = parse_provider_id(status.get("providerID") or "")
    iid = parsed[1] if parsed else None
    node = _node_of(world, status.get("nodeName"), iid)
    if node is not None:
        if not node.deleting:
            k8s_nodes.delete_node(rt.api, node.name)
            return ClaimStep(name, "deleting-node")
        return ClaimStep(name, "waiting", "its node is being terminated")
    if iid:
        found = classify(rt.aws.ec2, [iid], rt.cluster)
        if iid in found.not_ours:
            return ClaimStep(name, "skipped", found.not_ours[iid].message)
        owned = found.owned.get(iid)
        if owned is not None and owned.state not in GONE_STATES:
            ec2_instances.terminate(rt.aws.ec2, [iid], rt.cluster)
            return ClaimStep(name, "waiting", f"instance {iid} terminating")
    path = f"{NODECLAIMS}/{path_segment(name)}"
    try:
        k8s_finalizers.remove(rt.api, path, claim, TERMINATION_FINALIZER)
    except k8s_finalizers.FinalizerConflict as exc:
        return ClaimStep(name, "waiting", str(exc))
    log.info("NodeClaim finalizer removed", extra={"nodeclaim": name, "instance_id": iid})
    return ClaimStep(name, "released")


def _node_of(world: World, node_name: str | None, iid: str | None) -> ClusterNode | None:
    for view in world.nodes:
        if (node_name and view.name == node_name) or (iid and view.instance_id == iid):
            return view
    return None
