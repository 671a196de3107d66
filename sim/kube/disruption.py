"""PodDisruptionBudget arithmetic and the `pods/<name>/eviction` subresource."""

from __future__ import annotations

import math
from typing import Any

from .errors import ApiError, not_found
from .objects import controller_ref, meta, pod_healthy, pod_terminal
from .selectors import compile_label_selector_object
from .store import Store

_SCALABLE_OWNERS = {
    "ReplicaSet": "apps/v1/replicasets",
    "StatefulSet": "apps/v1/statefulsets",
    "ReplicationController": "v1/replicationcontrollers",
}


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent value as a pod count."""
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError as exc:
            raise ApiError(
                422, "Invalid", f'invalid value for IntOrString: invalid value "{value}": not a percentage'
            ) from exc
        exact = percent * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ApiError(422, "Invalid", f"invalid value for IntOrString: {value!r}") from exc


def matching_pods(store: Store, pdb: dict[str, Any]) -> list[dict[str, Any]]:
    selector = (pdb.get("spec") or {}).get("selector")
    # policy/v1: an empty selector selects every pod in the namespace, a missing one none.
    matches = compile_label_selector_object(selector, empty_matches_all=selector is not None)
    return [
        pod
        for pod in store.snapshot("v1/pods", meta(pdb).get("namespace"))
        if matches(meta(pod).get("labels") or {})
    ]


def _expected_pods(store: Store, pods: list[dict[str, Any]]) -> int:
    """The pods the owners of `pods` want: the sum of their controllers' replicas, as the
    disruption controller counts for percentages and maxUnavailable."""
    owners: dict[str, int] = {}
    loose = 0
    for pod in pods:
        ref = controller_ref(pod)
        resource = _SCALABLE_OWNERS.get(ref.get("kind", "")) if ref else None
        if ref is None or resource is None:
            # Pods no controller scales: each one counts, until it has actually finished.
            if not pod_terminal(pod):
                loose += 1
            continue
        if ref["uid"] in owners:
            continue
        try:
            owner = store.peek(resource, ref.get("name", ""), meta(pod).get("namespace"))
        except ApiError:
            owner = None
        replicas = ((owner or {}).get("spec") or {}).get("replicas", 1) if owner else 0
        owners[ref["uid"]] = int(replicas)
    return sum(owners.values()) + loose


def pdb_status(store: Store, pdb: dict[str, Any]) -> dict[str, Any]:
    """currentHealthy, desiredHealthy, disruptionsAllowed and expectedPods as the disruption controller
    would compute them now."""
    spec = pdb.get("spec") or {}
    pods = matching_pods(store, pdb)
    healthy = sum(1 for pod in pods if pod_healthy(pod))
    if spec.get("maxUnavailable") is not None:
        expected = _expected_pods(store, pods)
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    elif isinstance(spec.get("minAvailable"), str):
        expected = _expected_pods(store, pods)
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    else:
        expected = sum(1 for pod in pods if not pod_terminal(pod))
        desired = _scaled(spec.get("minAvailable", 1), expected, round_up=True)
    return {
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "disruptionsAllowed": max(0, healthy - desired),
        "expectedPods": expected,
        "observedGeneration": meta(pdb).get("generation", 1),
    }


def _write_status(store: Store, pdb: dict[str, Any], status: dict[str, Any], disrupted: str | None = None) -> None:
    def change(obj: dict[str, Any]) -> bool:
        current = obj.setdefault("status", {})
        before = dict(current)
        current.update(status)
        if disrupted:
            current.setdefault("disruptedPods", {})[disrupted] = store.clock.timestamp()
        allowed = current["disruptionsAllowed"] > 0
        conditions = [c for c in current.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
        conditions.append(
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed else "False",
                "reason": "SufficientPods" if allowed else "InsufficientPods",
                "message": "",
                "observedGeneration": status["observedGeneration"],
                "lastTransitionTime": next(
                    (
                        c["lastTransitionTime"]
                        for c in before.get("conditions") or []
                        if c.get("type") == "DisruptionAllowed"
                        and c.get("status") == ("True" if allowed else "False")
                    ),
                    store.clock.timestamp(),
                ),
            }
        )
        current["conditions"] = conditions
        return current != before

    store.modify("policy/v1/poddisruptionbudgets", meta(pdb)["name"], meta(pdb)["namespace"], change, "status")


def refresh_pdb_status(store: Store, pdb: dict[str, Any]) -> None:
    _write_status(store, pdb, pdb_status(store, pdb))


def evict(store: Store, name: str, namespace: str, eviction: dict[str, Any] | None) -> dict[str, Any]:
    """Evict a pod unless a PodDisruptionBudget forbids it; 429 TooManyRequests when one does."""
    options = (eviction or {}).get("deleteOptions") or {}
    dry_run = options.get("dryRun") == ["All"]
    with store.lock:
        pod = store.peek("v1/pods", name, namespace)
        if pod is None:
            raise not_found("pods", "", name)
        pdbs = [
            pdb
            for pdb in store.snapshot("policy/v1/poddisruptionbudgets", namespace)
            if _selects(pdb, pod)
        ]
        phase = (pod.get("status") or {}).get("phase")
        exempt = bool(meta(pod).get("deletionTimestamp")) or phase in ("Succeeded", "Failed", "Pending")
        if not exempt and pdbs:
            if len(pdbs) > 1:
                raise ApiError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            pdb = pdbs[0]
            status = pdb_status(store, pdb)
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            if pod_healthy(pod):
                allowed = status["disruptionsAllowed"] > 0
            else:
                allowed = policy == "AlwaysAllow" or status["currentHealthy"] >= status["desiredHealthy"]
            if not allowed:
                if not dry_run:
                    _write_status(store, pdb, status)
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {meta(pdb)['name']} needs "
                                f"{status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently",
                            }
                        ]
                    },
                )
            if pod_healthy(pod):
                status["disruptionsAllowed"] -= 1
                status["currentHealthy"] -= 1
            if not dry_run:
                _write_status(store, pdb, status, disrupted=name)
        store.delete(
            "v1/pods",
            name,
            namespace,
            grace_period_seconds=options.get("gracePeriodSeconds"),
            preconditions=options.get("preconditions"),
            dry_run=dry_run,
        )
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (pdb.get("spec") or {}).get("selector")
    if selector is None:
        return False
    return compile_label_selector_object(selector)(meta(pod).get("labels") or {})
