"""PDB-aware draining through the Eviction API, one round at a time.

A round evicts every pod that can go now and says what is left. Nothing is remembered between
rounds: the node's disruption taint is the state, so any later invocation of any function can run
the next round. PodDisruptionBudgets are enforced by the API server (an eviction that would break
one answers 429), so a round never takes more pods down than the budgets allow. Which pods go, with
what grace, and how long to wait between rounds is the core's (``disruption/drain_policy``); this
module lists the pods, sends the evictions and deletes, and sleeps.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import clock
from ..disruption.drain_policy import (
    FIRST_BACKOFF_SECONDS,
    MAX_BACKOFF_SECONDS,
    DrainResult,
    EvictionOutcome,
    EvictionResult,
    backoff,
    delete_grace_cap,
    has_do_not_disrupt,
    pod_grace,
    sort_pods,
)
from ..model.pod import DrainPod
from .http import ApiClient
from .listing import pods_on_node
from .nodes import DISRUPTED_TAINT_KEY, parse_time, taints_of
from .raw import path_segment, request_json, status_message

log = logging.getLogger(__name__)

# Evictions are independent calls; a few at once keeps a 100-pod node to a second or two.
EVICTION_WORKERS = 4
_EVICTED = EvictionOutcome(EvictionResult.EVICTED)
_GONE = EvictionOutcome(EvictionResult.GONE)


def drain_started_at(node: Mapping[str, Any]) -> datetime | None:
    """When the disruption taint went on the node (its timeAdded), which is when the drain began."""
    for taint in taints_of(node):
        if taint.get("key") == DISRUPTED_TAINT_KEY:
            return parse_time(taint.get("timeAdded"))
    return None


def drain_pods(api: ApiClient, node_name: str) -> list[DrainPod]:
    """The pods bound to the node, as a drain reads them."""
    return [DrainPod.from_dict(p) for p in pods_on_node(api, node_name)]


def drain_round(
    api: ApiClient,
    node_name: str,
    *,
    involuntary: bool,
    delete_after: datetime | None = None,
    grace_period_seconds: int | None = None,
    pods: Iterable[Mapping[str, Any]] | None = None,
    now: Callable[[], datetime] = clock.now,
    grace_deadline: datetime | None = None,
    legacy: bool = False,
    limit: int | None = None,
) -> DrainResult:
    """One pass over the node's pods: evict what can go now, report the rest.

    `involuntary` (the instance is going away regardless): do-not-disrupt pods are evicted too,
    and once `delete_after` has passed, pods still blocked are deleted directly instead of evicted.
    `grace_deadline` (the drain's start plus the NodePool's terminationGracePeriod) bounds every drain,
    voluntary or not, as in Karpenter v1: do-not-disrupt and PodDisruptionBudget-blocked pods are
    respected until each pod's ``drain_policy.pod_delete_time``, then deleted with what is left of the grace.
    Without either, nothing is ever forced. `grace_period_seconds` caps each pod's own termination
    grace (e.g. a spot notice). `legacy`: the node's pool is v1alpha5 or v1beta1, whose
    karpenter.sh/do-not-evict still holds a pod (NodePool.legacy_annotations). ``limit``: at most this many
    pods evicted or deleted, in the order the pass would take them (the rest wait for the next pass).
    """
    result = DrainResult(node=node_name)
    candidates = [DrainPod.from_dict(p) for p in pods] if pods is not None else drain_pods(api, node_name)
    current = now()
    to_evict, to_delete = sort_pods(result, candidates, involuntary, grace_deadline, current, legacy)
    for pod in to_evict:
        if has_do_not_disrupt(pod, current, legacy):
            log.info(
                "evicting do-not-disrupt pod for an involuntary disruption",
                extra={"pod": pod.key, "node": node_name},
            )
    if involuntary and delete_after is not None and current >= delete_after:
        to_delete, to_evict = to_delete + to_evict, []
    if not to_evict and not to_delete:
        return result
    delete_cap = delete_grace_cap(grace_period_seconds, grace_deadline, current)
    jobs = [(p, _evict, grace_period_seconds) for p in to_evict] + [(p, _delete, delete_cap) for p in to_delete]
    jobs = jobs if limit is None else jobs[:max(0, limit)]
    if not jobs:
        return result
    workers = min(EVICTION_WORKERS, len(jobs))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nodescale-evict") as pool:
        outcomes = list(pool.map(lambda job: job[1](api, job[0], job[2]), jobs))
    for (pod, action, _), outcome in zip(jobs, outcomes, strict=True):
        result.record(pod.key, outcome, forced=action is _delete)
    if result.deleted:
        log.warning(
            "grace period over: deleted pods directly instead of evicting",
            extra={"node": node_name, "pods": result.deleted},
        )
    return result


def eviction_body(pod: DrainPod, grace: int | None) -> dict[str, Any]:
    """A policy/v1 Eviction as the generated client sent it: unset options left out."""
    options: dict[str, Any] = {}
    seconds = pod_grace(pod, grace)
    if seconds is not None:
        options["gracePeriodSeconds"] = seconds
    if pod.uid:
        options["preconditions"] = {"uid": pod.uid}
    return {"deleteOptions": options, "metadata": {"name": pod.name, "namespace": pod.namespace}}


def _evict(api: ApiClient, pod: DrainPod, grace: int | None) -> EvictionOutcome:
    name, namespace = pod.name, pod.namespace
    path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(name)}/eviction"
    try:
        request_json(api, "POST", path, body=eviction_body(pod, grace))
        return _EVICTED
    except ApiException as exc:
        if exc.status == 404:
            return _GONE
        if exc.status == 409:
            # The UID precondition failed: the name now belongs to a new pod, the old one is gone.
            return _GONE
        if exc.status == 429:
            return EvictionOutcome(EvictionResult.BLOCKED_BY_PDB, retry_after=_retry_after(exc))
        return EvictionOutcome(EvictionResult.FAILED, error=f"{exc.status}: {status_message(exc)}")
    except Exception as exc:  # noqa: BLE001 - one pod's transport error must not end the round for the others
        return EvictionOutcome(EvictionResult.FAILED, error=f"{type(exc).__name__}: {exc}")


def _delete(api: ApiClient, pod: DrainPod, grace: int | None) -> EvictionOutcome:
    name, namespace = pod.name, pod.namespace
    path = f"/api/v1/namespaces/{path_segment(namespace)}/pods/{path_segment(name)}"
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    seconds = pod_grace(pod, grace)
    if seconds is not None:
        body["gracePeriodSeconds"] = seconds
    if pod.uid:
        body["preconditions"] = {"uid": pod.uid}
    try:
        request_json(api, "DELETE", path, body=body)
        return _EVICTED
    except ApiException as exc:
        if exc.status in (404, 409):
            return _GONE
        return EvictionOutcome(EvictionResult.FAILED, error=f"{exc.status}: {status_message(exc)}")
    except Exception as exc:  # noqa: BLE001 - see _evict
        return EvictionOutcome(EvictionResult.FAILED, error=f"{type(exc).__name__}: {exc}")


def _retry_after(exc: ApiException) -> float:
    try:
        return float((exc.headers or {}).get("Retry-After") or 0)
    except (TypeError, ValueError):
        return 0.0


def drain_rounds(
    round_: Callable[[], DrainResult | None],
    *,
    until: float,
    max_delay: float = MAX_BACKOFF_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """The one drain loop: ``round_`` (one round over one node or many) until it returns None (nothing
    left to drain), pausing between rounds as the core's ``backoff`` says (the delay held to
    ``max_delay``), with jitter. Gives up, False, rather than pause past ``until`` (a ``clock()`` time):
    the nodes keep their taint and a later run carries on.

    A round's result stands for every node it drained: what blocks (PodDisruptionBudgets, failures) and
    the longest Retry-After asked for.
    """
    delay = FIRST_BACKOFF_SECONDS
    while True:
        result = round_()
        if result is None:
            return True
        pause, delay = backoff(result, delay)
        delay = min(delay, max_delay)
        pause *= random.uniform(0.8, 1.2)
        if clock() + pause >= until:
            return False
        sleep(pause)
