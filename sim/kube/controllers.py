"""The in-process controllers of the local cluster, driven by the store's change feed.

One background thread takes every write from the store (in resourceVersion order), marks what
it affects as dirty and reconciles the dirty objects in batches: workloads, garbage collection,
PodDisruptionBudget status, aggregated ClusterRoles' rules, PersistentVolume binding (``pvcontroller``),
the scheduler, and kubelet-like pod
lifecycle. Timers (Ready delay, grace periods, run-to-completion pods) run on the simulated clock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ..clock import Clock, parse_time
from . import pvcontroller, volumebinding, volumes
from .disruption import refresh_pdb_status
from .lifecycle import (
    advance_foreground,
    collect_dependents,
    delete_pods_on_node,
    finish_deletion,
    finish_pod,
    owner_keys,
    set_pods_ready,
    start_pod,
)
from .objects import controller_ref, meta, node_ready, pod_terminal
from .rbac import CLUSTER_ROLES, aggregate_cluster_roles
from .scheduler import Scheduler, wants_default_scheduler
from .statefulsets import reconcile_statefulset
from .store import Store
from .workloads import (
    RUN_SECONDS_ANNOTATION,
    reconcile_daemonset,
    reconcile_deployment,
    reconcile_job,
    reconcile_replicaset,
)

log = logging.getLogger(__name__)

_WORKLOADS: dict[str, Callable[[Store, str, str], None]] = {
    "apps/v1/deployments": reconcile_deployment,
    "apps/v1/replicasets": reconcile_replicaset,
    "apps/v1/daemonsets": reconcile_daemonset,
    "batch/v1/jobs": reconcile_job,
    "apps/v1/statefulsets": reconcile_statefulset,
}
_OWNER_KINDS = {"ReplicaSet": "apps/v1/replicasets", "DaemonSet": "apps/v1/daemonsets", "Job": "batch/v1/jobs",
                "Deployment": "apps/v1/deployments", "StatefulSet": "apps/v1/statefulsets"}
# A claim bound, a volume made or a class added may let a pending pod's volumes fit (VolumeBinding's events).
_VOLUME_RESOURCES = (volumebinding.PVCS, volumebinding.PVS, volumebinding.CLASSES)
_BATCH = 20_000


def _node_shape(node: dict[str, Any] | None) -> Any:
    """What about a node decides where pods may go."""
    if node is None:
        return None
    spec, status = node.get("spec") or {}, node.get("status") or {}
    return (
        meta(node).get("labels"), spec.get("taints"), spec.get("unschedulable"), status.get("allocatable"),
        node_ready(node), bool(meta(node).get("deletionTimestamp")),
    )


class Controllers:
    """Workload, garbage-collection, disruption-budget, ClusterRole-aggregation, scheduling and pod-lifecycle
    controllers."""

    def __init__(
        self, store: Store, clock: Clock | None = None, ready_delay: float = 1.0, detach_delay: float = 2.0
    ) -> None:
        self.store = store
        self.clock = clock or store.clock
        self.ready_delay = ready_delay
        self.detach_delay = detach_delay  # simulated seconds a CSI detach takes
        self._volume_nodes: set[str] = set()
        self._claims: set[tuple[str, str]] = set()  # PersistentVolumeClaims for the PV controller to sync
        self._volumes: set[str] = set()  # and PersistentVolumes
        self.scheduler = Scheduler(store)
        self._events: queue.SimpleQueue[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._timers: list[tuple[float, int, str, tuple[str, ...]]] = []
        self._timer_seq = itertools.count()
        self._timer_keys: set[tuple[str, tuple[str, ...]]] = set()
        self._pending: set[tuple[str, str]] = set()
        self._dirty: dict[str, set[tuple[str, str]]] = {key: set() for key in _WORKLOADS}
        self._all_daemonsets = False
        self._next_daemonsets = 0.0
        self._schedule = False
        self._next_pass = 0.0
        self._pdb_namespaces: set[str] = set()
        self._foreground: set[tuple[str, str, str]] = set()
        self._aggregate = False
        self._progress = threading.Condition()
        self._received = 0
        self._processed = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Controllers:
        if self._thread is not None:
            return self
        with self.store.lock:
            self._unsubscribe = self.store.subscribe(self._on_change)
            # Objects that existed before we subscribed are handled as if just added.
            for resource in ("v1/nodes", "v1/pods", *_WORKLOADS, "policy/v1/poddisruptionbudgets", CLUSTER_ROLES):
                for obj in self.store.snapshot(resource):
                    self._on_change("ADDED", resource, obj, None)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sim-kube-controllers", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> Controllers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_change(self, event_type: str, resource: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        with self._progress:
            self._received += 1
        self._events.put((event_type, resource, obj, old))

    # ------------------------------------------------------------ loop

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = []
            try:
                batch.append(self._events.get(timeout=self._wait_seconds()))
                while len(batch) < _BATCH:
                    batch.append(self._events.get_nowait())
            except queue.Empty:
                pass
            try:
                for event in batch:
                    self._handle(*event)
                self._run_timers()
                self._reconcile()
            except Exception:  # a bug in one reconcile must not stop the whole cluster
                log.exception("sim controllers: reconcile failed")
            with self._progress:
                self._processed += len(batch)
                self._progress.notify_all()

    def _wait_seconds(self) -> float:
        if not self._timers:
            return 0.1
        due = self._timers[0][0] - self.clock.elapsed()
        return min(0.1, max(0.0, self.clock.real_seconds(due)))

    def _at(self, elapsed: float, action: str, *args: str) -> None:
        key = (action, args)
        if key in self._timer_keys:
            return
        self._timer_keys.add(key)
        heapq.heappush(self._timers, (elapsed, next(self._timer_seq), action, args))

    def _run_timers(self) -> None:
        now = self.clock.elapsed()
        while self._timers and self._timers[0][0] <= now:
            _, _, action, args = heapq.heappop(self._timers)
            self._timer_keys.discard((action, args))
            if action == "start":
                start_pod(self.store, args[0], args[1])
            elif action == "finish":
                finish_pod(self.store, args[0], args[1])
            elif action == "reap":
                finish_deletion(self.store, args[0], args[1], args[2])
            elif action == "detach":
                volumes.detach(self.store, args[0])

    def _elapsed_at(self, timestamp: str) -> float:
        return self.clock.elapsed() + (parse_time(timestamp) - self.clock.now()).total_seconds()

    # ------------------------------------------------------------ events

    def _handle(self, event_type: str, resource: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if resource == "v1/pods":
            self._pod_event(event_type, obj, old)
        elif resource == "v1/nodes":
            self._node_event(event_type, obj, old)
        elif resource in _WORKLOADS:
            self._dirty[resource].add((meta(obj).get("namespace", ""), meta(obj)["name"]))
            ref = controller_ref(obj)
            if ref and ref.get("kind") in _OWNER_KINDS:
                self._dirty[_OWNER_KINDS[ref["kind"]]].add((meta(obj)["namespace"], ref.get("name", "")))
        elif resource == "policy/v1/poddisruptionbudgets" and event_type != "DELETED":
            self._pdb_namespaces.add(meta(obj).get("namespace", ""))
        elif resource in _VOLUME_RESOURCES and self._pending:
            self._schedule = True
        elif resource == CLUSTER_ROLES:
            # Any ClusterRole's labels or rules may feed an aggregated one (or stop feeding it).
            self._aggregate = True
        if resource == volumebinding.PVCS and event_type != "DELETED":
            self._claims.add((meta(obj).get("namespace", ""), meta(obj)["name"]))
        elif resource == volumebinding.PVS and event_type != "DELETED":
            self._volumes.add(meta(obj)["name"])
        if event_type == "DELETED":
            collect_dependents(self.store, obj)
            for key in owner_keys(self.store, obj):
                self._foreground.add(key)
        elif meta(obj).get("deletionTimestamp") and "foregroundDeletion" in (meta(obj).get("finalizers") or []):
            self._foreground.add((resource, meta(obj).get("namespace", ""), meta(obj)["name"]))

    def _pod_event(self, event_type: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        metadata = meta(pod)
        key = (metadata.get("namespace", ""), metadata["name"])
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        ref = controller_ref(pod)
        if ref and ref.get("kind") in _OWNER_KINDS:
            self._dirty[_OWNER_KINDS[ref["kind"]]].add((key[0], ref.get("name", "")))
        self._pdb_namespaces.add(key[0])
        self.scheduler.observe(event_type, pod)
        if spec.get("nodeName") and volumes.uses_claims(pod):
            self._volume_nodes.add(spec["nodeName"])
        if event_type == "DELETED":
            self._pending.discard(key)
            if spec.get("nodeName"):
                self._schedule = True
            return
        if wants_default_scheduler(pod):
            if key not in self._pending or event_type == "ADDED":
                self._schedule = True
            self._pending.add(key)
        else:
            self._pending.discard(key)
        node_name = spec.get("nodeName")
        if not node_name:
            return
        if old is not None and not (old.get("spec") or {}).get("nodeName") and self._pending:
            # A pod just placed may satisfy a pending pod's affinity or change a spread's skew: kube-scheduler
            # moves its unschedulable pods back to the active queue on that event too.
            self._schedule = True
        was_active = old is not None and not meta(old).get("deletionTimestamp") and not pod_terminal(old)
        if was_active and (metadata.get("deletionTimestamp") or pod_terminal(pod)):
            self._schedule = True  # its resources are about to be free
        if metadata.get("deletionTimestamp"):
            if metadata.get("deletionGracePeriodSeconds"):
                self._at(self._elapsed_at(metadata["deletionTimestamp"]), "reap", key[0], key[1], metadata["uid"])
            return
        phase = status.get("phase")
        if phase == "Pending":
            node = self.store.peek("v1/nodes", node_name)
            if node is not None and node_ready(node):
                self._at(self.clock.elapsed() + self.ready_delay, "start", *key)
        elif phase == "Running" and RUN_SECONDS_ANNOTATION in (metadata.get("annotations") or {}):
            try:
                run_for = float(metadata["annotations"][RUN_SECONDS_ANNOTATION])
            except ValueError:
                return
            started = status.get("startTime")
            at = self._elapsed_at(started) if started else self.clock.elapsed()
            self._at(at + run_for, "finish", *key)

    def _node_event(self, event_type: str, node: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = meta(node)["name"]
        if event_type == "DELETED":
            self._volume_nodes.add(name)
            delete_pods_on_node(self.store, name)
            self._all_daemonsets = True
            self._schedule = True
            return
        shape, old_shape = _node_shape(node), _node_shape(old)
        if shape != old_shape:
            self._schedule = True
            if old is None or shape[:3] != old_shape[:3] or shape[5] != old_shape[5]:
                self._all_daemonsets = True
        ready, was_ready = node_ready(node), old is not None and node_ready(old)
        if ready and not was_ready:
            for pod in self.store.pods_on_node(name):
                if (pod.get("status") or {}).get("phase") == "Pending" and not meta(pod).get("deletionTimestamp"):
                    self._at(self.clock.elapsed() + self.ready_delay, "start", meta(pod)["namespace"], meta(pod)["name"])
            if old is not None:
                set_pods_ready(self.store, name, True)
        elif was_ready and not ready:
            set_pods_ready(self.store, name, False)

    # ------------------------------------------------------------ reconcile

    def _reconcile(self) -> None:
        every_daemonset = self._all_daemonsets and time.monotonic() >= self._next_daemonsets
        if every_daemonset:
            self._all_daemonsets = False
            for ds in self.store.snapshot("apps/v1/daemonsets"):
                self._dirty["apps/v1/daemonsets"].add((meta(ds)["namespace"], meta(ds)["name"]))
        for resource in ("apps/v1/deployments", "apps/v1/replicasets", "apps/v1/daemonsets", "batch/v1/jobs",
                         "apps/v1/statefulsets"):
            dirty, self._dirty[resource] = self._dirty[resource], set()
            started = time.monotonic()
            for namespace, name in sorted(dirty):
                _WORKLOADS[resource](self.store, namespace, name)
            if every_daemonset and resource == "apps/v1/daemonsets":
                # Node changes come in bursts (a drain taints, cordons and deletes hundreds of nodes): let
                # them pile up between passes over every DaemonSet in proportion to what a pass costs, as
                # the scheduler does, or a 10,000-node pass runs once per node changed.
                self._next_daemonsets = time.monotonic() + min(1.0, time.monotonic() - started)
        self._sync_persistent_volumes()
        foreground, self._foreground = self._foreground, set()
        for resource, namespace, name in sorted(foreground):
            advance_foreground(self.store, resource, namespace, name)
        if self.scheduler.rewrite_due(self.clock.elapsed()):
            self._schedule = True
        if self._schedule and time.monotonic() >= self._next_pass:
            self._schedule = False
            if self._pending:
                started = time.monotonic()
                self.scheduler.schedule(sorted(self._pending))
                # Let pending pods pile up between passes in proportion to what a pass costs: a
                # pass over thousands of nodes is worth making for many pods at once.
                self._next_pass = time.monotonic() + min(1.0, max(0.02, time.monotonic() - started))
        self._sync_volumes()
        if self._aggregate:
            self._aggregate = False
            aggregate_cluster_roles(self.store)
        namespaces, self._pdb_namespaces = self._pdb_namespaces, set()
        for namespace in sorted(namespaces):
            for pdb in self.store.snapshot("policy/v1/poddisruptionbudgets", namespace):
                refresh_pdb_status(self.store, pdb)

    def _sync_persistent_volumes(self) -> None:
        claims, self._claims = self._claims, set()
        volume_names, self._volumes = self._volumes, set()
        for name in sorted(volume_names):
            pvcontroller.sync_volume(self.store, name)
        for namespace, name in sorted(claims):
            pvcontroller.sync_claim(self.store, namespace, name)

    def _sync_volumes(self) -> None:
        nodes, self._volume_nodes = self._volume_nodes, set()
        for node_name in sorted(nodes):
            for name in volumes.sync(self.store, node_name):
                self._at(self.clock.elapsed() + self.detach_delay, "detach", name)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until every store change made before the call has been handled, and whatever
        those reactions wrote too (for tests); False on timeout. Timers still pending (Ready delay,
        grace periods) are not waited for."""
        deadline = time.monotonic() + timeout
        with self._progress:
            while self._processed < self._received or self._schedule or self._all_daemonsets:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._progress.wait(min(remaining, 0.05))
        return True
