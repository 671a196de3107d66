"""Spot interruptions as EC2 gives them: a two-minute warning, then the instance is gone (#33.1).

``POST /sim/v1/spot-interruptions {"instanceIds": [...], "noticeSeconds": 120}`` is EC2 deciding to reclaim
running spot instances: each is warned now (the answer gives the time the warning event carries) and
terminated when its notice runs out, whatever is still on it. Its Node then goes the way sim's kubelet
takes a terminated instance's Node away, and the pod garbage collector the pods left on it: those pods are
lost. The driver delivers the warning events itself (straight to the function, or through the queue).

``GET /sim/v1/spot-interruptions`` is the record of every warning, node by node on the simulated clock
(``Clock.elapsed()`` seconds): warned, the notice's end and when the instance ended, when the Node was
tainted and cordoned, the first eviction request, when the last evictable pod was gone, and the evictable
pods still on the Node when the instance ended, split into those a PodDisruptionBudget allowed no more
disruptions for and those the drain had not reached (``sim/kube/drainaudit.py`` records the drain). A pod
is evictable unless a DaemonSet owns it, it mirrors a static pod, or it has finished.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import boto3

from sim.aws.constants import DUMMY_CREDENTIALS
from sim.kube.disruption import _selects, pdb_status
from sim.kube.drainaudit import DrainAudit, pod_key
from sim.kube.errors import bad_request, method_not_allowed
from sim.kube.objects import meta

log = logging.getLogger("sim.spot")

NOTICE_SECONDS = 120.0  # EC2's spot interruption notice
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
PATH = "/sim/v1/spot-interruptions"
DESCRIBE_CHUNK = 100


@dataclass
class Notice:
    instance_id: str
    node: str
    warned_at: float
    ends_at: float
    pods: list[str]  # the node's evictable pods when it was warned
    ended_at: float | None = None
    lost_to_pdb: list[str] = field(default_factory=list)
    not_reached: list[str] = field(default_factory=list)


def evictable(pod: dict[str, Any]) -> bool:
    """What a drain is expected to move off the node."""
    owners = meta(pod).get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" for o in owners):
        return False
    if MIRROR_ANNOTATION in (meta(pod).get("annotations") or {}):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class SpotReclaimer:
    """Warns spot instances and ends them when their notice runs out (see the module docstring)."""

    def __init__(self, store: Any, clock: Any, audit: DrainAudit, ec2_endpoint: str, region: str,
                 poll_seconds: float = 0.1) -> None:
        self.store, self.clock, self.audit = store, clock, audit
        self.poll_seconds = poll_seconds
        self._ec2 = boto3.client("ec2", endpoint_url=ec2_endpoint, region_name=region, **DUMMY_CREDENTIALS)
        self._lock = threading.Lock()
        self._warnings: dict[str, Notice] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SpotReclaimer:
        self._thread = threading.Thread(target=self._run, name="sim-spot", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def control(self, method: str, body: Any) -> dict[str, Any]:
        if method == "GET":
            return self.report()
        if method == "POST":
            return self.warn(body)
        raise method_not_allowed()

    # -- warning
    def warn(self, body: Any) -> dict[str, Any]:
        ids, notice = _read_request(body)
        self._check_running_spot(ids)
        nodes = self._nodes_of(ids)
        now, stamp = self.clock.elapsed(), self.clock.timestamp()
        out = []
        with self._lock:
            for iid in ids:
                node = nodes.get(iid, "")
                if iid not in self._warnings:  # EC2 warns once; a repeat keeps the first notice
                    pods = [pod_key(p) for p in self.store.pods_on_node(node) if evictable(p)] if node else []
                    self._warnings[iid] = Notice(iid, node, now, now + notice, pods)
                    if node:
                        self.audit.watch(node)
                out.append({"instanceId": iid, "node": node or None, "time": stamp})
        return {"warnings": out}

    def _check_running_spot(self, ids: list[str]) -> None:
        found: dict[str, dict[str, Any]] = {}
        pages = self._ec2.get_paginator("describe_instances")
        try:
            for start in range(0, len(ids), DESCRIBE_CHUNK):  # every page of every chunk: a wave is hundreds
                for page in pages.paginate(InstanceIds=ids[start:start + DESCRIBE_CHUNK]):
                    for reservation in page["Reservations"]:
                        found.update({i["InstanceId"]: i for i in reservation["Instances"]})
        except Exception as exc:
            raise bad_request(f"instanceIds: {exc}") from exc
        for iid in ids:
            instance = found.get(iid)
            if instance is None:
                raise bad_request(f"instanceIds: {iid} does not exist")
            if instance.get("InstanceLifecycle") != "spot":
                raise bad_request(f"instanceIds: {iid} is not a spot instance: EC2 interrupts only spot instances")
            if instance["State"]["Name"] != "running":
                raise bad_request(f"instanceIds: {iid} is {instance['State']['Name']}, not running")

    def _nodes_of(self, ids: list[str]) -> dict[str, str]:
        wanted = set(ids)
        out = {}
        for node in self.store.snapshot("v1/nodes"):
            iid = str((node.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1]
            if iid in wanted:
                out[iid] = meta(node)["name"]
        return out

    # -- the notice's end
    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            now = self.clock.elapsed()
            with self._lock:
                due = [w for w in self._warnings.values() if w.ended_at is None and now >= w.ends_at]
            for warning in due:
                try:
                    self._end(warning)
                except Exception:
                    log.exception("ending spot instance %s failed; tried again", warning.instance_id)

    def _end(self, warning: Notice) -> None:
        """What is still on the node now is lost with the instance: noted, then the instance terminated."""
        with self.store.lock:
            left = [p for p in self.store.pods_on_node(warning.node) if evictable(p)
                    and not meta(p).get("deletionTimestamp")] if warning.node else []
            blocked = {pod_key(p) for p in left if self._pdb_allows_none(p)}
        self._ec2.terminate_instances(InstanceIds=[warning.instance_id])
        with self._lock:
            warning.ended_at = self.clock.elapsed()
            warning.lost_to_pdb = sorted(blocked)
            warning.not_reached = sorted(pod_key(p) for p in left if pod_key(p) not in blocked)
        if left:
            log.warning("spot instance %s ended with %d evictable pods on %s (%d held by a PDB)",
                        warning.instance_id, len(left), warning.node, len(blocked))

    def _pdb_allows_none(self, pod: dict[str, Any]) -> bool:
        namespace = meta(pod).get("namespace")
        return any(_selects(pdb, pod) and pdb_status(self.store, pdb)["disruptionsAllowed"] <= 0
                   for pdb in self.store.snapshot("policy/v1/poddisruptionbudgets", namespace))

    # -- the record
    def report(self) -> dict[str, Any]:
        with self._lock:
            warnings = list(self._warnings.values())
        return {"interruptions": [self._entry(w) for w in warnings]}

    def _entry(self, warning: Notice) -> dict[str, Any]:
        drain = self.audit.drain_of(warning.node) if warning.node else None
        gone = drain.gone if drain else {}
        ended = warning.ended_at
        lost = set(warning.lost_to_pdb) | set(warning.not_reached)
        # The drain is done when every pod it had to move was gone before the instance ended.
        done = ended is not None and not lost or ended is None and all(p in gone for p in warning.pods)
        last = max((gone[p] for p in warning.pods if p in gone), default=None) if done and warning.pods else None
        return {
            "instanceId": warning.instance_id, "node": warning.node or None,
            "warnedAt": warning.warned_at, "noticeEndsAt": warning.ends_at, "endedAt": ended,
            "cordonedAt": drain.cordoned_at if drain else None,
            "firstEvictionAt": drain.first_eviction_at if drain else None,
            "lastEvictablePodGoneAt": last,
            "evictablePods": len(warning.pods),
            "evictionRequests": len(drain.evictions) if drain else 0,
            "lostHeldByPdb": warning.lost_to_pdb, "lostNotReached": warning.not_reached,
        }


def _read_request(body: Any) -> tuple[list[str], float]:
    if not isinstance(body, dict):
        raise bad_request('body must be {"instanceIds": ["i-...", ...], "noticeSeconds": N}')
    ids = body.get("instanceIds")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.startswith("i-") for i in ids):
        raise bad_request("instanceIds: a non-empty list of instance ids (i-...) is required")
    notice = body.get("noticeSeconds", NOTICE_SECONDS)
    if isinstance(notice, bool) or not isinstance(notice, int | float) or not 0 < notice <= NOTICE_SECONDS:
        raise bad_request(f"noticeSeconds: a number of seconds, more than 0 and at most {NOTICE_SECONDS:.0f}")
    return list(dict.fromkeys(ids)), float(notice)
