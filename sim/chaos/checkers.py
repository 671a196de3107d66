"""Invariants checked continuously during a chaos run, as state machines fed with what the cluster did.

Each checker is pure: it is handed Kubernetes watch events (in API order) and EC2 instance
snapshots, and returns the violations they show. The watcher feeds them from the live environment;
the unit tests feed them broken histories to show each one reports what it must.

A disruption is a pod bound to a node that starts terminating or disappears. It is voluntary unless
the chaos driver itself took the node's instance away (a spot interruption, a state change): those
instances are reported with `mark_involuntary` before anything is sent about them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.kube.selectors import compile_label_selector_object

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CLUSTER_TAG = "nodescale.io/cluster"
NODEPOOL_TAG = "karpenter.sh/nodepool"
PROVISIONER_TAG = "karpenter.sh/provisioner-name"  # a v1alpha5 Provisioner's instances instead
LIVE_STATES = ("pending", "running")


@dataclass(frozen=True)
class Violation:
    invariant: str  # pdb | do-not-disrupt | foreign | limits | pods-running | leak | capacity
    detail: str
    at: float = 0.0  # seconds into the run when it was seen

    def __str__(self) -> str:
        return f"[{self.invariant} @ {self.at:.1f}s] {self.detail}"


@dataclass(frozen=True)
class InstanceRecord:
    """One EC2 instance as the poll saw it."""

    instance_id: str
    state: str
    instance_type: str = ""
    zone: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    capacity_type: str = "on-demand"

    @property
    def nodepool(self) -> str:
        return self.tags.get(NODEPOOL_TAG) or self.tags.get(PROVISIONER_TAG, "")


# ---------------------------------------------------------------------------------------------- pods


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def pod_key(pod: Mapping[str, Any]) -> str:
    return f"{_meta(pod).get('namespace') or 'default'}/{_meta(pod).get('name')}"


def pod_terminating(pod: Mapping[str, Any]) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def pod_finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_healthy(pod: Mapping[str, Any]) -> bool:
    """Healthy as a PodDisruptionBudget counts it: Running, Ready, not being deleted."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return status.get("phase") == "Running" and ready and not pod_terminating(pod)


def node_instance_id(node: Mapping[str, Any]) -> str:
    provider = str((node.get("spec") or {}).get("providerID") or "")
    return provider.rsplit("/", 1)[-1] if provider.startswith("aws://") else ""


def desired_healthy(pdb: Mapping[str, Any], expected: int) -> int:
    """The healthy pods a PDB requires when its owners want `expected` pods (the disruption controller's rule)."""
    spec = pdb.get("spec") or {}

    def scaled(value: Any, round_up: bool) -> int:
        if isinstance(value, str) and value.endswith("%"):
            exact = float(value[:-1]) * expected / 100
            return math.ceil(exact) if round_up else math.floor(exact)
        return int(value)

    if spec.get("maxUnavailable") is not None:
        return max(0, expected - scaled(spec["maxUnavailable"], round_up=True))
    return scaled(spec.get("minAvailable", 1), round_up=True)


@dataclass
class Disruption:
    pod: str
    node: str
    instance_id: str
    voluntary: bool
    at: float


class DisruptionChecker:
    """PodDisruptionBudgets are never broken, and do-not-disrupt pods never evicted, by voluntary disruption.

    Fed pod and node watch events in the order the API server emitted them. When a healthy pod a PDB
    selects is voluntarily disrupted, the healthy pods left must still meet the budget (exactly the
    test the eviction API applies, so a legal eviction is never reported). `expected` gives the pods a
    PDB's owners want (by "namespace/name"); without it the most healthy pods ever seen is used.
    """

    def __init__(self, expected: Mapping[str, int] | None = None) -> None:
        self.expected = dict(expected or {})
        self.pods: dict[str, dict[str, Any]] = {}
        self.pdbs: dict[str, dict[str, Any]] = {}
        self._selectors: dict[str, Callable[[Mapping[str, str]], bool]] = {}
        self._peak: dict[str, int] = {}
        self.node_instance: dict[str, str] = {}  # kept after the node goes: its pods may go later
        self.involuntary: set[str] = set()
        self.disruptions: list[Disruption] = []
        self.violations: list[Violation] = []
        self.lock = threading.RLock()

    def mark_involuntary(self, instance_id: str) -> None:
        with self.lock:
            self.involuntary.add(instance_id)

    def pdb_event(self, kind: str, pdb: dict[str, Any]) -> None:
        key = pod_key(pdb)
        with self.lock:
            if kind == "DELETED":
                self.pdbs.pop(key, None)
                self._selectors.pop(key, None)
                return
            self.pdbs[key] = pdb
            selector = (pdb.get("spec") or {}).get("selector")
            self._selectors[key] = compile_label_selector_object(selector, empty_matches_all=selector is not None)

    def node_event(self, kind: str, node: dict[str, Any]) -> None:
        iid = node_instance_id(node)
        if iid:
            with self.lock:
                self.node_instance[str(_meta(node).get("name"))] = iid

    def pod_event(self, kind: str, pod: dict[str, Any], at: float = 0.0) -> list[Violation]:
        key = pod_key(pod)
        found: list[Violation] = []
        with self.lock:
            old = self.pods.get(key)
            if kind == "DELETED":
                self.pods.pop(key, None)
            else:
                self.pods[key] = pod
            if old is not None and self._disrupted(old, pod, kind):
                found = self._judge(old, at)
            self._note_peaks()
            self.violations.extend(found)
        return found

    @staticmethod
    def _disrupted(old: dict[str, Any], new: dict[str, Any], kind: str) -> bool:
        if pod_terminating(old) or pod_finished(old) or not (old.get("spec") or {}).get("nodeName"):
            return False
        return kind == "DELETED" or pod_terminating(new)

    def _judge(self, old: dict[str, Any], at: float) -> list[Violation]:
        key = pod_key(old)
        node = str((old.get("spec") or {}).get("nodeName"))
        iid = self.node_instance.get(node, "")
        voluntary = iid not in self.involuntary
        self.disruptions.append(Disruption(key, node, iid, voluntary, at))
        if not voluntary:
            return []
        found = []
        if str(_meta(old).get("annotations", {}).get(DO_NOT_DISRUPT, "")).lower() == "true":
            found.append(Violation("do-not-disrupt", f"pod {key} (annotated {DO_NOT_DISRUPT}) was disrupted "
                                   f"on node {node} ({iid or 'no instance'}), which nobody took away", at))
        if pod_healthy(old):
            for pdb_key, pdb in self.pdbs.items():
                if not self._selects(pdb_key, old):
                    continue
                healthy = self._healthy(pdb_key)
                expected = self.expected.get(pdb_key, self._peak.get(pdb_key, healthy + 1))
                desired = desired_healthy(pdb, expected)
                if healthy < desired:
                    found.append(Violation("pdb", f"PDB {pdb_key}: disrupting {key} on {node} left {healthy} healthy "
                                           f"pod(s), the budget needs {desired} of {expected}", at))
        return found

    def _selects(self, pdb_key: str, pod: Mapping[str, Any]) -> bool:
        namespace = pdb_key.split("/", 1)[0]
        return (_meta(pod).get("namespace") or "default") == namespace and self._selectors[pdb_key](
            _meta(pod).get("labels") or {})

    def _healthy(self, pdb_key: str) -> int:
        return sum(1 for p in self.pods.values() if pod_healthy(p) and self._selects(pdb_key, p))

    def _note_peaks(self) -> None:
        for pdb_key in self.pdbs:
            if pdb_key not in self.expected:
                self._peak[pdb_key] = max(self._peak.get(pdb_key, 0), self._healthy(pdb_key))

    def counts(self) -> dict[str, int]:
        with self.lock:
            return {
                "voluntary": sum(1 for d in self.disruptions if d.voluntary),
                "involuntary": sum(1 for d in self.disruptions if not d.voluntary),
            }


# ------------------------------------------------------------------------------------------ foreign


def _node_fingerprint(node: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = _meta(node)
    spec = node.get("spec") or {}
    return (
        sorted((meta.get("labels") or {}).items()),
        sorted((meta.get("annotations") or {}).items()),
        bool(spec.get("unschedulable")),
        sorted(str(sorted(t.items())) for t in spec.get("taints") or []),
        bool(meta.get("deletionTimestamp")),
    )


class ForeignChecker:
    """Instances and Nodes without this cluster's tag are never touched: same state, same tags, same spec."""

    def __init__(self, instances: Iterable[InstanceRecord], nodes: Iterable[Mapping[str, Any]]) -> None:
        self.instances = {i.instance_id: i for i in instances}
        self.nodes = {str(_meta(n).get("name")): _node_fingerprint(n) for n in nodes}
        self.violations: list[Violation] = []
        self._reported: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def instances_seen(self, seen: Mapping[str, InstanceRecord], at: float = 0.0) -> list[Violation]:
        found = []
        for iid, before in self.instances.items():
            now = seen.get(iid)
            if now is None:
                found.append(self._once(iid, "gone", f"foreign instance {iid} disappeared", at))
            elif now.state != before.state:
                found.append(self._once(iid, "state", f"foreign instance {iid} went from {before.state} to "
                                        f"{now.state}", at))
            elif dict(now.tags) != dict(before.tags):
                found.append(self._once(iid, "tags", f"foreign instance {iid} tags changed: {dict(before.tags)} -> "
                                        f"{dict(now.tags)}", at))
        return self._keep(found)

    def node_event(self, kind: str, node: Mapping[str, Any], at: float = 0.0) -> list[Violation]:
        name = str(_meta(node).get("name"))
        if name not in self.nodes:
            return []
        if kind == "DELETED":
            return self._keep([self._once(name, "deleted", f"foreign node {name} was deleted", at)])
        if _node_fingerprint(node) != self.nodes[name]:
            return self._keep([self._once(name, "changed", f"foreign node {name} was changed (labels, annotations, "
                                          f"taints, cordon or deletion): {self._describe(node)}", at)])
        return []

    @staticmethod
    def _describe(node: Mapping[str, Any]) -> str:
        spec = node.get("spec") or {}
        return f"unschedulable={bool(spec.get('unschedulable'))}, taints={spec.get('taints') or []}"

    def _once(self, subject: str, what: str, detail: str, at: float) -> Violation | None:
        with self.lock:
            if (subject, what) in self._reported:
                return None
            self._reported.add((subject, what))
        return Violation("foreign", detail, at)

    def _keep(self, found: list[Violation | None]) -> list[Violation]:
        out = [v for v in found if v is not None]
        with self.lock:
            self.violations.extend(out)
        return out


# ------------------------------------------------------------------------------------------- limits


class LimitsChecker:
    """The capacity of a NodePool's live instances (pending or running) never exceeds its limits.

    `limits` maps a pool to its limits in nodescale's units (cpu in millicores, memory in bytes,
    `nodes` as a count); `capacity_of(instance_type)` gives a type's capacity in the same units.
    """

    def __init__(self, cluster: str, limits: Mapping[str, Mapping[str, int]],
                 capacity_of: Callable[[str], Mapping[str, int]]) -> None:
        self.cluster = cluster
        self.limits = {pool: dict(v) for pool, v in limits.items() if v}
        self.capacity_of = capacity_of
        self.peak: dict[str, dict[str, int]] = {}
        self.violations: list[Violation] = []
        self._reported: set[tuple[str, str]] = set()

    def usage(self, seen: Iterable[InstanceRecord]) -> dict[str, dict[str, int]]:
        usage: dict[str, dict[str, int]] = {}
        for inst in seen:
            if inst.state not in LIVE_STATES or inst.tags.get(CLUSTER_TAG) != self.cluster or not inst.nodepool:
                continue
            pool = usage.setdefault(inst.nodepool, {})
            for key, value in self.capacity_of(inst.instance_type).items():
                pool[key] = pool.get(key, 0) + value
            pool["nodes"] = pool.get("nodes", 0) + 1
        return usage

    def instances_seen(self, seen: Mapping[str, InstanceRecord], at: float = 0.0) -> list[Violation]:
        found = []
        members: dict[str, list[str]] = {}
        for inst in seen.values():
            if inst.state in LIVE_STATES and inst.tags.get(CLUSTER_TAG) == self.cluster and inst.nodepool:
                members.setdefault(inst.nodepool, []).append(f"{inst.instance_id} {inst.instance_type} {inst.state}")
        for pool, used in self.usage(seen.values()).items():
            peak = self.peak.setdefault(pool, {})
            for key, value in used.items():
                peak[key] = max(peak.get(key, 0), value)
            for key, limit in self.limits.get(pool, {}).items():
                if used.get(key, 0) > limit and (pool, key) not in self._reported:
                    self._reported.add((pool, key))
                    found.append(Violation("limits", f"NodePool {pool}: {key} {used.get(key, 0)} above its limit "
                                           f"{limit} ({', '.join(sorted(members.get(pool, [])))})", at))
        self.violations.extend(found)
        return found
