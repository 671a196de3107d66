"""`nodescale status`: the cluster as nodescale sees it, for a person or a machine.

    nodescale status [-o json|text]

Nodes by NodePool, capacity type and zone with utilization and price per hour; pending pods and why
each waits; drains under way; NodePool usage against limits and the cluster-wide limits; every NodePool's
and node class's status as Karpenter writes it (SSM pools too, #30.2). Reads the
environment from the settings (KUBECONFIG, AWS_ENDPOINT_URL, CLUSTER_NAME... as `sim/`'s DIR/env
exports them). Exit 0 when it read the cluster, 2 for unusable settings, 1 when the cluster or AWS
cannot be reached.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ..model.currency import USD, money, per_hour_header
from ..settings import SettingsError
from .common import (
    EXIT_BAD_INPUT,
    EXIT_UNREACHABLE,
    add_output_option,
    fail,
    quiet_metrics,
    streams,
    write_result,
)

# Longer lists are cut in text output (json has every row).
MAX_ROWS = 50


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "status",
        help="nodes, utilization, price, pending pods, drains and limits of the cluster",
        description="Show the cluster as nodescale sees it: nodes by NodePool, capacity type and zone with their "
        "utilization and price per hour, pending pods and why they wait, drains under way, and usage "
        "against NodePool and cluster-wide limits.",
    )
    add_output_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = streams(out, err)

    def read() -> Any:
        from ..runtime import Runtime
        from ..usecases.status import read_status

        return read_status(Runtime.from_settings()).to_dict()

    data, code = guarded("status", read, err)
    if data is None:
        return code
    write_result(out, data, args.output, to_text)
    return 0


def guarded(
    command: str, action: Callable[[], Any], err: TextIO, user_errors: tuple[type[Exception], ...] = ()
) -> tuple[Any, int]:
    """Run ``action`` and turn what an operator can fix into one line and an exit code: 2 for bad
    settings or input (``user_errors``), 1 when the cluster or AWS cannot be reached."""
    quiet_metrics()
    from botocore.exceptions import BotoCoreError, ClientError
    from kubernetes.client.exceptions import ApiException

    from ..clock import ClockError
    from ..k8s.client import KubeConfigError

    try:
        return action(), 0
    except (SettingsError, KubeConfigError, *user_errors) as exc:
        return None, fail(command, err, exc, EXIT_BAD_INPUT)
    except ApiException as exc:
        return None, fail(command, err, f"the API server answered {exc.status} {exc.reason}", EXIT_UNREACHABLE)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return None, fail(command, err, f"AWS answered {error.get('Code')}: {error.get('Message')}", EXIT_UNREACHABLE)
    except (OSError, BotoCoreError, ClockError) as exc:
        return None, fail(command, err, f"cannot reach the cluster or AWS: {exc}", EXIT_UNREACHABLE)


# ---------------------------------------------------------------------------------------------------- text


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Columns aligned for a terminal; columns whose index is in ``right`` are right-aligned."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def percent(usage: dict[str, Any]) -> str:
    value = usage.get("utilization")
    return "-" if value is None else f"{value * 100:.0f}%"


def _cpu(usage: dict[str, Any]) -> str:
    return f"{percent(usage)} ({usage['requested']:g}/{usage['allocatable']:g})"


def _memory(usage: dict[str, Any]) -> str:
    gib = 2**30
    return f"{percent(usage)} ({usage['requested'] / gib:.0f}/{usage['allocatable'] / gib:.0f}Gi)"


def _cut(rows: list[list[str]], lines: list[str], what: str) -> list[list[str]]:
    if len(rows) > MAX_ROWS:
        lines.append(f"(first {MAX_ROWS} of {len(rows)} {what}; -o json lists all)")
        return rows[:MAX_ROWS]
    return rows


def node_key(n: dict[str, Any]) -> tuple:
    """What makes two nodes the same for a person: pool, type, capacity type, zone, state, pods, use and price."""
    return (n["nodePool"], n["instanceType"], n["capacityType"], n["zone"], n["state"], n["pods"],
            percent(n["cpu"]), percent(n["memory"]), round(n["pricePerHour"], 4))


def group_nodes(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Identical nodes (see :func:`node_key`) together, in the order each first appears."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for n in nodes:
        groups.setdefault(node_key(n), []).append(n)
    return list(groups.values())


def _node_rows(data: dict[str, Any], lines: list[str], currency: str) -> list[str]:
    rows = []
    for same in group_nodes(data["nodes"]):
        n = same[0]
        name = n["name"] if len(same) == 1 else f"{n['name']} +{len(same) - 1}"
        rows.append([name, f"x{len(same)}", n["nodePool"] or "-", n["instanceType"] or "-", n["capacityType"] or "-",
                     n["zone"] or "-", n["state"], str(n["pods"]), percent(n["cpu"]), percent(n["memory"]),
                     f"{n['pricePerHour']:.4f}"])
    rows = _cut(rows, lines, "nodes" if len(rows) == len(data["nodes"]) else "rows of nodes")
    return table(["NAME", "COUNT", "NODEPOOL", "TYPE", "CAPACITY", "ZONE", "STATE", "PODS", "CPU", "MEMORY",
                  per_hour_header(currency) + " EACH"], rows, right=(1, 7, 8, 9, 10))


def to_text(data: dict[str, Any]) -> str:
    """The status for a person; identical nodes share a row with their count (``x29``)."""
    t = data["totals"]
    currency = data.get("currency") or USD
    lines = [
        f"Cluster {data['cluster']} at {data['time']}: {_plural(t['nodes'], 'node')}"
        + (f" (+{t['launching']} launching)" if t["launching"] else "")
        + f", {money(t['pricePerHour'], currency)}/hour{'' if currency == USD else ' (' + currency + ')'}, "
        f"cpu {_cpu(t['cpu'])}, memory {_memory(t['memory'])}, "
        f"{_plural(t['pendingPods'], 'pending pod')}, {_plural(t['drains'], 'drain')}",
        "",
    ]
    if data["groups"]:
        lines.append("Nodes by NodePool, capacity type and zone:")
        rows = [[g["nodePool"] or "-", g["capacityType"] or "-", g["zone"] or "-", str(g["nodes"]), _cpu(g["cpu"]),
                 _memory(g["memory"]), f"{g['pricePerHour']:.4f}"] for g in data["groups"]]
        lines += table(["NODEPOOL", "CAPACITY", "ZONE", "NODES", "CPU", "MEMORY", per_hour_header(currency)], rows,
                       right=(3, 6))
        lines.append("")
    if data["nodes"]:
        lines.append("Nodes:")
        lines += _node_rows(data, lines, currency)
        lines.append("")
    lines += _rest_text(data, currency)
    return "\n".join(lines).rstrip("\n") + "\n"


def _rest_text(data: dict[str, Any], currency: str) -> list[str]:
    lines: list[str] = []
    for failure in data.get("launchFailing") or []:
        lines.append(f"NodePool {failure['nodePool']}: launch failing: {failure['code']}: {failure['message']} "
                     f"(since {failure['since']})")
    if data.get("launchFailing"):
        lines.append("")
    if data.get("zonalShifts"):
        lines.append("Zones under an ARC zonal shift (no launches there):")
        rows = [[z["zone"] or "-", z["zoneId"], ", ".join(z["kinds"]), z["until"]] for z in data["zonalShifts"]]
        lines += table(["ZONE", "ZONE ID", "SHIFT", "AT THE LATEST UNTIL"], rows)
        lines.append("")
    if data["pending"]:
        lines.append("Pending pods:")
        counts = Counter(p["verdict"] for p in data["pending"])
        lines.append("  " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())))
        rows = _cut([[p["pod"], p["verdict"], p["message"]] for p in data["pending"]], lines,
                    "pending pods")
        lines += table(["POD", "VERDICT", "WHY"], rows)
        lines.append("")
    if data["drains"]:
        lines.append("Drains under way:")
        rows = [[d["node"], d["nodePool"] or "-", d["since"] or "-", str(d["podsRemaining"]), d["reason"] or "-"]
                for d in data["drains"]]
        lines += table(["NODE", "NODEPOOL", "SINCE", "PODS LEFT", "REASON"], rows, right=(3,))
        lines.append("")
    if data["limits"]:
        lines.append("Limits:")
        rows = [[x["scope"], x["resource"], x["shown"], _share(x)] for x in data["limits"]]
        lines += table(["SCOPE", "RESOURCE", "USED", "SHARE"], rows, right=(3,))
        lines.append("")
    lines += _pools_text(data.get("nodePools") or [], data.get("nodeClasses") or [])
    for text in data["configErrors"]:
        lines.append(f"Configuration error: {text}")
    return lines


def _pools_text(pools: list[dict[str, Any]], classes: list[dict[str, Any]]) -> list[str]:
    """NodePools and node classes with the status Karpenter would write: one row each, then every condition
    that is not True with its reason and message (-o json has the whole status)."""
    lines: list[str] = []
    if pools:
        lines.append("NodePool status:")
        rows = [[_who(p), p["source"] or "-", str((p["status"].get("resources") or {}).get("nodes", "0")),
                 (p["status"].get("resources") or {}).get("cpu", "0"),
                 (p["status"].get("resources") or {}).get("memory", "0"), _ready(p)] for p in pools]
        lines += table(["NODEPOOL", "SOURCE", "NODES", "CPU", "MEMORY", "READY"], rows, right=(2, 3, 4))
        lines += _failing(pools)
        lines.append("")
    if classes:
        lines.append("Node class status:")
        rows = [[_who(c), c["source"] or "-", _ids(c["status"].get("subnets")),
                 _ids(c["status"].get("securityGroups")), _ids(c["status"].get("amis")),
                 c["status"].get("instanceProfile") or "-", _ready(c)] for c in classes]
        lines += table(["NODECLASS", "SOURCE", "SUBNETS", "SECURITY GROUPS", "AMIS", "INSTANCE PROFILE", "READY"],
                       rows)
        lines += _failing(classes)
        lines.append("")
    return lines


def _who(entry: dict[str, Any]) -> str:
    return f"{entry['kind'].lower()}/{entry['name'] or '?'}"


def _ids(found: list[dict[str, Any]] | None) -> str:
    return ",".join(x["id"] for x in found) if found else "-"


def _ready(entry: dict[str, Any]) -> str:
    return next((c["status"] for c in entry["status"].get("conditions") or [] if c["type"] == "Ready"), "Unknown")


def _failing(entries: list[dict[str, Any]]) -> list[str]:
    return [f"  {_who(e)}: {c['type']} {c['status']} ({c.get('reason') or '-'}): {c.get('message') or '-'}"
            for e in entries for c in e["status"].get("conditions") or []
            if c["status"] != "True" and c["type"] != "Ready"]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _share(limit: dict[str, Any]) -> str:
    return f"{limit['used'] / limit['limit'] * 100:.0f}%" if limit["limit"] else ("-" if not limit["used"] else "over")
