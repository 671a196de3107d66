"""Destroy-time cleanup: when the stack goes, the capacity it made goes with it (unless asked to stay).

    run(rt, retain=False) -> summary         cordon, drain and terminate every instance tagged for this
                                             cluster, delete the Nodes and this system's launch templates
    run_without_cluster(settings, aws, ...)  the same when the Kubernetes API cannot be reached (the
                                             cluster went first): instances and templates only

Only what carries ``nodescale.io/cluster: <cluster>`` is touched. Pods get one drain period (PDBs
honoured, do-not-disrupt not: the nodes go regardless); what is still there when it ends is deleted
with its node. With ``retain`` nothing is changed and the summary says what was kept, so moving the
nodes to another autoscaler is a deliberate choice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from .. import clock
from ..aws import instances as ec2_instances
from ..aws import launchtemplates
from ..aws.clients import AwsClients
from ..base_runtime import BaseRuntime
from ..disruption.drain_policy import DrainResult
from ..k8s import drain as k8s_drain
from ..k8s import finalizers as k8s_finalizers
from ..k8s import listing
from ..k8s import nodeclaims as k8s_nodeclaims
from ..k8s import nodes as k8s_nodes
from ..k8s.http import ApiClient
from ..model.labels import TERMINATION_FINALIZER
from ..model.node import ClusterNode, parse_provider_id
from ..settings import Settings

log = logging.getLogger(__name__)

# How long pods get to leave before their nodes are terminated anyway (the function runs up to 15 minutes).
DRAIN_SECONDS = 300.0


@dataclass
class CleanupSummary:
    cluster: str
    retained: bool
    instances: list[str] = field(default_factory=list)  # terminated (or, when retained, kept)
    nodes: list[str] = field(default_factory=list)  # deleted (or kept)
    launch_templates: list[str] = field(default_factory=list)  # deleted (or kept)
    pods_evicted: int = 0
    pods_left: list[str] = field(default_factory=list)  # still on a node when its drain time ran out
    errors: list[str] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "retained": self.retained,
            "instances": self.instances,
            "nodes": self.nodes,
            "launchTemplates": self.launch_templates,
            "podsEvicted": self.pods_evicted,
            "podsLeft": self.pods_left,
            "errors": self.errors,
            "message": self.message,
        }


def run(rt: BaseRuntime, retain: bool, *, drain_seconds: float = DRAIN_SECONDS,
        sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    return _run(rt.settings, rt.aws, rt.api, retain, drain_seconds, sleep)


def run_without_cluster(settings: Settings, aws: AwsClients, retain: bool) -> dict[str, Any]:
    return _run(settings, aws, None, retain, 0.0, time.sleep)


def _run(
    settings: Settings, aws: AwsClients, api: ApiClient | None, retain: bool, drain_seconds: float,
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    cluster = settings.cluster_name
    summary = CleanupSummary(cluster, retain)
    instances = ec2_instances.list_instances(aws.ec2, cluster)
    templates = [t["LaunchTemplateName"] for t in launchtemplates.list_managed(aws.ec2, cluster)]
    ids = {i.instance_id for i in instances}
    nodes: list[ClusterNode] = []
    if api is not None:
        try:
            nodes = [v for v in map(ClusterNode.from_dict, listing.list_nodes(api).items) if v.instance_id in ids]
        except (ApiException, HTTPError, OSError) as exc:
            summary.errors.append(f"the Kubernetes API could not be read ({exc}); instances go without a drain")
            api = None
    names = sorted(v.name for v in nodes)
    if retain:
        summary.instances, summary.nodes, summary.launch_templates = sorted(ids), names, sorted(templates)
        summary.message = (
            f"RetainNodes is true: kept {len(ids)} instance(s), {len(names)} node(s) and {len(templates)} launch "
            f"template(s) of cluster {cluster}; nothing was removed"
        )
        log.info(summary.message, extra={"instances": summary.instances})
        return summary.to_dict()

    if api is not None and names:
        _drain(api, names, summary, drain_seconds, sleep)
    result = ec2_instances.terminate(aws.ec2, ids, cluster)
    summary.instances = sorted(result.terminated)
    if api is not None:
        for name in names:
            try:
                # False means already gone (the instance's end can remove its Node first): removed all the same.
                k8s_nodes.delete_node(api, name)
                # The stack is going: nothing would ever finish that termination, and this run did its work.
                k8s_finalizers.release(api, k8s_nodes.node_path(name), TERMINATION_FINALIZER)
                summary.nodes.append(name)
            except (ApiException, HTTPError, OSError, k8s_finalizers.FinalizerConflict) as exc:
                summary.errors.append(f"node {name} not deleted: {exc}")
        _delete_nodeclaims(api, ids, summary)
    summary.launch_templates = sorted(
        launchtemplates.cleanup_unused(aws.ec2, cluster, (), min_age_seconds=0.0, now=clock.now())
    )
    summary.message = (
        f"removed {len(summary.instances)} instance(s), {len(summary.nodes)} node(s) and "
        f"{len(summary.launch_templates)} launch template(s) of cluster {cluster}"
    )
    # Nested under one key: the summary's `message` is a LogRecord attribute, which `extra` may not set
    # (logging raises KeyError, and `cdk destroy` failed on it).
    log.info(summary.message, extra={"summary": summary.to_dict()})
    return summary.to_dict()


def _delete_nodeclaims(api: ApiClient, ids: set[str], summary: CleanupSummary) -> None:
    """The NodeClaims of the instances this cleanup terminated (#30.1), released and deleted."""
    try:
        claims = k8s_nodeclaims.list_all(api)
    except k8s_nodeclaims.NodeClaimsMissing:
        return
    except (ApiException, HTTPError, OSError) as exc:
        summary.errors.append(f"NodeClaims not read: {exc}")
        return
    for claim in claims:
        parsed = parse_provider_id(str((claim.get("status") or {}).get("providerID") or ""))
        name = str((claim.get("metadata") or {}).get("name") or "")
        if parsed is None or parsed[1] not in ids:
            continue
        try:
            k8s_nodeclaims.delete(api, name)
        except (ApiException, HTTPError, OSError) as exc:
            summary.errors.append(f"NodeClaim {name} not deleted: {exc}")


def _drain(api: ApiClient, names: list[str], summary: CleanupSummary, seconds: float,
           sleep: Callable[[float], None]) -> None:
    """Cordon and taint every node, then drain them together until empty or the time is up (the drain
    loop's backoff between rounds); what is left then is deleted by a last round."""
    for name in names:
        try:
            k8s_nodes.mark_disrupted(api, name)
        except k8s_nodes.NodeGoneError:
            continue
        except (ApiException, HTTPError, OSError) as exc:
            summary.errors.append(f"node {name} not cordoned: {exc}")
    left = list(names)
    remaining: dict[str, list[str]] = {}

    def round_(delete_after: datetime) -> DrainResult | None:
        nonlocal left
        blocking = DrainResult(node=",".join(left))
        for name in left:
            try:
                result = k8s_drain.drain_round(api, name, involuntary=True, delete_after=delete_after, now=clock.now)
            except (ApiException, HTTPError, OSError) as exc:
                summary.errors.append(f"node {name} not drained: {exc}")
                remaining.pop(name, None)
                continue
            summary.pods_evicted += len(result.evicted)
            remaining[name] = result.remaining
            blocking.blocked_by_pdb += result.blocked_by_pdb
            blocking.failed.update(result.failed)
            blocking.retry_after = max(blocking.retry_after, result.retry_after)
        left = [n for n in left if remaining.get(n)]
        return blocking if left else None

    force_at = clock.now() + timedelta(seconds=seconds)
    if not k8s_drain.drain_rounds(lambda: round_(force_at), until=time.monotonic() + seconds, sleep=sleep):
        # The drain period is over: one last round deletes what is still there rather than evicting it.
        round_(clock.now())
    summary.pods_left = sorted(p for n in left for p in remaining.get(n, []))
