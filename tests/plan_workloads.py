"""Seeded random workloads for the plan-identity recording (#29, "plans stay identical"): each seed builds
the same call to ``scheduling.solve`` or ``disruption.planner.plan`` every time, from tests/builders.py's
builders. ``solve_case`` mixes pod sizes, node selectors and required/preferred affinities, zonal and
hostname topology spread, pod anti-affinity, taints and tolerations, several NodePools with limits and
weights, existing nodes and daemonsets; ``plan_case`` empty, underutilized (with the real bin-packing
simulator), drifted, expired and do-not-disrupt nodes under budgets of several sizes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import timedelta
from typing import Any

from nodescale.disruption import planner
from nodescale.disruption.drift import Drifted, DriftKind
from nodescale.disruption.simulator import bin_packing_simulator
from nodescale.model import labels as wk
from nodescale.model.nodepool import Budget
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement
from nodescale.model.taints import Taint
from nodescale.scheduling.plan import ExistingNode
from nodescale.scheduling.scheduler import solve
from tests import plan_digest
from tests.builders import (
    ARM,
    C_SMALL,
    GPU,
    LARGE,
    MEDIUM,
    NOW,
    SMALL,
    ZONES,
    existing_node,
    inputs,
    itype,
    node,
    pod,
    pool,
    scheduling_pool,
    since,
)

SOLVE_CASES = 300
PLAN_CASES = 100
XLARGE = itype("xlarge", 16, 64, 0.80, spot=0.25)
R_LARGE = itype("r-large", 4, 32, 0.30, family="r", spot=0.09)
CATALOG = [SMALL, MEDIUM, LARGE, XLARGE, R_LARGE, ARM, GPU, C_SMALL]
CPUS = ["100m", "250m", "500m", "1", "1500m", "2", "3", "7"]
MEMS = ["128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "12Gi"]
TAINT = Taint("dedicated", "NoSchedule", "batch")


def _pod(rng: random.Random, name: str, app: str) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {
        "cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}}}]}
    roll = rng.random()
    labels = {"app": app}
    if roll < 0.15:
        spec["nodeSelector"] = {wk.ARCH: rng.choice(["amd64", "arm64"])}
    elif roll < 0.25:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": rng.sample(ZONES, 2)}]}]}}}
    elif roll < 0.35:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]}}]}}
    elif roll < 0.5:
        key = rng.choice([wk.ZONE, wk.HOSTNAME])
        spec["topologySpreadConstraints"] = [{"maxSkew": rng.choice([1, 2]), "topologyKey": key,
                                              "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    elif roll < 0.58:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": app}}}]}}
    elif roll < 0.63:
        spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    if rng.random() < 0.1:
        spec["priorityClassName"] = "high"
        spec["priority"] = 1000
    return Pod.from_dict({"metadata": {"name": name, "namespace": rng.choice(["default", "web"]), "labels": labels},
                          "spec": spec})


def _pools(rng: random.Random) -> list:
    out = [scheduling_pool("general", weight=rng.choice([0, 10]),
                           limits=rng.choice([{}, {"cpu": rng.choice([8000, 16000, 64000])}]))]
    if rng.random() < 0.6:
        out.append(scheduling_pool("spot", Requirement.create(wk.CAPACITY_TYPE, "In", ["spot", "on-demand"]),
                                   weight=rng.choice([0, 5, 20])))
    if rng.random() < 0.4:
        out.append(scheduling_pool("batch", taints=(TAINT,), weight=rng.choice([0, 50]),
                                   labels={"workload": "batch"}))
    if rng.random() < 0.3:
        out.append(scheduling_pool("arm", Requirement.create(wk.ARCH, "In", ["arm64"]), weight=1))
    return out


def _existing(rng: random.Random, pools: list) -> list[ExistingNode]:
    nodes = []
    for i in range(rng.choice([0, 0, 1, 2, 4])):
        p = rng.choice(pools).name
        nodes.append(existing_node(f"node-{i}", cpu=rng.choice([2, 4, 8]), zone=rng.choice(ZONES),
                                   labels={wk.NODEPOOL: p, wk.CAPACITY_TYPE: "on-demand"}, price=0.1,
                                   in_flight=rng.random() < 0.2, unschedulable=rng.random() < 0.1))
    return nodes


def _daemons(rng: random.Random) -> list[Pod]:
    out = []
    for i in range(rng.choice([0, 1, 2])):
        out.append(Pod.from_dict({"metadata": {"name": f"ds-{i}", "namespace": "kube-system",
                                               "ownerReferences": [{"kind": "DaemonSet", "name": f"ds-{i}",
                                                                    "controller": True}]},
                                  "spec": {"containers": [{"name": "d", "resources": {"requests": {
                                      "cpu": rng.choice(["50m", "100m", "200m"]), "memory": "64Mi"}}}]}}))
    return out


def solve_case(seed: int) -> tuple[Callable, dict[str, Any]]:
    """The seed's call to ``solve``: the function and its keyword arguments."""
    rng = random.Random(f"solve-{seed}")
    pods = []
    for d in range(rng.randint(1, 5)):
        template = _pod(rng, f"app{d}-0", f"app{d}")
        pods += [template] + [replace(template, name=f"app{d}-{i}") for i in range(1, rng.randint(1, 12))]
    pools = _pools(rng)
    catalog = rng.sample(CATALOG, rng.randint(3, len(CATALOG)))
    unavailable = [(t.name, rng.choice(ZONES), "spot") for t in catalog if rng.random() < 0.15]
    return solve, dict(pods=pods, nodepools=pools, instance_types_by_pool={p.name: catalog for p in pools},
                       existing_nodes=_existing(rng, pools), daemonset_pods=_daemons(rng), unavailable=unavailable)


def _view_as_existing(view: Any) -> ExistingNode:
    labels = {wk.NODEPOOL: view.nodepool, wk.ZONE: "zone-a", wk.HOSTNAME: view.name, wk.ARCH: "amd64",
              wk.OS: "linux", wk.CAPACITY_TYPE: "on-demand", wk.INSTANCE_TYPE: "medium"}
    return ExistingNode(view.name, labels, {"cpu": 2000, "memory": 8 * 2**30, "pods": 29}, pods=list(view.pods),
                        price=view.price)


def plan_case(seed: int) -> tuple[Callable, dict[str, Any]]:
    """The seed's call to ``planner.plan``: the function and its keyword arguments."""
    rng = random.Random(f"plan-{seed}")
    budget = rng.choice(["0", "1", "2", "50%", "100%"])
    pools = [pool("default", budgets=(Budget(nodes=budget),),
                  consolidation_policy=rng.choice(["WhenEmptyOrUnderutilized", "WhenEmpty"]),
                  expire_after_seconds=rng.choice([None, None, 3600.0 * 24]))]
    if rng.random() < 0.6:  # untainted: the candidates' pods may go to a cheaper replacement
        pools = [replace(pools[0], taints=())]
    views, drift = [], {}
    for i in range(rng.randint(1, 8)):
        name = f"n{i}"
        n_pods = rng.choice([0, 0, 1, 2, 3])
        pods = [pod(f"{name}-p{j}", {"karpenter.sh/do-not-disrupt": "true"} if rng.random() < 0.1 else None)
                for j in range(n_pods)]
        annotations = since(rng.choice([10, 100, 10_000])) if rng.random() < 0.6 else None
        views.append(node(name, pods, age_h=rng.choice([1.0, 30.0]), price=rng.choice([0.05, 0.1, 0.2, 0.4]),
                          annotations=annotations, ready=rng.random() > 0.1))
        if rng.random() < 0.15:
            drift[name] = Drifted(rng.choice([DriftKind.AMI, DriftKind.NODE_CLASS]), f"{name} drifted")
    simulate = None
    if rng.random() < 0.8:
        types = {"default": [SMALL, MEDIUM, LARGE]}
        simulate = bin_packing_simulator([_view_as_existing(v) for v in views], [pools[0]], types)
    kw: dict[str, Any] = {"cloud_drift": drift}
    if rng.random() < 0.2:
        kw["in_progress"] = frozenset({views[0].name})
    if rng.random() < 0.2:
        kw["impaired_since"] = {views[-1].name: NOW - timedelta(minutes=rng.choice([5, 20]))}
    return planner.plan, dict(inputs=inputs(views, pools, **kw), simulate=simulate)


def cases() -> list[tuple[str, Callable, dict[str, Any]]]:
    """Every recorded case: (case id, function, keyword arguments)."""
    out = [(f"solve-{s}", *solve_case(s)) for s in range(SOLVE_CASES)]
    return out + [(f"plan-{s}", *plan_case(s)) for s in range(PLAN_CASES)]


def run(case: tuple[str, Callable, dict[str, Any]]) -> dict[str, str]:
    """One case's input and output digests and the summary of its plan."""
    case_id, fn, kwargs = case
    kind = "solve" if case_id.startswith("solve") else "plan"
    result = fn(**kwargs)
    digest_in, digest_out, _ = plan_digest.digests(kind, kwargs, result)
    return {"in": digest_in, "out": digest_out, "summary": plan_digest.summary(kind, result)}


def record() -> dict[str, dict[str, str]]:
    return {case[0]: run(case) for case in cases()}


def differences(recorded: dict[str, dict[str, str]], only: Collection[str] | None = None) -> list[str]:
    """Every case (of ``only``, if given) whose plan differs from ``recorded`` or is missing from it, with both
    summaries."""
    out = []
    for case in cases():
        if only is not None and case[0] not in only:
            continue
        now, then = run(case), recorded.get(case[0])
        if then is None:
            out.append(f"{case[0]}: not recorded")
        elif now["out"] != then["out"]:
            out.append(f"{case[0]}:\n    recorded: {then['summary']}\n    now:      {now['summary']}")
    return out
