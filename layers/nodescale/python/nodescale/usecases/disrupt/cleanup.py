"""The disruption run's clean-up of leftovers: this cluster's instances that never registered as Nodes,
Nodes whose instance is gone, launch templates no NodePool would use today, and NodeClaims deleted with
nodescale's finalizer (``usecases/finalize``).

Each part writes what it removed (or, in a dry run, would remove) into the run's report.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ... import telemetry
from ...aws import instances as ec2_instances
from ...aws import launchtemplates
from ...aws.ownership import GONE_STATES, classify
from ...disruption.decisions import ORPHANED
from ...k8s import nodes as k8s_nodes
from ...model.nodelabels import pool_key
from ..finalize import finalize_nodeclaims
from ..terminate import release
from .state import RunState

# Launch templates younger than this are kept: another function may be launching with one.
TEMPLATE_MIN_AGE_SECONDS = 600.0


def clean_up(run: RunState) -> None:
    unregistered_instances(run)
    orphaned_nodes(run)
    unused_launch_templates(run)
    deleted_nodeclaims(run)


def deleted_nodeclaims(run: RunState) -> None:
    """One step further for every NodeClaim deleted with nodescale's finalizer."""
    if run.dry_run:
        return
    try:
        steps = finalize_nodeclaims(run.rt, run.world)
    except (ApiException, ClientError, BotoCoreError) as exc:
        run.report.errors.append(f"deleted NodeClaims: {exc}; the next pass tries again")
        return
    if steps:
        run.report.cleanup["nodeClaims"] = [f"{s.name}: {s.state}" + (f" ({s.reason})" if s.reason else "")
                                            for s in steps]


def unregistered_instances(run: RunState) -> None:
    """Terminate this cluster's instances that no Node registered for within the registration timeout."""
    timeout = run.rt.settings.registration_timeout_seconds
    stale = ec2_instances.unregistered(run.world.unregistered_instances(), (), timeout, now=run.world.now)
    ids = [i.instance_id for i in stale]
    if not ids:
        return
    if not run.dry_run:
        ids = ec2_instances.terminate(run.rt.aws.ec2, ids, run.rt.cluster).terminated
        if ids:
            telemetry.count(telemetry.NODES_TERMINATED, len(ids), **{telemetry.REASON_DIMENSION: ORPHANED})
    for iid in ids:
        run.log.info(
            f"terminated instance {iid}: no Node registered within {int(timeout)}s",
            extra={"instance_id": iid, "decision": ORPHANED, "dry_run": run.dry_run},
        )
    run.report.cleanup["unregisteredInstances"] = ids


def orphaned_nodes(run: RunState) -> None:
    """Delete Nodes of this system whose instance EC2 says is gone (or never knew)."""
    world = run.world
    suspects: dict[str, str] = {}
    for node in world.nodes:
        iid = node.instance_id
        if not iid or world.instance(iid) is not None:
            continue
        suspects[iid] = node.name
    if not suspects:
        return
    found = classify(run.rt.aws.ec2, suspects, run.rt.cluster)
    removed = []
    for iid, name in suspects.items():
        view = run.node_by_name.get(name)
        owned = found.owned.get(iid)
        if owned is not None:
            if owned.state not in GONE_STATES:
                continue  # stopped, not gone: repair looks after it
        elif not (view is not None and pool_key(view.labels, world.nodepools) in world.nodepools
                  and found.missing(iid)):
            continue  # someone else's instance, or a node nodescale never made
        if not run.dry_run:
            if not k8s_nodes.delete_node(run.rt.api, name):
                continue
            release(run.rt, name)  # the instance is gone: nothing left for the finalizer to wait for
        removed.append(name)
        run.log.info(
            f"deleted node {name}: its instance {iid} no longer exists",
            extra={"node": name, "instance_id": iid, "decision": ORPHANED, "dry_run": run.dry_run},
        )
    # The decisions that follow must not see the deleted nodes.
    run.world = world.without_nodes(removed)
    run.report.cleanup["orphanedNodes"] = removed


def unused_launch_templates(run: RunState) -> None:
    """Delete this cluster's launch templates that no NodePool renders today (all kept if one cannot be)."""
    in_use = _templates_in_use(run)
    if not in_use:
        return  # no pools, or one unresolvable: nothing proves a template unused
    ec2, cluster = run.rt.aws.ec2, run.rt.cluster
    if run.dry_run:
        current = launchtemplates.list_managed(ec2, cluster)
        run.report.cleanup["launchTemplates"] = sorted(
            t["LaunchTemplateName"] for t in current if t["LaunchTemplateName"] not in in_use
        )
        return
    run.report.cleanup["launchTemplates"] = launchtemplates.cleanup_unused(
        ec2, cluster, in_use, TEMPLATE_MIN_AGE_SECONDS, now=run.world.now
    )


def _templates_in_use(run: RunState) -> set[str]:
    """The names of the templates today's pools would launch with; empty when any pool cannot say."""
    in_use: set[str] = set()
    for pool in run.world.nodepools.values():
        node_class = run.world.nodeclasses.get(pool.node_class)
        if node_class is None:
            return set()
        try:
            in_use |= run.rt.launcher.current_template_names(pool, node_class, run.world.instance_types(pool.name))
        except Exception as exc:  # noqa: BLE001 - any failure to render today's templates means keep them all
            run.report.notes.append(f"launch templates kept: NodePool {pool.name} cannot be resolved ({exc})")
            return set()
    return in_use
