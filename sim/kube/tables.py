"""`meta.k8s.io/v1 Table` answers: what `kubectl get` prints, converted on the server.

kubectl asks for a list or an object with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`
and prints the columns the server sends (upper-cased), the ones with `priority` 1 only with
`-o wide`. The columns and cells follow kube-apiserver's printers (`pkg/printers/internalversion`)
for pods, nodes, events, deployments, StatefulSets, namespaces and PodDisruptionBudgets; every other kind gets the
name and age, as kube-apiserver's printers do for custom resources without printer columns; a custom
resource whose CRD has additionalPrinterColumns gets them (printcolumns.py).

Each row carries the object's metadata (`includeObject=Metadata`, the default), the whole object
(`Object`) or nothing (`None`): kubectl reads the namespace (`-A`) and labels (`--show-labels`) there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import printcolumns
from .errors import ApiError
from .objects import meta

Column = tuple[str, str, str, int]  # name, type, format, priority
Cells = Callable[[dict[str, Any], datetime], list[Any]]
TABLE_MEDIA = "application/json;as=Table;v=v1;g=meta.k8s.io"
_NAME: Column = ("Name", "string", "name", 0)
_AGE: Column = ("Age", "string", "", 0)
_DESCRIPTIONS = {
    "Name": "Name must be unique within a namespace.",
    "Age": "CreationTimestamp is a timestamp representing the server time when this object was created.",
}


def wants_table(accept: str | None) -> str | None:
    """The Table apiVersion the Accept header asks for first (`meta.k8s.io/v1` or `/v1beta1`), else None."""
    for entry in (accept or "").split(","):
        params = dict(
            (p.split("=", 1)[0].strip(), p.split("=", 1)[1].strip()) for p in entry.split(";")[1:] if "=" in p
        )
        media = entry.split(";")[0].strip()
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and media == "application/json":
            if params.get("v") in ("v1", "v1beta1"):
                return f"meta.k8s.io/{params['v']}"
            continue
        if media in ("application/json", "*/*", "application/*"):
            return None
    return None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kube's `duration.HumanDuration`: `45s`, `3m20s`, `12m`, `5h6m`, `20h`, `3d4h`, `40d`, `2y10d`."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def since(value: Any, now: datetime) -> str:
    """kube's `translateTimestampSince`: the age of a timestamp, `<unknown>` without one."""
    moment = _parse_time(value)
    return "<unknown>" if moment is None else human_duration((now - moment).total_seconds())


def _age(obj: dict[str, Any], now: datetime) -> str:
    return since(meta(obj).get("creationTimestamp"), now)


# ------------------------------------------------------------------------------------------- pods


def pod_status(pod: dict[str, Any]) -> str:
    """The STATUS column: the phase, or what a container is waiting on or ended with (kube's printPod)."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for cs in reversed(status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif (state.get("terminated") or {}).get("reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            terminated = state["terminated"] or {}
            reason = (f"Signal:{terminated['signal']}" if terminated.get("signal")
                      else f"ExitCode:{terminated.get('exitCode', 0)}")
    if meta(pod).get("deletionTimestamp") and status.get("reason") != "NodeLost":
        reason = "Terminating"
    return str(reason)


def _pod_cells(pod: dict[str, Any], now: datetime) -> list[Any]:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_cell = "<none>"
    if gates:
        done = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gates_cell = f"{done}/{len(gates)}"
    return [
        meta(pod).get("name", ""), f"{ready}/{len(spec.get('containers') or [])}", pod_status(pod),
        str(restarts), _age(pod, now), status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>", gates_cell,
    ]


# ------------------------------------------------------------------------------------------- nodes


def node_status(node: dict[str, Any]) -> str:
    """The STATUS column: Ready, NotReady or Unknown, and SchedulingDisabled when cordoned."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    states = ["Unknown" if ready is None else
              {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    return ",".join(states)


def node_roles(node: dict[str, Any]) -> str:
    roles = set()
    for key, value in (meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            roles.add(key.removeprefix("node-role.kubernetes.io/"))
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def _node_cells(node: dict[str, Any], now: datetime) -> list[Any]:
    status = node.get("status") or {}
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in reversed(status.get("addresses") or [])}
    return [
        meta(node).get("name", ""), node_status(node), node_roles(node), _age(node, now),
        info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>",
    ]


# ------------------------------------------------------------------------------------------- others


def _event_cells(event: dict[str, Any], now: datetime) -> list[Any]:
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or event.get("eventTime") or first
    subobject = involved.get("fieldPath") or ""
    return [
        since(last, now), event.get("type") or "", event.get("reason") or "",
        f"{str(involved.get('kind') or '').lower()}/{involved.get('name') or ''}", subobject,
        ", ".join(p for p in (source.get("component"), source.get("host")) if p),
        event.get("message") or "", since(first, now), int(event.get("count") or 1), meta(event).get("name", ""),
    ]


def selector_string(selector: dict[str, Any] | None) -> str:
    """A LabelSelector as kubectl writes one: `app=nginx,tier in (web)`."""
    selector = selector or {}
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), ",".join(expr.get("values") or [])
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": f"{key}", "DoesNotExist": f"!{key}"}.get(op, f"{key} {op}"))
    return ",".join(terms) or "<none>"


def _deployment_cells(deployment: dict[str, Any], now: datetime) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        meta(deployment).get("name", ""), f"{status.get('readyReplicas') or 0}/{spec.get('replicas', 1)}",
        int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0), _age(deployment, now),
        ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
        selector_string(spec.get("selector")),
    ]


def _statefulset_cells(sts: dict[str, Any], now: datetime) -> list[Any]:
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        meta(sts).get("name", ""), f"{status.get('readyReplicas') or 0}/{spec.get('replicas', 1)}", _age(sts, now),
        ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
    ]


def _pdb_cells(pdb: dict[str, Any], now: datetime) -> list[Any]:
    spec = pdb.get("spec") or {}
    return [
        meta(pdb).get("name", ""), str(spec.get("minAvailable", "N/A")), str(spec.get("maxUnavailable", "N/A")),
        int((pdb.get("status") or {}).get("disruptionsAllowed") or 0), _age(pdb, now),
    ]


def _namespace_cells(namespace: dict[str, Any], now: datetime) -> list[Any]:
    return [meta(namespace).get("name", ""), (namespace.get("status") or {}).get("phase") or "Active",
            _age(namespace, now)]


def _default_cells(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [meta(obj).get("name", ""), _age(obj, now)]


PRINTERS: dict[tuple[str, str], tuple[list[Column], Cells]] = {
    ("", "Pod"): ([_NAME, ("Ready", "string", "", 0), ("Status", "string", "", 0), ("Restarts", "string", "", 0),
                   _AGE, ("IP", "string", "", 1), ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
                   ("Readiness Gates", "string", "", 1)], _pod_cells),
    ("", "Node"): ([_NAME, ("Status", "string", "", 0), ("Roles", "string", "", 0), _AGE,
                    ("Version", "string", "", 0), ("Internal-IP", "string", "", 1), ("External-IP", "string", "", 1),
                    ("OS-Image", "string", "", 1), ("Kernel-Version", "string", "", 1),
                    ("Container-Runtime", "string", "", 1)], _node_cells),
    ("", "Event"): ([("Last Seen", "string", "", 0), ("Type", "string", "", 0), ("Reason", "string", "", 0),
                     ("Object", "string", "", 0), ("Subobject", "string", "", 1), ("Source", "string", "", 1),
                     ("Message", "string", "", 0), ("First Seen", "string", "", 1), ("Count", "integer", "", 1),
                     ("Name", "string", "", 1)], _event_cells),
    ("apps", "Deployment"): ([_NAME, ("Ready", "string", "", 0), ("Up-to-date", "integer", "", 0),
                              ("Available", "integer", "", 0), _AGE, ("Containers", "string", "", 1),
                              ("Images", "string", "", 1), ("Selector", "string", "", 1)], _deployment_cells),
    ("apps", "StatefulSet"): ([_NAME, ("Ready", "string", "", 0), _AGE, ("Containers", "string", "", 1),
                               ("Images", "string", "", 1)], _statefulset_cells),
    ("policy", "PodDisruptionBudget"): ([_NAME, ("Min Available", "string", "", 0),
                                         ("Max Unavailable", "string", "", 0),
                                         ("Allowed Disruptions", "integer", "", 0), _AGE], _pdb_cells),
    ("", "Namespace"): ([_NAME, ("Status", "string", "", 0), _AGE], _namespace_cells),
}


def _custom_columns(printer_columns: tuple[dict[str, Any], ...]) -> tuple[list[Column], Cells]:
    """The Name column, then the CRD's own (a `date` one shows an age)."""
    columns: list[Column] = [_NAME] + [
        (str(c.get("name", "")), str(c.get("type", "string")), str(c.get("format", "")), int(c.get("priority") or 0))
        for c in printer_columns
    ]

    def cells(obj: dict[str, Any], now: datetime) -> list[Any]:
        return [meta(obj).get("name", "")] + [printcolumns.cell(c, obj, now, since) for c in printer_columns]

    return columns, cells


def column_definitions(columns: list[Column]) -> list[dict[str, Any]]:
    return [
        {"name": name, "type": kind, "format": fmt, "description": _DESCRIPTIONS.get(name, name), "priority": priority}
        for name, kind, fmt, priority in columns
    ]


def _row_object(obj: dict[str, Any], include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta(obj)}


def table(
    group: str, kind: str, objects: list[dict[str, Any]], now: datetime, list_meta: dict[str, Any],
    include_object: str = "Metadata", api_version: str = "meta.k8s.io/v1",
    printer_columns: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """A Table of `objects` of one kind, with kube-apiserver's columns for it (a custom resource's: its CRD's
    additionalPrinterColumns, when it has them)."""
    if include_object not in ("None", "Metadata", "Object"):
        raise ApiError(400, "BadRequest", f'includeObject: Unsupported value: "{include_object}": supported '
                       'values: "Metadata", "None", "Object"')
    if printer_columns:
        columns, cells = _custom_columns(printer_columns)
    else:
        columns, cells = PRINTERS.get((group, kind), ([_NAME, _AGE], _default_cells))
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": cells(obj, now)}
        row_object = _row_object(obj, include_object)
        if row_object is not None:
            row["object"] = row_object
        rows.append(row)
    return {"kind": "Table", "apiVersion": api_version, "metadata": list_meta,
            "columnDefinitions": column_definitions(columns), "rows": rows}
