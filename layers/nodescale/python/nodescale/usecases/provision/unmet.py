"""Pods that the capacity launched for them cannot take: never launched for again.

    unmet_pods(rt, world, pods) -> dict[pod key, why]
    report_unmet(recorder, pods, unmet)                   a Warning event on each, and a metric

A launch nominates its pods (the ``Nominated`` event, whose ``related`` object names the instance). When that
instance's Node has registered and the pod still waits, unscheduled, while the node does not match
the pod's nodeSelector, required node affinity or tolerations, launching again would only repeat the
mismatch (a label the plan expected and the node lacks, a taint nobody planned): nodescale holds the
pod back and, once the node has been Ready for ``GRACE_SECONDS``, records why and leaves the pod to
the operator. A pod that the node matches but which did not fit
(another pod took the room) is planned as usual.

The event is read only for pods the plan would launch for and that began to wait before some node of
this cluster registered, so a scale-up of fresh pods costs no reads; and for at most ``READS_PER_PASS``
of them a pass, those that have waited longest (the rest are planned as usual, and read on a later pass).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException

from ... import telemetry
from ...k8s import events as k8s_events
from ...k8s import nodes as k8s_nodes
from ...k8s.raw import path_segment, request_json
from ...model.node import ClusterNode
from ...model.pod import Pod
from ...model.taints import Taint, TaintError, tolerates_all
from ...scheduling.inflight import TRANSIENT_TAINT_KEYS
from ...scheduling.templates import daemon_requirements, labels_satisfy
from ..world import World
from .launch import NOMINATED, nominated_instance_of, pending_since

if TYPE_CHECKING:
    from ...runtime import Runtime

log = logging.getLogger(__name__)

# How long a launched node is Ready before a pod it does not take counts as unmet by it: the
# scheduler retries unschedulable pods when a node is added or changed, well within this.
GRACE_SECONDS = 30.0
# Nominations read per pass, for the pods that have waited longest: a pass over 100,000 pending pods must not
# cost the API server a GET per pod. A pass writes at most 1,000 Nominated events per reason
# (capacity.EVENTS_PER_REASON), so most pods of a big scale-up have none to read anyway.
READS_PER_PASS = 200
REASON = "LaunchedNodeMismatch"


def nominated_instance(rt: Runtime, pod: Pod) -> str | None:
    """The instance the pod's Nominated event names (the last launch for it), or None."""
    ref = k8s_events.ObjectRef.pod(pod.namespace, pod.name, pod.uid)
    path = f"/api/v1/namespaces/{path_segment(pod.namespace)}/events/{path_segment(k8s_events.event_name(ref, NOMINATED))}"
    try:
        event = request_json(rt.api, "GET", path)
    except ApiException as exc:
        if exc.status != 404:
            log.warning("could not read a pod's nomination", extra={"pod": pod.key, "error": str(exc)})
        return None
    return nominated_instance_of(event, pod)


def why_node_refuses(node: ClusterNode, pod: Pod, startup_keys: Iterable[str] = ()) -> str | None:
    """Why the node can never take the pod (labels or taints, not room), or None when it could."""
    labels = node.labels
    # The pod's nodeSelector as written: kube-scheduler compares keys literally (no aliases).
    for key, value in sorted(pod.node_selector_labels.items()):
        if labels.get(key) != value:
            have = labels.get(key)
            return f"its nodeSelector wants {key}={value}, the node has {f'{key}={have}' if have is not None else 'no such label'}"
    if not any(labels_satisfy(labels, terms) for terms in daemon_requirements(pod)):
        return "its required node affinity matches none of the node's labels"
    skip = set(TRANSIENT_TAINT_KEYS) | set(startup_keys)
    taints = []
    for t in node.taints:
        if t.get("key") in skip:
            continue
        try:
            taints.append(Taint.from_dict(t, "node taints"))
        except TaintError:
            continue
    taint = tolerates_all(pod.tolerations, tuple(taints))
    return f"it does not tolerate the node's taint {taint}" if taint is not None else None


@dataclass(frozen=True)
class Unmet:
    why: str
    settled: bool  # Ready for the grace period: reported (event, metric); before that only held back


def unmet_pods(rt: Runtime, world: World, pods: Iterable[Pod], exclude: Iterable[str] = ()) -> dict[str, Unmet]:
    """Of ``pods`` (those a plan would launch for), the ones a node launched for them cannot take.

    Such a pod is held back from the moment its node registers (launching again would repeat the
    mismatch), and reported once the node has been Ready for ``GRACE_SECONDS``."""
    out: dict[str, Unmet] = {}
    newest = _newest_registration(world)
    skip = set(exclude)
    waiting: list[tuple[datetime, Pod]] = []
    for pod in pods:
        if pod.node_name:
            continue  # a bound pod being moved (interruption, disruption), not one waiting for capacity
        since = pending_since(pod)
        if newest is None or since is None or since > newest:
            continue  # no node of ours registered since the pod began to wait: none was launched for it
        waiting.append((since, pod))
    waiting.sort(key=lambda item: item[0])
    if len(waiting) > READS_PER_PASS:
        log.info("nominations read for the longest-waiting pods only",
                 extra={"read": READS_PER_PASS, "waiting": len(waiting)})
    for _, pod in waiting[:READS_PER_PASS]:
        iid = nominated_instance(rt, pod)
        node = world.node_for_instance(iid) if iid else None
        if node is None or _leaving(node, skip):
            continue  # never nominated, or that node is gone or going: a launch is in order
        inst = world.instance(iid or "")
        pool = world.nodepools.get(inst.nodepool or "") if inst is not None else None
        why = why_node_refuses(node, pod, [t.key for t in pool.startup_taints] if pool is not None else ())
        if why is None:
            continue
        ready = node.readiness
        settled = ready.ready and ready.since is not None and (world.now - ready.since).total_seconds() >= GRACE_SECONDS
        out[pod.key] = Unmet(f"node {node.name} (instance {iid}), launched for it, cannot take it: {why}; "
                             "nodescale does not launch for it again", settled)
    return out


def _leaving(node: ClusterNode, exclude: set[str]) -> bool:
    """The node is being replaced, drained or deleted: what it refuses says nothing about a new one."""
    return (node.name in exclude or node.instance_id in exclude or node.deleting or node.unschedulable
            or node.has_taint(k8s_nodes.DISRUPTED_TAINT_KEY))


def _newest_registration(world: World) -> datetime | None:
    """When the newest Node of this cluster's instances registered."""
    times = [n.created for n in world.nodes if world.trusted_instance_id(n) is not None]
    return max((t for t in times if t is not None), default=None)


def report_unmet(recorder: k8s_events.EventRecorder | None, pods: Iterable[Pod], unmet: Mapping[str, Unmet]) -> None:
    """A Warning event on each settled unmet pod (none in a dry run) and the metric."""
    settled = {key: u.why for key, u in unmet.items() if u.settled}
    if settled:
        telemetry.count(telemetry.UNMET_BY_LAUNCH, len(settled))
    for pod in pods:
        why = settled.get(pod.key)
        if why is None or recorder is None:
            continue
        log.warning("launched node cannot take the pod", extra={"pod": pod.key, "reason": why})
        try:
            recorder.pod(pod.namespace, pod.name, REASON, why, k8s_events.WARNING, uid=pod.uid)
        except (ApiException, OSError, ValueError) as exc:  # an event is information: never fail the pass
            log.warning("could not record a pod event", extra={"pod": pod.key, "error": str(exc)})
