"""An instance type as a node of a given node class: capacity and kube/system-reserved overhead for its
kubelet settings, root volume and AMI family, and, for a Windows family, the license-included prices."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from . import labels as wk
from . import overhead as oh
from . import resources as res
from .catalog_facts import TypeFacts, gpu_resource
from .instancetype import InstanceType, windows_build
from .nodepool import KubeletSettings


def capacity_and_overhead(
    facts: TypeFacts,
    kubelet: KubeletSettings | None = None,
    ephemeral_storage_bytes: int | None = None,
    ami_family: str | None = None,
    branch_interfaces: int = 0,
) -> tuple[res.Resources, res.Resources]:
    """Node capacity and kube-reserved + system-reserved + eviction threshold (see ``overhead``).
    ``branch_interfaces``: what the VPC resource controller advertises as ``vpc.amazonaws.com/pod-eni`` on
    the type (EC2 does not report it, so the caller looks it up; 0 for a type that cannot trunk)."""
    ami = oh.ami_behaviour(ami_family)
    storage = (
        ephemeral_storage_bytes if ephemeral_storage_bytes is not None else ami.default_ephemeral_storage
    )
    eni_pods = oh.eni_limited_pods(facts.max_enis, facts.ipv4_per_eni)
    pods = oh.max_pods(facts.vcpu, eni_pods, kubelet, ami, facts.ipv4_per_eni)
    cpu = facts.vcpu * 1000
    memory = oh.memory_capacity(facts.memory_mib, facts.kube_arch)
    capacity: res.Resources = {
        res.CPU: cpu,
        res.MEMORY: memory,
        res.EPHEMERAL_STORAGE: storage,
        res.PODS: pods,
    }
    gpu = gpu_resource(facts)
    if gpu is not None:
        capacity[gpu] = facts.gpu_count
    if facts.neuron_count:
        capacity[res.NEURON] = facts.neuron_count
    if facts.neuron_cores:
        capacity[res.NEURON_CORE] = facts.neuron_cores
    if facts.efa_max:
        capacity[res.EFA] = facts.efa_max
    if branch_interfaces and ami.branch_interfaces:
        capacity[res.POD_ENI] = branch_interfaces
    if ami.primary_interface_density:
        capacity[res.PRIVATE_IPV4] = oh.primary_interface_addresses(facts.ipv4_per_eni)
    return capacity, oh.node_overhead(cpu, memory, storage, pods, eni_pods, kubelet, ami)


def instance_store_bytes(facts: TypeFacts) -> int | None:
    """The node's ephemeral storage under ``instanceStorePolicy: RAID0``: its NVMe instance store, in
    decimal gigabytes as EC2 reports them (the provider's "%dG"); None for a type without one (the root
    volume stays the node's storage). Only NVMe disks count: they are what the AMIs' RAID0 set-up assembles."""
    return facts.local_nvme_gib * 10**9 if facts.local_nvme_gib else None


def with_kubelet(
    types: Sequence[InstanceType],
    kubelet: KubeletSettings | None,
    ephemeral_storage_bytes: int | None,
    ami_family: str | None = None,
    instance_store_policy: str | None = None,
) -> list[InstanceType]:
    """The types with capacity and overhead recomputed for a node class's kubelet settings, root volume
    size, AMI family (which decides the Windows build, how the bootstrap reserves memory, and, for
    Windows, the license-included prices) and instance store policy (with RAID0 a type's instance store
    is its ephemeral storage, as the provider's ``ephemeralStorage``).

    Types without EC2 facts (kwok, benchmark) are returned unchanged. Node classes that add nothing
    (no kubelet, default volume, AL2-like family, no RAID0) get the very same objects back.
    """
    ami = oh.ami_behaviour(ami_family)
    raid0 = instance_store_policy == "RAID0"
    if kubelet is None and ephemeral_storage_bytes is None and ami is oh.ami_behaviour(None) and not raid0:
        return list(types)
    windows = ami is oh.ami_behaviour("windows")
    out = []
    for it in types:
        facts = it.facts
        if not isinstance(facts, TypeFacts):
            out.append(it)
            continue
        # Branch interfaces depend on the type alone, not on the node class: keep what the catalog found.
        storage = (instance_store_bytes(facts) if raid0 else None) or ephemeral_storage_bytes
        capacity, overhead = capacity_and_overhead(
            facts, kubelet, storage, ami_family, it.capacity.get(res.POD_ENI, 0)
        )
        changes: dict[str, Any] = {"capacity": capacity, "overhead": overhead}
        if windows:
            # A Windows AMI makes the node a Windows node; a type that cannot run Windows offers nothing.
            changes["operating_systems"] = frozenset({"windows"}) if facts.windows else frozenset()
            build = windows_build(ami_family)
            # ... and pays the Windows license: its offerings take their license-included prices.
            changes["offerings"] = tuple(
                dataclasses.replace(o, price=it.windows_prices[(o.zone, o.capacity_type)])
                if (o.zone, o.capacity_type) in it.windows_prices
                else o
                for o in it.offerings
            )
            changes["labels"] = {
                **it.labels,
                wk.OS: "windows",
                **({wk.WINDOWS_BUILD: build} if build else {}),
            }
        out.append(it.copy(**changes))
    return out
