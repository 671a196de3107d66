"""What the disruption planner is given, read from the world: the node views, cloud-side drift, how
long instances have failed their status checks, and the consolidation simulator (the bin-packer run
with some nodes taken away). Also the cluster gauges the run publishes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError

from ... import clock, telemetry
from ...aws import instances as ec2_instances
from ...disruption.drift import Drifted
from ...disruption.gauges import cluster_gauges
from ...disruption.nodes import NodeView
from ...disruption.replacement import Simulator
from ...disruption.simulator import bin_packing_simulator
from ...model import labels as wk
from ...model.nodelabels import pool_key
from ...model.pod import Pod
from ...scheduling.scheduler import solve
from ..world import World
from .state import IMPAIRED_SINCE, RunState

log = logging.getLogger(__name__)


def buffer_placement(world: World, exclude: Iterable[str] = ()) -> dict[str, list[Pod]]:
    """Node -> the CapacityBuffer pods whose room it keeps: the buffers' pods planned onto the existing
    and in-flight nodes (after the pending pods, which come first), no new node. A buffer pod with no
    room now is the provisioner's to launch for, and holds no node here."""
    buffer = world.buffer_pods
    if not buffer:
        return {}
    plan = solve(list(world.pending) + buffer, [], {}, world.existing_nodes(exclude=exclude), world.daemonset_pods(),
                 set(world.unavailable), node_labels_by_pool=world.labels_by_pool())
    out: dict[str, list[Pod]] = {}
    for placement in plan.existing:
        held = [p for p in placement.pods if p.buffer]
        if held:
            out[placement.node] = held
    return out


def node_views(
    world: World, held: Mapping[str, list[Pod]] | None = None
) -> tuple[list[NodeView], dict[str, Mapping[str, int]]]:
    """This system's nodes (a known NodePool and an instance tagged for this cluster), and their capacities;
    ``held`` (from :func:`buffer_placement`) gives each node the CapacityBuffer pods it keeps room for."""
    out: list[NodeView] = []
    capacities: dict[str, Mapping[str, int]] = {}
    for node in world.nodes:
        pool = pool_key(node.labels, world.nodepools)
        iid = world.trusted_instance_id(node)  # an untrusted Node (#27.5) is never a candidate
        inst = world.instance(iid) if iid else None
        if pool not in world.nodepools or inst is None:
            continue
        if node.resources.error:
            # Its capacity cannot be read (existing_nodes warns and leaves it out of planning): nothing
            # could be weighed against it, so it is no candidate either; the others still are.
            log.debug("node left out of disruption", extra={"node": node.name, "reason": node.resources.error})
            continue
        name = node.name
        view = NodeView.from_node(node, world.pods_by_node.get(name, []), world.price_of(inst), world.nodepools)
        if not view.capacity_type:
            view.capacity_type = inst.capacity_type
        view.buffer_pods = list((held or {}).get(name, []))
        out.append(view)
        capacities[name] = node.resources.capacity
    return out, capacities


def cloud_drift(run: RunState, views: Iterable[NodeView], skip: set[str]) -> dict[str, Drifted]:
    """Node -> why its instance no longer matches what its pool would launch (the launcher's answer)."""
    out: dict[str, Drifted] = {}
    broken: set[str] = set()
    for v in views:
        if v.name in skip or v.nodepool in broken:
            continue
        pool = run.world.nodepools[v.nodepool]
        node_class = run.world.nodeclasses.get(pool.node_class)
        inst = run.world.instance(v.instance_id)
        if node_class is None or inst is None:
            continue
        try:
            why = run.rt.launcher.drift(inst, pool, node_class)
        except Exception as exc:  # noqa: BLE001 - an unresolvable node class is no reason to replace nodes
            broken.add(v.nodepool)
            run.report.notes.append(f"drift of NodePool {v.nodepool} not checked: {exc}")
            continue
        if why:
            out[v.name] = why
    return out


def impaired_since(run: RunState, views: Iterable[NodeView], skip: set[str]) -> dict[str, datetime]:
    """Node -> since when its instance fails EC2 status checks; the moment is kept on the node between runs."""
    wanted = {v.instance_id: v for v in views if v.name not in skip}
    if not wanted:
        return {}
    try:
        impaired = ec2_instances.impaired_instances(run.rt.aws.ec2)
    except (ClientError, BotoCoreError) as exc:
        run.report.notes.append(f"EC2 status checks not read: {exc}")
        return {}
    out: dict[str, datetime] = {}
    for iid, v in wanted.items():
        recorded = clock.parse_timestamp(v.annotations.get(IMPAIRED_SINCE))
        if iid in impaired:
            if recorded is None:
                recorded = run.world.now
                run.annotate(v.name, {IMPAIRED_SINCE: clock.format_timestamp(recorded)})
            out[v.name] = recorded
        elif recorded is not None:
            run.annotate(v.name, {IMPAIRED_SINCE: None})
    return out


def simulator(world: World, in_progress: set[str], held: Mapping[str, list[Pod]] | None = None) -> Simulator:
    """What becomes of the pods of some nodes were those nodes gone (nodes in progress are gone already);
    ``held``: node -> the CapacityBuffer pods whose room it keeps (buffer_placement)."""
    # A node in a zone under a zonal shift takes no pods moved off another (Karpenter's Zonal Shift RFC: no
    # voluntary disruption that relies on scheduling pods into the shifted zone); EKS cordons them too.
    shifted = world.shifted_zones()
    existing = [e for e in world.existing_nodes(exclude=in_progress) if e.labels.get(wk.ZONE) not in shifted]
    return bin_packing_simulator(
        existing, list(world.nodepools.values()), world.types_by_pool(), world.daemonset_pods(), world.unavailable,
        list(world.pending), node_labels_by_pool=world.labels_by_pool(),
        held=[p for pods in (held or {}).values() for p in pods], repack=world.gates.repack,
    )


def emit_gauges(views: Iterable[NodeView], capacities: Mapping[str, Mapping[str, int]], world: World) -> None:
    g = cluster_gauges(views, capacities, world.nodepools)
    for (pool, ct), n in g.nodes.items():
        telemetry.gauge(telemetry.NODES, n, telemetry.Unit.Count,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.CAPACITY_TYPE_DIMENSION: ct})
    telemetry.gauge(telemetry.PRICE_PER_HOUR, round(g.price_per_hour, 6))
    telemetry.gauge(telemetry.MANAGED_CPU, g.cpu, telemetry.Unit.Count)
    telemetry.gauge(telemetry.MANAGED_MEMORY_GIB, round(g.memory_gib, 3), telemetry.Unit.Gigabytes)
    for (pool, resource), value in g.usage.items():
        telemetry.gauge(telemetry.NODEPOOL_USAGE, value,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.RESOURCE_DIMENSION: resource})
    for (pool, resource), value in g.limits.items():
        telemetry.gauge(telemetry.NODEPOOL_LIMIT, value,
                        **{telemetry.NODEPOOL_DIMENSION: pool, telemetry.RESOURCE_DIMENSION: resource})
