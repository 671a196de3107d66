"""The instance types each NodePool can launch: the catalog under its node class (kubelet settings, root
volume, AMI family), and the labels that node class gives its nodes (the OS, and the Windows build)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model import labels as wk
from ..model.instancetype import InstanceType, WindowsFamilyError, windows_build
from ..model.nodepool import NodeClass, NodePool
from . import ami
from .catalog import with_kubelet

_GIB = 2**30
# Where each AMI family puts its root volume when no mapping is marked rootVolume.
_ROOT_DEVICES = ("/dev/xvda", "/dev/sda1", "/dev/xvdb")


class PoolTypesError(ValueError):
    """A node class whose instance types cannot be derived; ``str()`` names its source."""


def pool_types(
    pools: Iterable[NodePool], classes: Mapping[str, NodeClass], catalog: list[InstanceType]
) -> tuple[dict[str, list[InstanceType]], dict[str, dict[str, str]]]:
    """Each pool's instance types under its node class (kubelet, root volume, AMI family) and the labels
    the node class gives its nodes (the OS, and the Windows build)."""
    types: dict[str, list[InstanceType]] = {}
    labels: dict[str, dict[str, str]] = {}
    cache: dict[tuple, list[InstanceType]] = {}
    for pool in pools:
        nc = classes.get(pool.node_class)
        family = None
        storage = None
        kubelet = pool.kubelet
        if nc is not None:
            where = f"{nc.source or nc.name}: "
            try:
                family = ami.family_of(nc)
                build = windows_build(family)
            except (ami.AmiError, WindowsFamilyError) as exc:
                raise PoolTypesError(f"{where}{exc}") from None
            storage = _root_volume_bytes(nc)
            kubelet = kubelet or nc.kubelet
            # The AMI decides the OS: a Linux AMI on a Windows-capable type still makes a Linux node.
            labels[pool.name] = {wk.OS: "windows", wk.WINDOWS_BUILD: build} if build else {wk.OS: "linux"}
        key = (id(kubelet), storage, family)
        if key not in cache:
            cache[key] = with_kubelet(catalog, kubelet, storage, family)
        types[pool.name] = cache[key]
    return types, labels


def _root_volume_bytes(nc: NodeClass) -> int | None:
    mappings = {m.get("DeviceName"): m for m in nc.block_device_mappings}
    root = mappings.get(nc.root_volume_device) if nc.root_volume_device else None
    if root is None:
        root = next((mappings[d] for d in _ROOT_DEVICES if d in mappings), None)
    size = ((root or {}).get("Ebs") or {}).get("VolumeSize")
    return int(size) * _GIB if size else None
