"""Where a world's cloud-side facts come from: the region's instance types (EC2, else the bundled data, kept
for a while per container), the zonal shifts in force, and each node class's capacity reservations; what
the pods' persistent volumes require of their nodes; and the cluster's NodeClaims."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubernetes.client.exceptions import ApiException

from .. import clock
from ..aws import capacityreservations, zonalshifts
from ..aws import catalog as catalogs
from ..k8s import nodeclaims as k8s_nodeclaims
from ..k8s.volumes import read_volume_objects
from ..model.buffers import CapacityBuffer
from ..model.capacityreservation import CapacityReservation
from ..model.featuregates import FeatureGates, ignored_by_gates
from ..model.instancetype import InstanceType
from ..model.nodepool import NodeClass
from ..model.overlays import NodeOverlay
from ..model.pod import Pod
from ..model.zonalshift import ActiveShift
from ..scheduling.volumetopology import (
    VolumeObjects,
    VolumeTopologyError,
    pods_use_claims,
    volume_requirements,
)
from ..scheduling.volumeusage import pod_volumes

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger(__name__)

# What a gate that is off left unread, already logged by this container: said once, not every pass.
_told_ignored: set[str] = set()

# The live catalog costs several EC2 calls; a warm Lambda container reuses it for this long.
CATALOG_TTL_SECONDS = 900.0
_CATALOG_LOCK = threading.Lock()
_CATALOG: dict[str, tuple[float, list[InstanceType]]] = {}


def gated(gates: FeatureGates, overlays: Mapping[str, NodeOverlay], buffers: Mapping[str, CapacityBuffer],
          ) -> tuple[dict[str, NodeOverlay], dict[str, CapacityBuffer]]:
    """The NodeOverlays and CapacityBuffers to read: none of a kind whose gate is off, as Karpenter runs no
    controller for it then. What is left out is logged once per container while it stays the same."""
    for line in ignored_by_gates(gates, overlays, buffers):
        if line not in _told_ignored:
            _told_ignored.add(line)
            log.warning("%s", line)
    return (dict(overlays) if gates.node_overlay else {}), (dict(buffers) if gates.capacity_buffer else {})


def read_shifts(rt: Runtime, types: list[InstanceType]) -> dict[str, ActiveShift]:
    """The zonal shifts in force for the zones the catalog knows by id (DescribeAvailabilityZones): one
    BatchGetItem. Without zone ids (DescribeAvailabilityZones failed) no shift can be mapped to a zone name."""
    zone_ids = {o.zone_id for it in types for o in it.offerings if o.zone_id}
    if not zone_ids:
        return {}
    shifts = zonalshifts.active(rt.aws.dynamodb, rt.settings.table_name, zone_ids, clock.epoch())
    if shifts:
        log.info("zones under a zonal shift: no launches there", extra={"zone_ids": sorted(shifts)})
    return shifts


def read_reservations(ec2: Any, classes: Iterable[NodeClass], now: datetime) -> dict[str, list[CapacityReservation]]:
    """The capacity reservations each node class selects (only classes with capacityReservationSelectorTerms
    ask EC2; classes with the same terms ask once)."""
    out: dict[str, list[CapacityReservation]] = {}
    asked: dict[tuple, list[CapacityReservation]] = {}
    for nc in classes:
        terms = nc.capacity_reservation_selector_terms
        if not terms:
            continue
        key = tuple((t.id, tuple(sorted(t.tags.items())), t.owner_id, t.instance_match_criteria) for t in terms)
        if key not in asked:
            asked[key] = capacityreservations.discover(ec2, terms, now)
        out[nc.name] = asked[key]
    return out


def catalog(rt: Runtime) -> list[InstanceType]:
    """The region's instance types from EC2 (each part EC2 cannot give from the bundled data), kept
    for a while per process; the bundled catalog when EC2 answers nothing usable."""
    region = rt.settings.region
    now = time.monotonic()
    with _CATALOG_LOCK:
        cached = _CATALOG.get(region)
        if cached is not None and now - cached[0] < CATALOG_TTL_SECONDS:
            return cached[1]
    try:
        types = catalogs.live_catalog(rt.aws.ec2, region)
    except catalogs.CatalogError as exc:
        log.warning("live catalog unusable; using the bundled one", extra={"reason": str(exc)})
        types = []
    if not types:
        types = catalogs.bundled_catalog(region)
    with _CATALOG_LOCK:
        _CATALOG[region] = (now, types)
    return types


def read_volumes(rt: Runtime, raw_pods: Iterable[Mapping[str, Any]]) -> VolumeObjects:
    """The claims, PersistentVolumes, StorageClasses and CSINodes, read only when some pod names a claim."""
    return read_volume_objects(rt.api) if pods_use_claims(raw_pods) else VolumeObjects()


def apply_volume_topology(pod: Pod, objects: VolumeObjects) -> str | None:
    """Give the pod what its volumes require of a node (#31.1); why not, for a pending pod that cannot be
    planned for. A bound pod whose volume cannot be read keeps its own requirements only, with a log line.
    Its claims per CSI driver count against a node's attachment limits either way."""
    pod.volumes = pod_volumes(pod.raw, objects)
    try:
        pod.volume_requirements = volume_requirements(pod.raw, objects)
    except VolumeTopologyError as exc:
        if not pod.node_name:
            return str(exc)
        log.warning("volume topology of a bound pod left out: %s", exc, extra={"pod": pod.key})
    return None


def with_volume_topology(
    pods_by_node: Mapping[str, list[Pod]], pending: list[Pod], objects: VolumeObjects,
) -> tuple[list[Pod], list[tuple[str, str]]]:
    """Every pod with its volume requirements; the pending pods still to plan and those refused, with why."""
    if objects.claims:  # without a claim in the cluster no bound pod has a volume requirement
        for pods in pods_by_node.values():
            for pod in pods:
                apply_volume_topology(pod, objects)
    kept: list[Pod] = []
    refused: list[tuple[str, str]] = []
    for pod in pending:
        why = apply_volume_topology(pod, objects)
        if why is None:
            kept.append(pod)
        else:
            refused.append((pod.key, why))
    return kept, refused


def read_nodeclaims(rt: Runtime) -> list[dict[str, Any]] | None:
    """Every NodeClaim, read once a pass (#30.1); None without the CRD (a warning once per invocation, and no
    NodeClaim is created in it) or when the list fails: then capacity in flight is read from EC2 alone."""
    book = rt.nodeclaims
    if book.missing:
        return None
    try:
        return k8s_nodeclaims.list_all(rt.api)
    except k8s_nodeclaims.NodeClaimsMissing:
        book.missing = True
        log.warning("the cluster has no NodeClaim CRD (nodeclaims.karpenter.sh): NodeClaims are not kept")
        return None
    except ApiException as exc:
        log.warning("could not list NodeClaims", extra={"error": str(exc)})
        return None
