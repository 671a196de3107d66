"""What an interruption batch does while its records are claimed (#33.3): whose instances they are, and the
cordon of every going-away node of this cluster, before the idempotency records answer.

Cordoning before a record is claimed is safe: the taint is what any handling of the event writes first, a
node tainted already is not written again, and an instance goes away whoever handles its event. The work
of a record that turns out handled already (or in hand elsewhere) is dropped; the rest is adopted by the
batch's act (``handle._act``). At 2,000 nodes a batch of 56 warnings spent seconds on its claims before it
cordoned anything.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

from ...aws.ownership import OwnedInstance, Ownership, classify
from ...interruption import events
from ...interruption.actions import Step, action_for
from ...k8s import client as k8s_client
from ...k8s import listing
from ...k8s import nodes as k8s_nodes
from ...k8s.events import EventRecorder
from ...model.node import ClusterNode, trust_nodes
from ...runtime import Runtime
from . import actions as act
from .actions import InstanceReport, Work

log = logging.getLogger(__name__)

# Nodes read, and going-away nodes cordoned, side by side in a batch (each a few API calls): as many at
# once as the client keeps connections for.
MARK_WORKERS = k8s_client.POOL_MAXSIZE


@dataclass
class Ahead:
    """The ownership as checked (or what the check raised), the Nodes read by instance id, and each going-away
    instance's Work, cordoned, by instance id with the intent it was cordoned for."""

    owners: Ownership | Exception | None = None
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    marked: dict[str, Work] = field(default_factory=dict)

    def adopt(self, intent: events.Intent) -> Work | None:
        """The Work cordoned ahead for ``intent`` (the same intent the act chose for its instance), if any."""
        item = self.marked.get(intent.instance_id)
        return item if item is not None and item.intent is intent else None


def cordon_ahead(rt: Runtime, intents: list[events.Intent]) -> Ahead:
    """Ownership, then the Node of each owned instance a going-away intent names, cordoned in one write each
    (the first such intent per instance, as the act chooses it). A failure to read or cordon is logged and
    left to the act, which does the same again; a failed ownership check is handed on to fail there."""
    ahead = Ahead(ownership_of(rt, sorted({i.instance_id for i in intents})))
    owners = ahead.owners
    if not isinstance(owners, Ownership):
        return ahead
    going: dict[str, events.Intent] = {}
    for intent in intents:
        if intent.action == events.INTERRUPT and intent.instance_id in owners.owned:
            going.setdefault(intent.instance_id, intent)
    if not going:
        return ahead
    try:
        ahead.nodes = nodes_of(rt, [owners.owned[iid] for iid in going])
        recorder = EventRecorder(rt.api)
        marked = act.side_by_side(lambda g: _mark(rt, recorder, g, owners.owned[g.instance_id],
                                                  ahead.nodes.get(g.instance_id)),
                                  list(going.values()), MARK_WORKERS, "nodescale-cordon")
    except Exception:
        log.exception("cordoning ahead of the claims failed: the batch's act cordons instead")
        return Ahead(owners, ahead.nodes)
    ahead.marked = {item.intent.instance_id: item for item in marked if item is not None}
    return ahead


def _mark(rt: Runtime, recorder: EventRecorder, intent: events.Intent, owned: OwnedInstance,
          node: ClusterNode | None) -> Work | None:
    return start(rt, recorder, InstanceReport(intent.instance_id, intent.kind), intent, owned, node, count=False)[1]


def start(
    rt: Runtime,
    recorder: EventRecorder,
    report: InstanceReport,
    intent: events.Intent,
    owned: OwnedInstance,
    node: ClusterNode | None,
    count: bool = True,
) -> tuple[InstanceReport, Work | None]:
    """Act on an intent whose action needs no NodePool: its report so far, and the Work to replace and
    drain, if any (cordoned). Its events wait until every node of the batch is cordoned and evicting (#33.3);
    without ``count`` the action is counted once the batch acts on it (``act.count_action``)."""
    action = action_for(intent, node, None)
    if node is None:
        return replace(report, reason=action.reason), None
    item = Work(intent, owned, node, replace(report, node=node.name))
    if action.step == Step.DRAIN and act.mark(rt, recorder, item, announce=False, count=count):
        return item.report, item
    return item.report, None


def nodes_of(rt: Runtime, owned: list[OwnedInstance]) -> dict[str, ClusterNode]:
    """The Nodes of the interrupted instances, by instance id: each read by its name (EC2's PrivateDnsName,
    under which kubelet registers on EKS), so an event costs the API server a GET per node rather than a list
    of every node (tens of MB at 10,000 nodes). One list when a name is unknown or names another instance
    (a custom hostname); an instance whose node is not found by either has not registered."""
    found: dict[str, ClusterNode] = {}
    read = act.side_by_side(lambda inst: node_named(rt, inst.private_dns_name), owned, MARK_WORKERS,
                            "nodescale-get-node")
    for inst, node in zip(owned, read, strict=True):
        if node is None or node.instance_id != inst.instance_id:
            break
        found[inst.instance_id] = node
    else:
        return found
    # The same trust as the world's (#27.5): a Node named for the instance, the only one so named.
    listed = [ClusterNode.from_dict(raw) for raw in listing.list_nodes(rt.api).items]
    trust = trust_nodes(listed, {inst.instance_id: inst.private_dns_name for inst in owned})
    return trust.trusted


def node_named(rt: Runtime, name: str | None) -> ClusterNode | None:
    if not name:
        return None
    try:
        return ClusterNode.from_dict(k8s_nodes.get_node(rt.api, name))
    except k8s_nodes.NodeGoneError:
        return None


def ownership_of(rt: Runtime, instance_ids: list[str]) -> Ownership | Exception | None:
    """The instances' ownership, checked ahead (while a batch's records are claimed); what the check raised
    is handed on, to fail the batch where the check is used, as a check made there would."""
    try:
        return classify(rt.aws.ec2, instance_ids, rt.cluster) if instance_ids else None
    except Exception as exc:
        return exc


