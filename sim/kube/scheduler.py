"""A minimal default scheduler: binds pending pods to Ready, schedulable nodes where they fit.

Identical pending pods (same namespace, labels, requests, selectors, affinity, spread and tolerations)
are placed as one group: the nodes that cannot take one of them cannot take the next either, so a pass
costs about (nodes + pods) per group rather than nodes x pods. Required pod affinity, anti-affinity and
hard topology spread are kube-scheduler's filters (`interpod`), as is NodePorts (a host port, protocol and IP
held by a pod on the node refuses another pod asking for it): a group under them is placed pod by pod,
each seeing the ones before it, and stops at the first pod that fits nowhere (the rest, identical, would not
fit either). VolumeBinding (`volumebinding`) runs after NodeResourcesFit: a pod whose claims cannot be
used anywhere fits no node with the plugin's message; a node its volumes cannot reach is filtered out; a pod
whose WaitForFirstConsumer claim is still unbound is placed on its own (the claim it provisions constrains the
next pod using it), its volume provisioned in the chosen node's zone just before the pod is bound.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from . import interpod, volumebinding, volumelimits
from .errors import ApiError
from .objects import meta, pod_terminal, set_condition
from .placement import (
    PORTS_REASON,
    HostPort,
    allocatable,
    host_ports,
    insufficient,
    pod_requests,
    ports_conflict,
    static_reason,
)
from .store import Store

DEFAULT_SCHEDULER = "default-scheduler"
# kube-scheduler retries an unschedulable pod after a backoff that doubles up to 10 s
# (podMaxBackoffSeconds) and rewrites its PodScheduled condition when the message changed; here a pod is
# tried every pass, but its condition is rewritten at most once per this much simulated time, or
# 100,000 pending pods would be rewritten (and sent to every watch) each time a node joins.
UNSCHEDULABLE_REWRITE_SECONDS = 10.0


def wants_default_scheduler(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and spec.get("schedulerName", DEFAULT_SCHEDULER) in (DEFAULT_SCHEDULER, "", None)
        and not meta(pod).get("deletionTimestamp")
        and not pod_terminal(pod)
    )


class Scheduler:
    """Places pending pods. Node usage is kept up to date from pod events (`observe`), so a pass
    never re-adds the requests of every bound pod."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._requests: dict[str, dict[str, int]] = {}
        self._usage: dict[str, dict[str, int]] = {}
        self._ports: dict[str, Counter[HostPort]] = {}  # node -> host ports its pods hold
        self._counted: dict[str, str] = {}
        self._allocatable: dict[str, tuple[str, dict[str, int]]] = {}
        self._marked_at: dict[str, float] = {}  # pod uid -> when its Unschedulable condition was written
        # When a message that changed but was held back by the rewrite limit is due to be written: a pass
        # then runs even without an event, as kube-scheduler's backoff retries the pod.
        self._rewrite_due: float | None = None
        self.placed = interpod.PlacedPods()
        self._next_start = 0  # kube-scheduler's nextStartNodeIndex: where the next pod's search begins
        self._versions: dict[str, int] = {}  # pod uid -> resourceVersion of the state accounted

    def requests_of(self, pod: dict[str, Any]) -> dict[str, int]:
        uid = meta(pod).get("uid", "")
        cached = self._requests.get(uid)
        if cached is None:
            cached = pod_requests(pod.get("spec") or {})
            self._requests[uid] = cached
        return cached

    @staticmethod
    def ports_of(pod: dict[str, Any]) -> tuple[HostPort, ...]:
        return host_ports(pod.get("spec") or {})

    def observe(self, event_type: str, pod: dict[str, Any]) -> None:
        """Account a pod event: a bound pod uses its node's resources until it ends or is removed. A state older
        than one applied already is skipped: the scheduler applies its own binds at once (``_place_group``), and
        the events queued before them arrive afterwards."""
        uid = meta(pod).get("uid", "")
        version = int(meta(pod).get("resourceVersion") or 0)
        if event_type == "DELETED":
            self._versions.pop(uid, None)
        elif version < self._versions.get(uid, 0):
            return
        else:
            self._versions[uid] = version
        node_name = (pod.get("spec") or {}).get("nodeName")
        using = event_type != "DELETED" and bool(node_name) and not pod_terminal(pod)
        counted_on = self._counted.get(uid)
        if using and counted_on is None:
            self._counted[uid] = node_name or ""
            self._charge(node_name or "", self.requests_of(pod), 1)
            self._hold_ports(node_name or "", self.ports_of(pod), 1)
        elif not using and counted_on is not None:
            del self._counted[uid]
            self._charge(counted_on, self.requests_of(pod), -1)
            self._hold_ports(counted_on, self.ports_of(pod), -1)
        self.placed.update(uid, pod if using else None)
        if event_type == "DELETED":
            self._requests.pop(uid, None)
        if event_type == "DELETED" or node_name:
            self._marked_at.pop(uid, None)

    def _charge(self, node_name: str, requests: dict[str, int], sign: int) -> None:
        usage = self._usage.setdefault(node_name, {})
        for resource, value in requests.items():
            usage[resource] = usage.get(resource, 0) + sign * value
        usage["pods"] = usage.get("pods", 0) + sign * 1000

    def _hold_ports(self, node_name: str, ports: tuple[HostPort, ...], sign: int) -> None:
        if ports:
            held = self._ports.setdefault(node_name, Counter())
            held.update({port: sign for port in ports})

    def _ports_taken(self, ports: tuple[HostPort, ...], node_name: str) -> bool:
        return bool(ports) and ports_conflict(ports, self._ports.get(node_name) or Counter())

    def _node_allocatable(self, node: dict[str, Any]) -> dict[str, int]:
        name, version = meta(node)["name"], meta(node).get("resourceVersion", "")
        cached = self._allocatable.get(name)
        if cached is None or cached[0] != version:
            cached = (version, allocatable(node))
            self._allocatable[name] = cached
        return cached[1]

    def _free_capacity(self, nodes: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        free: dict[str, dict[str, int]] = {}
        for node in nodes:
            name = meta(node)["name"]
            remaining = dict(self._node_allocatable(node))
            for resource, value in self._usage.get(name, {}).items():
                remaining[resource] = remaining.get(resource, 0) - value
            free[name] = remaining
        return free

    def _signature(self, pod: dict[str, Any], requests: dict[str, int]) -> str:
        spec = pod.get("spec") or {}
        claims: list[str] = volumebinding.claim_names(pod)
        if claims and any(self._unbound(meta(pod).get("namespace") or "default", c) for c in claims):
            claims.append(meta(pod).get("uid", ""))  # placed alone: it binds a claim the next pod sees bound
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        return json.dumps(
            [sorted(requests.items()), spec.get("nodeSelector"), required, spec.get("tolerations"),
             interpod.signature(pod), host_ports(spec), claims],
            sort_keys=True,
        )

    def _unbound(self, namespace: str, claim_name: str) -> bool:
        claim = self.store.peek(volumebinding.PVCS, claim_name, namespace)
        return claim is not None and not (claim.get("spec") or {}).get("volumeName")

    def schedule(self, pending: list[tuple[str, str]]) -> int:
        """One scheduling pass over the given pending pods; returns how many were bound."""
        pods = []
        for namespace, name in pending:
            pod = self.store.peek("v1/pods", name, namespace)
            if pod is not None and wants_default_scheduler(pod):
                pods.append(pod)
        if not pods:
            return 0
        nodes = sorted(
            (n for n in self.store.snapshot("v1/nodes") if not meta(n).get("deletionTimestamp")),
            key=lambda n: (meta(n).get("creationTimestamp", ""), meta(n).get("name", "")),
        )
        free = self._free_capacity(nodes)
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in sorted(pods, key=lambda p: (meta(p).get("creationTimestamp", ""), meta(p)["name"])):
            groups.setdefault(self._signature(pod, self.requests_of(pod)), []).append(pod)
        bound = 0
        namespace_labels: dict[str, dict[str, str]] | None = None
        for group in groups.values():
            rules = None
            if interpod.constrained(group[0]) or self.placed.any_anti_affinity():
                if namespace_labels is None:
                    namespace_labels = {meta(ns)["name"]: meta(ns).get("labels") or {}
                                        for ns in self.store.snapshot("v1/namespaces")}
                rules = interpod.Rules.for_group(group[0], nodes, self.placed, namespace_labels)
            bound += self._place_group(group, nodes, free, rules)
        return bound

    def _place_group(
        self,
        group: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
        free: dict[str, dict[str, int]],
        rules: interpod.Rules | None = None,
    ) -> int:
        spec = group[0].get("spec") or {}
        requests = self.requests_of(group[0])
        ports = self.ports_of(group[0])
        volumes = volumebinding.pod_volumes(self.store, group[0])
        if isinstance(volumes, str):
            for pod in group:
                self._mark_unschedulable(pod, _rejected_message(len(nodes), volumes))
            return 0
        static = {meta(node)["name"]: static_reason(spec, node) for node in nodes}
        volume = self._volume_reasons(group[0], nodes, volumes) if volumes else {}
        candidates = [meta(node)["name"] for node in nodes
                      if static[meta(node)["name"]] is None and not volume.get(meta(node)["name"])]
        by_name = {meta(node)["name"]: node for node in nodes}
        window = feasible_to_find(len(nodes))
        dead: set[str] = set()  # nodes that can take no more pods of this group in this pass
        unplaced = []
        bound = 0
        for index, pod in enumerate(group):
            if len(dead) >= max(32, window):
                candidates = [name for name in candidates if name not in dead]
                dead.clear()
            node_name = self._best_node(candidates, dead, window, requests, ports, free, rules, by_name)
            if node_name is None:
                # Nothing changed by trying: the group's remaining pods, identical, fit nowhere either.
                unplaced.extend(group[index:])
                break
            try:
                if volumes is not None and volumes.delayed:
                    volumebinding.provision(self.store, volumes, by_name[node_name])
                bound_pod = self.store.bind(meta(pod)["name"], meta(pod)["namespace"], node_name)
            except ApiError:
                continue  # deleted or bound by someone else since the pass began
            # Its event may wait behind thousands of others: the next pass must see this pod on its node already,
            # or it places another pod in the same room (or beside a pod its anti-affinity excludes).
            self.observe("MODIFIED", bound_pod)
            remaining = free[node_name]
            for resource, value in requests.items():
                remaining[resource] = remaining.get(resource, 0) - value
            remaining["pods"] = remaining.get("pods", 0) - 1000
            if rules is not None:
                rules.placed(node_name)
            bound += 1
        if unplaced:
            message = self._unschedulable_message(nodes, static, requests, free, rules,
                                                  {n for n in candidates if self._ports_taken(ports, n)}, volume)
            for pod in unplaced:
                self._mark_unschedulable(pod, message)
        return bound

    def _best_node(self, candidates: list[str], dead: set[str], window: int, requests: dict[str, int],
                   ports: tuple[HostPort, ...], free: dict[str, dict[str, int]],
                   rules: interpod.Rules | None, by_name: dict[str, dict[str, Any]]) -> str | None:
        """kube-scheduler's choice for one pod: from where the last pod's search stopped, the first ``window``
        nodes that pass the filters, then the one NodeResourcesFit's LeastAllocated scores highest (the
        most CPU and memory left, as fractions of allocatable), the first of them on a tie. Packing each pod
        on the first node that fits instead crowded a burst's small pods onto the oldest new nodes and left
        pods that need a whole node's room without one. ``dead`` gets the nodes no pod of the group fits
        in this pass."""
        total = len(candidates)
        if not total:
            return None
        start = self._next_start % total
        best, best_score, found, scanned = None, -1.0, 0, 0
        while scanned < total and found < window:
            name = candidates[(start + scanned) % total]
            scanned += 1
            if name in dead:
                continue
            room = free[name]
            if (self._ports_taken(ports, name) or insufficient(requests, room)
                    or (rules is not None and rules.blocked_for_good(name))):
                dead.add(name)
                continue
            if rules is not None and rules.reason(name) is not None:
                continue  # spread or affinity may let it in once other pods are placed
            found += 1
            score = _least_allocated(requests, room, self._node_allocatable(by_name[name]))
            if score > best_score:
                best, best_score = name, score
        self._next_start = (start + scanned) % total
        return best

    def _volume_reasons(self, pod: dict[str, Any], nodes: list[dict[str, Any]],
                        volumes: volumebinding.PodVolumes) -> dict[str, tuple[str, ...]]:
        """Why each node cannot take the pod's volumes: NodeVolumeLimits (its CSINode's counts), then VolumeBinding.
        The group's pods share their claims, so a node that takes the first takes the rest without new volumes."""
        wanted = volumelimits.pod_csi_volumes(self.store, pod)
        reasons = {}
        for node in nodes:
            name = meta(node)["name"]
            limit = (volumelimits.LIMIT_REASON,) if wanted and volumelimits.exceeds(self.store, name, wanted) else ()
            reasons[name] = limit + volumes.reasons(node)
        return reasons

    @staticmethod
    def _unschedulable_message(
        nodes: list[dict[str, Any]],
        static: dict[str, str | None],
        requests: dict[str, int],
        free: dict[str, dict[str, int]],
        rules: interpod.Rules | None = None,
        ports_taken: set[str] | frozenset[str] = frozenset(),
        volume: dict[str, tuple[str, ...]] | None = None,
    ) -> str:
        total = len(nodes)
        if total == 0:
            return "no nodes available to schedule pods"
        reasons: Counter[str] = Counter()
        for node in nodes:
            name = meta(node)["name"]
            if static[name] is not None:
                reasons[static[name] or ""] += 1
            elif name in ports_taken:
                reasons[PORTS_REASON] += 1
            elif insufficient(requests, free[name]):
                for reason in insufficient(requests, free[name]):
                    reasons[reason] += 1
            elif volume and volume.get(name):
                for reason in volume[name]:
                    reasons[reason] += 1
            elif rules is not None and (reason := rules.reason(name)) is not None:
                reasons[reason] += 1
        detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items(), key=lambda i: i[0]))
        return (
            f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are available: "
            f"{total} Preemption is not helpful for scheduling."
        )

    def rewrite_due(self, elapsed: float) -> bool:
        """Whether a held-back Unschedulable message is due (once: the pass that follows writes it)."""
        if self._rewrite_due is None or elapsed < self._rewrite_due:
            return False
        self._rewrite_due = None
        return True

    def _mark_unschedulable(self, pod: dict[str, Any], message: str) -> None:
        uid = meta(pod).get("uid", "")
        elapsed = self.store.clock.elapsed()
        marked = self._marked_at.get(uid)
        if marked is not None and elapsed - marked < UNSCHEDULABLE_REWRITE_SECONDS and _unschedulable(pod):
            if _message(pod) != message:
                due = marked + UNSCHEDULABLE_REWRITE_SECONDS
                self._rewrite_due = due if self._rewrite_due is None else min(self._rewrite_due, due)
            return
        self._marked_at[uid] = elapsed
        now = self.store.clock.timestamp()

        def change(obj: dict[str, Any]) -> bool:
            if not wants_default_scheduler(obj):
                return False
            return set_condition(
                obj,
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                },
            )

        self.store.modify("v1/pods", meta(pod)["name"], meta(pod)["namespace"], change, "status")


def feasible_to_find(total: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind with percentageOfNodesToScore unset: every node of a small
    cluster, else an adaptive share (50% less 1% per 125 nodes, at least 5%) and never fewer than 100."""
    if total < 100:
        return total
    share = max(5, 50 - total // 125)
    return max(100, total * share // 100)


def _least_allocated(requests: dict[str, int], room: dict[str, int], allocatable: dict[str, int]) -> float:
    """NodeResourcesFit's LeastAllocated score (CPU and memory, equal weights) once the pod is on the node."""
    score = 0.0
    for resource in ("cpu", "memory"):
        capacity = allocatable.get(resource, 0)
        if capacity > 0:
            score += (room.get(resource, 0) - requests.get(resource, 0)) / capacity
    return score


def _rejected_message(total: int, reason: str) -> str:
    """A FitError's message when a PreFilter plugin rejected the pod: its reason instead of a per-node count."""
    if total == 0:
        return "no nodes available to schedule pods"
    return (f"0/{total} nodes are available: {reason}. preemption: 0/{total} nodes are available: "
            f"{total} Preemption is not helpful for scheduling.")


def _message(pod: dict[str, Any]) -> str:
    return next((c.get("message") or "" for c in (pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"), "")


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])
