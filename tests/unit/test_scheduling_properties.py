"""Random workloads: whatever the packer decides, every rule a pod states still holds in the plan."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.model.taints import Taint
from nodescale.scheduling.plan import ExistingNode, Plan
from nodescale.scheduling.scheduler import solve

GIB = 2**30
ZONES = ("zone-a", "zone-b", "zone-c")
TAINT = Taint("dedicated", "NoSchedule", "batch")


def _types() -> list[InstanceType]:
    out = []
    for i, (cpu, ratio, arch) in enumerate(
        [(2, 2, "amd64"), (2, 4, "amd64"), (4, 4, "amd64"), (8, 2, "amd64"), (16, 8, "amd64"), (4, 4, "arm64"),
         (16, 4, "arm64"), (32, 4, "amd64")]
    ):
        price = cpu * 0.04 + cpu * ratio * 0.005 - (0.01 if arch == "arm64" else 0)
        offerings = tuple(Offering(z, ct, round(price * (0.35 if ct == "spot" else 1) * (1 + 0.02 * j), 5))
                          for j, z in enumerate(ZONES) for ct in ("spot", "on-demand"))
        name = f"t{i}.{arch}"
        out.append(InstanceType(name, {wk.INSTANCE_TYPE: name, wk.ARCH: arch, wk.OS: "linux"},
                                {"cpu": cpu * 1000, "memory": cpu * ratio * GIB, "pods": 29}, {"cpu": 80, "memory": 256 << 20},
                                offerings))
    return out


TYPES = _types()
BY_NAME = {t.name: t for t in TYPES}
POOLS = [
    NodePool("general", Requirements(), "default"),
    NodePool("batch", Requirements([Requirement.create(wk.CAPACITY_TYPE, "In", ["spot"])]), "default", weight=5,
             taints=(TAINT,)),
]
DAEMON = Pod.from_dict({
    "metadata": {"name": "agent", "namespace": "kube-system",
                 "ownerReferences": [{"kind": "DaemonSet", "name": "agent", "controller": True}]},
    "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "150m", "memory": "200Mi"}}}]},
})
KINDS = ("plain", "zone-spread", "host-spread", "host-anti", "zone-self", "arm", "batch")


def _group(rnd: random.Random, g: int) -> list[Pod]:
    kind = rnd.choice(KINDS)
    app = f"g{g}"
    sel = {"matchLabels": {"app": app}}
    spec: dict = {}
    if kind == "zone-spread":
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": wk.ZONE,
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
    elif kind == "host-spread":
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": wk.HOSTNAME,
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
    elif kind == "host-anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": wk.HOSTNAME, "labelSelector": sel}]}}
    elif kind == "zone-self":
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": wk.ZONE, "labelSelector": sel}]}}
    elif kind == "arm":
        spec["nodeSelector"] = {wk.ARCH: "arm64"}
    elif kind == "batch":
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
        spec["nodeSelector"] = {wk.CAPACITY_TYPE: "spot"}
    cpu = rnd.choice((100, 250, 500, 1000, 1500, 3000))
    memory = rnd.choice((128, 512, 1024, 4096))
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{memory}Mi"}}}],
            **spec}
    first = Pod.from_dict({"metadata": {"name": f"{app}-0", "namespace": "default",
                                        "labels": {"app": app, "kind": kind}}, "spec": body})
    return [first] + [replace(first, name=f"{app}-{i}") for i in range(1, rnd.randint(1, 25))]


def _existing(rnd: random.Random) -> list[ExistingNode]:
    nodes = []
    for i in range(rnd.randint(0, 3)):
        zone = rnd.choice(ZONES)
        labels = {wk.ZONE: zone, wk.HOSTNAME: f"node-{i}", wk.ARCH: "amd64", wk.OS: "linux",
                  wk.CAPACITY_TYPE: "on-demand", wk.NODEPOOL: "general"}
        nodes.append(ExistingNode(f"node-{i}", labels, {"cpu": 4000, "memory": 16 * GIB, "pods": 29}))
    return nodes


def _check(plan: Plan, workload: list[Pod], nodes: list[ExistingNode]) -> None:
    seen = Counter(id(p) for c in plan.node_claims for p in c.pods)
    seen.update(id(p) for e in plan.existing for p in e.pods)
    seen.update(id(u.pod) for u in plan.unschedulable)
    assert all(seen[id(p)] == 1 for p in workload)
    assert len(seen) == len(workload)

    placements: list[tuple[list[Pod], str | None, str]] = []  # pods, zone, node id
    for i, c in enumerate(plan.node_claims):
        total = Counter()
        for p in c.pods:
            total.update(p.requests)
        for name in c.instance_types:
            alloc = BY_NAME[name].allocatable
            daemon = 0 if c.nodepool == "batch" else 1  # the agent does not tolerate the batch taint
            assert total["cpu"] + daemon * 150 <= alloc["cpu"], (name, total)
            assert total["memory"] + daemon * (200 << 20) <= alloc["memory"], (name, total)
            assert total["pods"] <= alloc["pods"]
        for p in c.pods:
            kind = p.labels["kind"]
            if kind == "arm":
                assert all(BY_NAME[t].labels[wk.ARCH] == "arm64" for t in c.instance_types)
            if kind == "batch":
                assert c.capacity_types == ["spot"]
            if c.nodepool == "batch":
                assert kind == "batch"
        placements.append((c.pods, c.zones[0] if len(c.zones) == 1 else None, f"claim-{i}"))
    by_node = {n.name: n for n in nodes}
    for e in plan.existing:
        n = by_node[e.node]
        assert sum(p.requests["cpu"] for p in e.pods) <= n.allocatable["cpu"]
        placements.append((e.pods, n.labels[wk.ZONE], n.name))

    zone_counts: Counter = Counter()
    zones_of: dict[str, set] = {}
    for pods, zone, _ in placements:
        per_app = Counter(p.labels["app"] for p in pods)
        for p in pods:
            kind, app = p.labels["kind"], p.labels["app"]
            if kind in ("host-spread", "host-anti"):
                assert per_app[app] == 1, (app, per_app[app])
            if kind in ("zone-spread", "zone-self"):
                assert zone is not None
                zone_counts[(app, zone)] += 1
                zones_of.setdefault(app, set()).add(zone)
    for app, zones in zones_of.items():
        kind = app_kind = next(p.labels["kind"] for p in workload if p.labels["app"] == app)
        if kind == "zone-self":
            assert len(zones) == 1
        elif app_kind == "zone-spread":
            counts = [zone_counts[(app, z)] for z in ZONES]
            assert max(counts) - min(counts) <= 1, (app, counts)


@pytest.mark.parametrize("seed", range(12))
def test_random_workloads_keep_every_rule(seed):
    rnd = random.Random(seed)
    workload = [p for g in range(rnd.randint(3, 12)) for p in _group(rnd, g)]
    rnd.shuffle(workload)
    nodes = _existing(rnd)
    plan = solve(workload, POOLS, {p.name: TYPES for p in POOLS}, existing_nodes=nodes, daemonset_pods=[DAEMON])
    _check(plan, workload, nodes)
    # Nothing here is impossible: every pod fits some type of a pool it may use.
    assert plan.unschedulable == [], {u.reason for u in plan.unschedulable}
