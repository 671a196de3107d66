"""The drain policy: which pods a drain evicts, leaves, waits for or deletes, in what order, with what
grace, and how long to wait between rounds. Pure: the Kubernetes adapter (``k8s/drain``) lists pods, sends the
evictions and deletes, and sleeps; both the interruption and the disruption use-cases drain through it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, IntEnum
from typing import Any

from ..model.pod import DrainPod, Pod, do_not_disrupt
from ..model.taints import Taint, Toleration
from ..model.timestamps import shifted
from .nodes import DISRUPTED_TAINT_KEY

DEFAULT_POD_GRACE_SECONDS = 30  # Kubernetes' terminationGracePeriodSeconds when a pod sets none
DISRUPTED_TAINT = Taint(DISRUPTED_TAINT_KEY, "NoSchedule")
# Backoff between rounds while pods are blocked: doubling from the first, up to the cap.
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 8.0
# Evictions just accepted need only a moment to finish.
SETTLE_SECONDS = 0.25
# Pods of these priority classes keep the node running (kube-proxy, CNI, DNS): they leave last.
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class DrainGroup(IntEnum):
    """Karpenter's drain order (after the kubelet's graceful node shutdown): a group is evicted only once
    every pod of the groups before it has left the node."""

    NON_CRITICAL = 0
    NON_CRITICAL_DAEMON = 1
    CRITICAL = 2
    CRITICAL_DAEMON = 3


class EvictionResult(Enum):
    """What one eviction or forced delete of a pod came to."""

    EVICTED = "eviction accepted"  # or the pod deleted: it is on its way out
    GONE = "pod already gone"  # 404, or 409 on the UID precondition: the name is someone else's now
    BLOCKED_BY_PDB = "blocked by a PodDisruptionBudget"  # 429: retried next round
    FAILED = "failed"  # any other error: retried next round

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class EvictionOutcome:
    result: EvictionResult
    retry_after: float = 0.0  # a 429's Retry-After hint, seconds
    error: str = ""  # what failed, for FAILED


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
    skipped: dict[str, Skip] = field(default_factory=dict)  # pod -> why it is left on the node
    waiting: list[str] = field(default_factory=list)  # in a later drain group: evicted once the earlier ones left
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
            *self.waiting,
        ]

    @property
    def empty(self) -> bool:
        """True when the round found nothing left to remove: the node can be deleted."""
        return not self.remaining

    def record(self, key: str, outcome: EvictionOutcome, forced: bool) -> None:
        """Count one pod's eviction (``forced``: a direct delete) into this round."""
        if outcome.result is EvictionResult.EVICTED:
            self.evicted.append(key)
            self.in_flight.append(key)
            if forced:
                self.deleted.append(key)
        elif outcome.result is EvictionResult.BLOCKED_BY_PDB:
            self.blocked_by_pdb.append(key)
            self.retry_after = max(self.retry_after, outcome.retry_after)
        elif outcome.result is EvictionResult.FAILED:
            self.failed[key] = outcome.error
        # GONE: nothing left to do for it

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
            waiting=later.waiting,
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
            "waitingForEarlierGroups": len(self.waiting),
            "empty": self.empty,
        }


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))


class SkipKind(Enum):
    """The kinds of pod a drain leaves on the node."""

    FINISHED = "finished"
    MIRROR = "mirror"
    STATIC = "static"
    TOLERATES = "tolerates"


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a drain leaves a pod on its node: the kind, and the message."""

    kind: SkipKind
    why: str

    def __str__(self) -> str:
        return self.why


def skip_reason(pod: DrainPod) -> Skip | None:
    """Why a drain leaves this pod (as the k8s adapter read it) alone, or None when it has to go."""
    return _skip(pod.phase, pod.annotations, pod.owner_kinds, pod.tolerations)


def pod_skip(pod: Pod) -> Skip | None:
    """``skip_reason`` for a pod the world reader parsed."""
    return _skip(pod.phase, pod.annotations, pod.owner_kinds, pod.tolerations)


def _skip(
    phase: str | None, annotations: Mapping[str, str], owner_kinds: Collection[Any], tolerations: Iterable[Toleration]
) -> Skip | None:
    if phase in ("Succeeded", "Failed"):
        return Skip(SkipKind.FINISHED, f"finished ({phase})")
    if "kubernetes.io/config.mirror" in annotations:
        return Skip(SkipKind.MIRROR, "mirror (static) pod")
    if "Node" in owner_kinds:
        return Skip(SkipKind.STATIC, "static pod")
    if any(t.tolerates(DISRUPTED_TAINT) for t in tolerations):
        return Skip(SkipKind.TOLERATES, f"tolerates {DISRUPTED_TAINT}")
    return None


def is_daemonset_pod(pod: DrainPod) -> bool:
    """Whether a DaemonSet owns the pod: drained, but never rescheduled elsewhere (its DaemonSet runs one
    on every node it selects)."""
    return "DaemonSet" in pod.owner_kinds


def drain_group(pod: DrainPod) -> DrainGroup:
    """Where the pod comes in Karpenter's drain order."""
    critical = pod.priority_class in CRITICAL_PRIORITY_CLASSES
    daemon = is_daemonset_pod(pod)
    if critical:
        return DrainGroup.CRITICAL_DAEMON if daemon else DrainGroup.CRITICAL
    return DrainGroup.NON_CRITICAL_DAEMON if daemon else DrainGroup.NON_CRITICAL


def current_group(pods: Iterable[DrainPod]) -> DrainGroup | None:
    """The group a drain evicts now: the first with a pod still on the node that the drain has to remove
    (terminating ones included: a group is done only once its pods are gone), None when there is none."""
    groups = [drain_group(p) for p in pods if skip_reason(p) is None]
    return min(groups) if groups else None


def has_do_not_disrupt(pod: DrainPod, now: datetime | None = None, legacy: bool = False) -> bool:
    """Whether a drain leaves the pod in place for its do-not-disrupt annotation (see do_not_disrupt; ``legacy``:
    the node's pool honours karpenter.sh/do-not-evict).

    With ``now`` a duration ("30m") counts from the pod's start, as the planner counts it, so a pod whose
    protection ran out is drained like any other; without, a duration counts as still running.
    """
    if now is None:
        return do_not_disrupt(pod.annotations, legacy=legacy) is not None
    return do_not_disrupt(pod.annotations, pod.started, now, legacy=legacy) is not None


def pod_delete_time(pod: DrainPod, grace_deadline: datetime | None) -> datetime | None:
    """When a drain bounded by the node's terminationGracePeriod deletes the pod outright, or None.

    Karpenter v1 (``podDeleteTimeWithGracePeriod``): at the node's deadline minus the pod's own
    terminationGracePeriodSeconds (30 s when unset, Kubernetes' default), so the pod still gets its full
    shutdown time before the node goes; a pod asking for more than is left is deleted at once.
    """
    if grace_deadline is None:
        return None
    own = pod.grace_seconds
    # A pod's own grace is any int64 the API server took: far past the deadline it is just "now".
    return shifted(grace_deadline, -(own if own is not None else DEFAULT_POD_GRACE_SECONDS))


def sort_pods(
    result: DrainResult,
    candidates: Iterable[DrainPod],
    involuntary: bool,
    grace_deadline: datetime | None,
    now: datetime,
    legacy: bool = False,
) -> tuple[list[DrainPod], list[DrainPod]]:
    """(pods to evict, pods whose grace-period delete time has come); the rest go into ``result``.
    Pods to evict include do-not-disrupt ones when ``involuntary``; ``legacy`` as in has_do_not_disrupt. Only
    the current drain group's pods are evicted (``current_group``); a later group's pods wait, unless their
    delete time has come, which Karpenter honours whatever the group."""
    pods = list(candidates)
    group = current_group(pods)
    to_evict: list[DrainPod] = []
    to_delete: list[DrainPod] = []
    for pod in pods:
        key = pod.key
        reason = skip_reason(pod)
        due = pod_delete_time(pod, grace_deadline)
        if reason:
            result.skipped[key] = reason
        elif pod.deleting:
            result.terminating.append(key)
        elif due is not None and now >= due:
            to_delete.append(pod)
        elif drain_group(pod) != group:
            result.waiting.append(key)
        elif has_do_not_disrupt(pod, now, legacy) and not involuntary:
            result.blocked_by_do_not_disrupt.append(key)
        else:
            to_evict.append(pod)
    return to_evict, to_delete


def delete_grace_cap(grace_period_seconds: int | None, grace_deadline: datetime | None, now: datetime) -> int | None:
    """The most termination grace a forced delete gives a pod: the caller's cap and what is left before
    the node's grace deadline, whichever is smaller (None: no cap)."""
    left = None if grace_deadline is None else max(0, int((grace_deadline - now).total_seconds()))
    caps = [c for c in (grace_period_seconds, left) if c is not None]
    return min(caps) if caps else None


def pod_grace(pod: DrainPod, cap: int | None) -> int | None:
    """The grace period to send with a pod's eviction or delete: its own, held to ``cap``."""
    if cap is None:
        return None
    own = pod.grace_seconds
    return min(own, cap) if own is not None else cap


def backoff(result: DrainResult, delay: float) -> tuple[float, float]:
    """(the pause before the next round, before jitter; the delay after it) given the round's result and
    the current delay: blocked pods need the budget to recover, accepted evictions only a moment; a
    server's Retry-After is a floor."""
    blocked = result.blocked_by_pdb or result.failed or result.blocked_by_do_not_disrupt
    pause = max(result.retry_after, delay if blocked else SETTLE_SECONDS)
    return pause, (min(delay * 2, MAX_BACKOFF_SECONDS) if blocked else FIRST_BACKOFF_SECONDS)


def undrainable_claims(pods: Iterable[DrainPod]) -> list[tuple[str, str]]:
    """The claims of the pods a drain leaves on the node: their volumes stay attached, so Karpenter does
    not wait for those to detach."""
    return [claim for pod in pods if skip_reason(pod) is not None for claim in pod.claims]


def pending_attachments(attachments: Iterable[Mapping[str, Any]], kept_volumes: Iterable[str]) -> list[str]:
    """The VolumeAttachments a termination still waits for before the instance goes: those of a
    PersistentVolume, except the volumes of pods that are not drained (``kept_volumes``, PV names)."""
    kept = set(kept_volumes)
    names = []
    for attachment in attachments:
        pv = (((attachment.get("spec") or {}).get("source")) or {}).get("persistentVolumeName")
        if pv and pv not in kept:
            names.append(str((attachment.get("metadata") or {}).get("name")))
    return sorted(names)
