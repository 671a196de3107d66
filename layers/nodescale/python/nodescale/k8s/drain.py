"""PDB-aware draining through the Eviction API, one round at a time.

A round evicts every pod that can go now and says what is left. Nothing is remembered between
rounds: the node's disruption taint is the state, so any later invocation of any function can run
the next round. PodDisruptionBudgets are enforced by the API server (an eviction that would break
one answers 429), so a round never takes more pods down than the budgets allow.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .. import clock
from ..model.pod import do_not_disrupt, started_at
from ..model.taints import Toleration
from ..model.timestamps import shifted
from .listing import pods_on_node
from .nodes import DISRUPTED_TAINT, DISRUPTED_TAINT_KEY, parse_time, taints_of
from .raw import path_segment, request_json, status_message

log = logging.getLogger(__name__)

# Evictions are independent calls; a few at once keeps a 100-pod node to a second or two.
EVICTION_WORKERS = 4
DEFAULT_POD_GRACE_SECONDS = 30  # Kubernetes' terminationGracePeriodSeconds when a pod sets none


@dataclass
class DrainResult:
    node: str
    evicted: list[str] = field(default_factory=list)  # eviction accepted (or pod deleted) this round
    deleted: list[str] = field(default_factory=list)  # deleted directly: the forced part of `evicted`
    blocked_by_pdb: list[str] = field(default_factory=list)
    blocked_by_do_not_disrupt: list[str] = field(default_factory=list)
    terminating: list[str] = field(default_factory=list)  # already shutting down; waited for, not evicted again
    in_flight: list[str] = field(default_factory=list)  # evicted in the latest round, not seen gone yet
    failed: dict[str, str] = field(default_factory=dict)  # pod -> error message, retried next round
    skipped: dict[str, str] = field(default_factory=dict)  # pod -> why it is left on the node
    retry_after: float = 0.0  # a server's Retry-After hint from a 429, seconds

    @property
    def remaining(self) -> list[str]:
        """Pods that still have to leave the node after this round."""
        return [
            *self.blocked_by_pdb,
            *self.blocked_by_do_not_disrupt,
            *self.terminating,
            *self.failed,
            *self.in_flight,
        ]

    @property
    def empty(self) -> bool:
        """True when the round found nothing left to remove: the node can be deleted."""
        return not self.remaining

    def merge(self, later: DrainResult) -> DrainResult:
        """Totals over several rounds: what was evicted ever, what blocks as of the later round."""
        return DrainResult(
            node=self.node,
            evicted=_union(self.evicted, later.evicted),
            deleted=_union(self.deleted, later.deleted),
            blocked_by_pdb=later.blocked_by_pdb,
            blocked_by_do_not_disrupt=later.blocked_by_do_not_disrupt,
            terminating=later.terminating,
            in_flight=later.in_flight,
            failed=later.failed,
            skipped=later.skipped,
            retry_after=later.retry_after,
        )

    def summary(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "evicted": len(self.evicted),
            "deleted": len(self.deleted),
            "blockedByPdb": sorted(self.blocked_by_pdb),
            "blockedByDoNotDisrupt": sorted(self.blocked_by_do_not_disrupt),
            "terminating": len(self.terminating),
            "failed": dict(self.failed),
            "empty": self.empty,
        }


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def skip_reason(pod: Mapping[str, Any]) -> str | None:
    """Why a drain leaves this pod alone, or None when it has to go."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return f"finished ({phase})"
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return "mirror (static) pod"
    owners = meta.get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" for o in owners):
        return "DaemonSet pod"
    if any(o.get("kind") == "Node" for o in owners):
        return "static pod"
    taint = DISRUPTED_TAINT
    if any(Toleration.from_dict(t).tolerates(taint) for t in spec.get("tolerations") or []):
        return f"tolerates {taint}"
    return None


def has_do_not_disrupt(pod: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Whether a drain leaves the pod in place for its do-not-disrupt annotation (see do_not_disrupt).

    With ``now`` a duration ("30m") counts from the pod's start, as the planner counts it, so a pod whose
    protection ran out is drained like any other; without, a duration counts as still running.
    """
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if now is None:
        return do_not_disrupt(annotations) is not None
    return do_not_disrupt(annotations, started_at(pod), now) is not None


def pod_delete_time(pod: Mapping[str, Any], grace_deadline: datetime | None) -> datetime | None:
    """When a drain bounded by the node's terminationGracePeriod deletes the pod outright, or None.

    Karpenter v1 (``podDeleteTimeWithGracePeriod``): at the node's deadline minus the pod's own
    terminationGracePeriodSeconds (30 s when unset, Kubernetes' default), so the pod still gets its full
    shutdown time before the node goes; a pod asking for more than is left is deleted at once.
    """
    if grace_deadline is None:
        return None
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    # A pod's own grace is any int64 the API server took: far past the deadline it is just "now".
    return shifted(grace_deadline, -(int(own) if own is not None else DEFAULT_POD_GRACE_SECONDS))


def drain_started_at(node: Mapping[str, Any]) -> datetime | None:
    """When the disruption taint went on the node (its timeAdded), which is when the drain began."""
    for taint in taints_of(node):
        if taint.get("key") == DISRUPTED_TAINT_KEY:
            return parse_time(taint.get("timeAdded"))
    return None


def drain_round(
    api: k8s.ApiClient,
    node_name: str,
    *,
    involuntary: bool,
    delete_after: datetime | None = None,
    grace_period_seconds: int | None = None,
    pods: Iterable[Mapping[str, Any]] | None = None,
    now: Callable[[], datetime] = clock.now,
    grace_deadline: datetime | None = None,
) -> DrainResult:
    """One pass over the node's pods: evict what can go now, report the rest.

    `involuntary` (the instance is going away regardless): do-not-disrupt pods are evicted too,
    and once `delete_after` has passed, pods still blocked are deleted directly instead of evicted.
    `grace_deadline` (the drain's start plus the NodePool's terminationGracePeriod) bounds every drain,
    voluntary or not, as in Karpenter v1: do-not-disrupt and PodDisruptionBudget-blocked pods are
    respected until each pod's :func:`pod_delete_time`, then deleted with what is left of the grace.
    Without either, nothing is ever forced. `grace_period_seconds` caps each pod's own termination
    grace (e.g. a spot notice).
    """
    result = DrainResult(node=node_name)
    candidates = list(pods) if pods is not None else pods_on_node(api, node_name)
    current = now()
    to_evict, to_delete = _sort_pods(result, candidates, involuntary, grace_deadline, current)
    if involuntary and delete_after is not None and current >= delete_after:
        to_delete, to_evict = to_delete + to_evict, []
    if not to_evict and not to_delete:
        return result
    left = None if grace_deadline is None else max(0, int((grace_deadline - current).total_seconds()))
    caps = [c for c in (grace_period_seconds, left) if c is not None]
    delete_cap = min(caps) if caps else None
    jobs = [(p, _evict, grace_period_seconds) for p in to_evict] + [(p, _delete, delete_cap) for p in to_delete]
    workers = min(EVICTION_WORKERS, len(jobs))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nodescale-evict") as pool:
        outcomes = list(pool.map(lambda job: job[1](api, job[0], job[2]), jobs))
    for (pod, action, _), (outcome, detail) in zip(jobs, outcomes, strict=True):
        key = pod_key(pod)
        if outcome == "evicted":
            result.evicted.append(key)
            result.in_flight.append(key)
            if action is _delete:
                result.deleted.append(key)
        elif outcome == "pdb":
            result.blocked_by_pdb.append(key)
            result.retry_after = max(result.retry_after, float(detail or 0))
        elif outcome == "failed":
            result.failed[key] = str(detail)
        # "gone": nothing left to do for it
    if result.deleted:
        log.warning(
            "grace period over: deleted pods directly instead of evicting",
            extra={"node": node_name, "pods": result.deleted},
        )
    return result


def _sort_pods(
    result: DrainResult,
    candidates: Iterable[Mapping[str, Any]],
    involuntary: bool,
    grace_deadline: datetime | None,
    now: datetime,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(pods to evict, pods whose grace-period delete time has come); the rest go into ``result``."""
    to_evict: list[Mapping[str, Any]] = []
    to_delete: list[Mapping[str, Any]] = []
    for pod in candidates:
        key = pod_key(pod)
        reason = skip_reason(pod)
        due = pod_delete_time(pod, grace_deadline)
        if reason:
            result.skipped[key] = reason
        elif (pod.get("metadata") or {}).get("deletionTimestamp"):
            result.terminating.append(key)
        elif due is not None and now >= due:
            to_delete.append(pod)
        elif has_do_not_disrupt(pod, now) and not involuntary:
            result.blocked_by_do_not_disrupt.append(key)
        else:
            if has_do_not_disrupt(pod, now):
                log.info(
                    "evicting do-not-disrupt pod for an involuntary disruption",
                    extra={"pod": key, "node": result.node},
                )
            to_evict.append(pod)
    return to_evict, to_delete


def _evict(api: k8s.ApiClient, pod: Mapping[str, Any], grace: int | None) -> tuple[str, Any]:
    meta = pod.get("metadata") or {}
    name, namespace = meta.get("name") or "", meta.get("namespace") or "default"
    options = k8s.V1DeleteOptions(
        grace_period_seconds=_grace(pod, grace),
        preconditions=k8s.V1Preconditions(uid=meta["uid"]) if meta.get("uid") else None,
    )
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace=namespace), delete_options=options)
    try:
        k8s.CoreV1Api(api).create_namespaced_pod_eviction(name, namespace, body)
        return "evicted", None
    except ApiException as exc:
        if exc.status == 404:
            return "gone", None
        if exc.status == 409:
            # The UID precondition failed: the name now belongs to a new pod, the old one is gone.
            return "gone", None
        if exc.status == 429:
            return "pdb", _retry_after(exc)
        return "failed", f"{exc.status}: {status_message(exc)}"
    except Exception as exc:  # noqa: BLE001 - one pod's transport error must not end the round for the others
        return "failed", f"{type(exc).__name__}: {exc}"


def _delete(api: k8s.ApiClient, pod: Mapping[str, Any], grace: int | None) -> tuple[str, Any]:
    meta = pod.get("metadata") or {}
    name, namespace = meta.get("name") or "", meta.get("namespace") or "default"
    path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(name)}"
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    seconds = _grace(pod, grace)
    if seconds is not None:
        body["gracePeriodSeconds"] = seconds
    if meta.get("uid"):
        body["preconditions"] = {"uid": meta["uid"]}
    try:
        request_json(api, "DELETE", path, body=body)
        return "evicted", None
    except ApiException as exc:
        if exc.status in (404, 409):
            return "gone", None
        return "failed", f"{exc.status}: {status_message(exc)}"
    except Exception as exc:  # noqa: BLE001 - see _evict
        return "failed", f"{type(exc).__name__}: {exc}"


def _grace(pod: Mapping[str, Any], cap: int | None) -> int | None:
    if cap is None:
        return None
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return min(int(own), cap) if own is not None else cap


def _retry_after(exc: ApiException) -> float:
    try:
        return float((exc.headers or {}).get("Retry-After") or 0)
    except (TypeError, ValueError):
        return 0.0


def drain(
    api: k8s.ApiClient,
    node_name: str,
    *,
    involuntary: bool,
    until: float,
    delete_after: datetime | None = None,
    grace_period_seconds: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """Rounds until the node is empty or `until` (a `clock()` time) passes, backing off while blocked.

    Returns the totals; a node that is not empty yet keeps its taint and a later run carries on.
    """
    total: DrainResult | None = None
    delay = 0.5
    while True:
        result = drain_round(
            api, node_name, involuntary=involuntary, delete_after=delete_after, grace_period_seconds=grace_period_seconds
        )
        total = result if total is None else total.merge(result)
        if result.empty:
            return total
        blocked = result.blocked_by_pdb or result.failed or result.blocked_by_do_not_disrupt
        # Evictions just accepted need a moment to finish; blocked ones need the budget to recover.
        pause = max(result.retry_after, delay if blocked else 0.25) * random.uniform(0.8, 1.2)
        if clock() + pause >= until:
            return total
        sleep(pause)
        delay = min(delay * 2, 8.0) if blocked else 0.5
