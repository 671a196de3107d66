"""Where a pod may run: requests, node selectors, required node affinity, taints and tolerations.

Shared by the scheduler and the DaemonSet controller. Reasons are worded like kube-scheduler's
so that "0/3 nodes are available: ..." messages read the same.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .objects import meta, node_ready
from .quantity import resource_list

DEFAULT_MAX_PODS = 110
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _add(total: dict[str, int], more: dict[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests in milli-units: containers (and sidecars) summed, each ordinary init
    container taken alone when larger, plus the pod overhead."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, resource_list((container.get("resources") or {}).get("requests")))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        requests = resource_list((container.get("resources") or {}).get("requests"))
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            continue
        for name, value in requests.items():
            init_peak[name] = max(init_peak.get(name, 0), value + sidecars.get(name, 0))
    _add(total, sidecars)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    _add(total, resource_list(spec.get("overhead")))
    return {name: value for name, value in total.items() if value > 0}


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def effective_taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's taints plus those the node lifecycle controller would add for NotReady/cordoned nodes."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    keys = {(t.get("key"), t.get("effect")) for t in taints}
    if not node_ready(node) and (NOT_READY_TAINT["key"], "NoSchedule") not in keys:
        taints.append(NOT_READY_TAINT)
    return taints


def untolerated_taint(node: dict[str, Any], tolerations: list[dict[str, Any]]) -> dict[str, Any] | None:
    for taint in effective_taints(node):
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


def _numeric(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _expression_matches(expr: dict[str, Any], values_of: dict[str, str]) -> bool:
    key, operator = expr.get("key", ""), expr.get("operator", "")
    values = expr.get("values") or []
    present = key in values_of
    value = values_of.get(key)
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        actual, bound = _numeric(value), _numeric(values[0])
        if actual is None or bound is None:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _term_matches(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    if not all(_expression_matches(e, labels) for e in expressions):
        return False
    return all(_expression_matches(f, {"metadata.name": name}) for f in fields)


def matches_node_selector(selector: dict[str, Any], node: dict[str, Any]) -> bool:
    """A required NodeSelector (a PersistentVolume's ``nodeAffinity.required``): any of its terms matches."""
    labels = meta(node).get("labels") or {}
    return any(_term_matches(term, labels, meta(node).get("name", "")) for term in selector.get("nodeSelectorTerms") or [])


def matches_node_selection(spec: dict[str, Any], node: dict[str, Any]) -> bool:
    """nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity."""
    labels = meta(node).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {})
    terms = required.get("nodeSelectorTerms")
    if terms:
        return any(_term_matches(term, labels, meta(node).get("name", "")) for term in terms)
    return True


def allocatable(node: dict[str, Any]) -> dict[str, int]:
    status = node.get("status") or {}
    values = resource_list(status.get("allocatable") or status.get("capacity"))
    values.setdefault("pods", DEFAULT_MAX_PODS * 1000)
    return values


def static_reason(spec: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why the pod cannot go to the node whatever the node's load, or None: the scheduler's
    NodeUnschedulable, TaintToleration, NodeAffinity and DynamicResources filters in their order."""
    tolerations = spec.get("tolerations") or []
    if (node.get("spec") or {}).get("unschedulable") and not tolerates(tolerations, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    taint = untolerated_taint(node, tolerations)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    if not matches_node_selection(spec, node):
        return "node(s) didn't match Pod's node affinity/selector"
    if spec.get("resourceClaims"):
        # kube-scheduler's DynamicResources filter: sim runs no DRA driver and publishes no ResourceSlices,
        # so no node can allocate a claim (never forgiving a pod EKS would leave pending).
        return "cannot allocate all claims"
    return None


HostPort = tuple[str, str, int]  # (host IP, protocol, port)
_ANY_ADDRESS = ("0.0.0.0", "::")
PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"


def host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod's containers ask for, as kube-scheduler's NodePorts filter reads them: an empty
    host IP is 0.0.0.0, an unset protocol TCP; init containers' ports are not counted."""
    ports = []
    for container in spec.get("containers") or []:
        for port in (container.get("ports") or []) if isinstance(container, dict) else []:
            if isinstance(port, dict) and port.get("hostPort"):
                ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", int(port["hostPort"])))
    return tuple(ports)


def ports_conflict(wanted: tuple[HostPort, ...], used: Counter[HostPort]) -> bool:
    """Whether a wanted host port is taken on the node: same protocol and port, and the same IP or either
    side bound to every address."""
    for ip, protocol, port in wanted:
        for (used_ip, used_protocol, used_port), count in used.items():
            if count and used_port == port and used_protocol == protocol and (
                    used_ip == ip or ip in _ANY_ADDRESS or used_ip in _ANY_ADDRESS):
                return True
    return False


def insufficient(requests: dict[str, int], free: dict[str, int]) -> list[str]:
    """Resources the pod asks for that the node cannot give (pods counted as one each)."""
    missing = []
    if free.get("pods", 0) < 1000:
        missing.append("Too many pods")
    for name, value in requests.items():
        if name != "pods" and free.get(name, 0) < value:
            missing.append(f"Insufficient {name}")
    return missing
