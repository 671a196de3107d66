"""The instance types each NodePool can launch: the catalog under its node class (kubelet settings, root
volume, AMI family) and priced as whole nodes (``nodecost``: instance plus EBS volumes), burstable types
only where the pool names them; and the labels that node class gives its nodes (the OS, and the Windows
build)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from ..model import capacityreservation as reservations_model
from ..model import labels as wk
from ..model import nodecost
from ..model.amifamily import AmiError, family_of
from ..model.blockdevices import BlockDeviceError, block_device_mappings
from ..model.capacityreservation import CapacityReservation
from ..model.instancetype import InstanceType, WindowsFamilyError, windows_build
from ..model.nodecapacity import with_kubelet
from ..model.nodepool import NodeClass, NodePool
from ..model.overlays import NodeOverlay, apply_overlays

log = logging.getLogger(__name__)

_GIB = 2**30
# Where each AMI family puts its root volume when no mapping is marked rootVolume.
_ROOT_DEVICES = ("/dev/xvda", "/dev/sda1", "/dev/xvdb")


class PoolTypesError(ValueError):
    """A node class whose instance types cannot be derived; ``str()`` names its source."""


def pool_types(
    pools: Iterable[NodePool],
    classes: Mapping[str, NodeClass],
    catalog: list[InstanceType],
    ebs_prices: Mapping[str, float],
    overlays: Iterable[NodeOverlay] = (),
    reservations: Mapping[str, Sequence[CapacityReservation]] | None = None,
    now: datetime | None = None,
) -> tuple[dict[str, list[InstanceType]], dict[str, dict[str, str]]]:
    """Each pool's instance types under its node class (kubelet, root volume, AMI family, instance store policy), each offering
    priced with the node class's EBS volumes at ``ebs_prices`` (per GB-month by volume type), with the
    NodeOverlays applied (an overlay prices the instance; the volumes still count; one that conflicts
    with another of its weight is logged and not applied), and the labels the node class gives its
    nodes (the OS, and the Windows build). ``reservations`` (node class name -> its capacity reservations)
    add a ``reserved`` offering per reservation, after the volumes and overlays: a reserved node is paid
    for already, so its near-zero price stays near zero."""
    overlays = list(overlays)
    types: dict[str, list[InstanceType]] = {}
    labels: dict[str, dict[str, str]] = {}
    cache: dict[tuple, list[InstanceType]] = {}
    for pool in pools:
        nc = classes.get(pool.node_class)
        family = None
        storage = None
        store_policy = None
        volumes = 0.0
        kubelet = pool.kubelet
        if nc is not None:
            where = f"{nc.source or nc.name}: "
            try:
                family = family_of(nc)
                build = windows_build(family)
            except (AmiError, WindowsFamilyError) as exc:
                raise PoolTypesError(f"{where}{exc}") from None
            storage = _root_volume_bytes(nc)
            store_policy = nc.instance_store_policy
            volumes = _volumes_per_hour(nc, family, ebs_prices)
            kubelet = kubelet or nc.kubelet
            # The AMI decides the OS: a Linux AMI on a Windows-capable type still makes a Linux node.
            labels[pool.name] = {wk.OS: "windows", wk.WINDOWS_BUILD: build} if build else {wk.OS: "linux"}
        key = (id(kubelet), storage, family, volumes, store_policy)
        if key not in cache:
            cache[key] = nodecost.with_node_cost(with_kubelet(catalog, kubelet, storage, family, store_policy), volumes)
        usable = nodecost.usable_types(cache[key], pool.requirements)
        if overlays:
            usable, conflicts = apply_overlays(
                pool.name, pool.labels, usable, overlays, dict.fromkeys((it.name for it in usable), volumes)
            )
            for name in conflicts:
                log.warning("NodeOverlay %s not applied: it conflicts with another overlay of the same weight", name)
        reserved = (reservations or {}).get(pool.node_class) or ()
        if reserved and now is not None:
            usable = reservations_model.with_reservations(usable, reserved, now)
        types[pool.name] = usable
    return types, labels


def catalog_region(catalog: list[InstanceType]) -> str | None:
    """The region the catalog's offerings are in (its types' region label), if any says."""
    return next((r for it in catalog if (r := it.labels.get(wk.REGION))), None)


def _volumes_per_hour(nc: NodeClass, family: str, ebs_prices: Mapping[str, float]) -> float:
    """What the EBS volumes the launcher gives each node of this class cost per hour."""
    try:
        mappings = block_device_mappings(nc, family)
    except BlockDeviceError as exc:
        raise PoolTypesError(str(exc)) from None  # it names the node class's source
    return nodecost.volumes_per_hour(mappings or nodecost.UNKNOWN_ROOT_VOLUME, ebs_prices)


def _root_volume_bytes(nc: NodeClass) -> int | None:
    mappings = {m.get("DeviceName"): m for m in nc.block_device_mappings}
    root = mappings.get(nc.root_volume_device) if nc.root_volume_device else None
    if root is None:
        root = next((mappings[d] for d in _ROOT_DEVICES if d in mappings), None)
    size = ((root or {}).get("Ebs") or {}).get("VolumeSize")
    return int(size) * _GIB if size else None
