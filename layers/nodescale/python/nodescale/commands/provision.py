"""`nodescale provision`: run the provisioner from a shell against the environment in the settings.

    nodescale provision --once [--dry-run] [--no-lease] [-o json|text]     one pass (what the poll mode does)
    nodescale provision [--dry-run] [--no-lease] [-o json|text]            watch for NODESCALE_WATCH_SECONDS

A launch takes the functions' lease in the stack's table (NODESCALE_TABLE, else the stack's name for
CLUSTER_NAME), so this command and the provisioner never launch twice for the same pods; without a table
that answers it refuses, unless --no-lease. Exit 0 when the pass ran (unschedulable pods included), 3 when a
NodePool's launch failed for a reason other than capacity (each named on stderr: code and message, e.g.
AccessDenied on iam:PassRole), 2 for unusable settings or no lease table, 1 when AWS or the API server could
not be reached.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from ..model.currency import USD, currency_of, money
from ..settings import SettingsError
from . import common

COMMAND = "provision"
EXIT_LAUNCH_FAILING = 3  # the pass ran, and a launch failed in a way the next pass will repeat


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        COMMAND,
        help="launch capacity for pending pods, as the provisioner function does",
        description="Find pods the default scheduler cannot place and launch EC2 capacity for them, with the "
        "settings of this process's environment (a real cluster and AWS, or sim/).",
    )
    p.add_argument("--once", action="store_true", help="one pass over the pending pods, then exit")
    p.add_argument("--dry-run", action="store_true", help="show what would be launched and why; launch nothing")
    common.add_lease_option(p)
    common.add_output_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = common.streams(out, err)
    common.quiet_metrics()
    from ..usecases.provision import provisioner as provision

    rt = common.runtime_from_settings(COMMAND, err, mutating=not args.dry_run, no_lease=args.no_lease)
    if rt is None:
        return common.EXIT_BAD_INPUT
    try:
        if args.once:
            summary = provision.provision_once(rt, dry_run=args.dry_run)
        else:
            deadline = time.monotonic() + rt.settings.watch_seconds
            summary = provision.provision_watch(rt, deadline, dry_run=args.dry_run)
    except SettingsError as exc:
        return common.fail(COMMAND, err, exc)
    except OSError as exc:
        return common.fail(COMMAND, err, f"cannot reach the cluster or AWS: {exc}", common.EXIT_UNREACHABLE)
    document = {**summary.to_json(), "currency": currency_of(rt.settings.region)}  # of every price in it
    common.write_result(out, document, args.output, to_text)
    for failure in summary.launch_failing:
        print(f"nodescale {COMMAND}: NodePool {failure.nodepool}: {failure.describe()}", file=err)
    return EXIT_LAUNCH_FAILING if summary.launch_failing else 0


def to_text(summary: dict[str, Any]) -> str:
    lines: list[str] = []
    dry = summary.get("dryRun")
    rows = summary.get("planned" if dry else "launches") or []
    if rows:
        lines.append("Would launch:" if dry else "Launched:")
        for r in rows:
            price = money(r["price"], summary.get("currency") or USD)
            where = f"{r['instanceType']} in {r['zone']} ({r['capacityType']}, {price}/h)"
            ident = "" if dry else f" {r['instanceId']}"
            lines.append(f"  {r['nodePool']}{ident}: {where} for {len(r['pods'])} pods: {_short(r['pods'])}")
    if summary.get("waitingForInFlight"):
        lines.append(f"{summary['waitingForInFlight']} pods wait for capacity already launched")
    for entry in summary.get("limits") or []:
        lines.append(f"Limit ({entry['scope']}, {entry['nodePool']}): {entry['reason']}")
    if summary.get("unschedulable"):
        lines.append("Unschedulable pods:")
        lines += [f"  {u['pod']}: {u['reason']}" for u in summary["unschedulable"]]
    for text in summary.get("configErrors") or []:
        lines.append(f"Configuration error: {text}")
    for failure in summary.get("launchFailing") or []:
        lines.append(f"NodePool {failure['nodePool']}: launch failing: {failure['code']}: {failure['message']}")
    for code, n in sorted((summary.get("errors") or {}).items()):
        lines.append(f"Error {code}: {n}")
    if summary.get("registrationTimeouts"):
        lines.append(f"Terminated, never registered: {', '.join(summary['registrationTimeouts'])}")
    lines.append(
        f"{summary.get('podsSeen', 0)} pending pods seen in {summary.get('batches', 0)} batches, "
        f"{len(rows)} node(s) {'planned' if dry else 'launched'}, {len(summary.get('unschedulable') or [])} "
        f"unschedulable, {summary.get('seconds', 0)} s"
    )
    return "\n".join(lines) + "\n"


def _short(items: list[str], n: int = 3) -> str:
    return ", ".join(items[:n]) + (f" (+{len(items) - n})" if len(items) > n else "")
