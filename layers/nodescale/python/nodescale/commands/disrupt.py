"""`nodescale disrupt`: run the disruption function from a shell against the environment in the settings.

    nodescale disrupt --once [--dry-run] [--no-lease] [-o json|text]   one run, as the scheduled function makes
    nodescale disrupt [--dry-run] [--no-lease] [-o json|text]          one run a minute until interrupted

``--dry-run`` lists what would be disrupted, why, and the saving per hour, and acts on nothing. Otherwise
replacements are launched under the functions' lease, as `nodescale provision` explains (--no-lease to go
without). Exit 0 when the run completed, 2 for unusable settings or no lease table, 1 when AWS or the API
server could not be reached.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError
from kubernetes.client.exceptions import ApiException

from ..clock import ClockError
from ..model.currency import USD, money
from ..settings import SettingsError
from . import common

COMMAND = "disrupt"
INTERVAL_SECONDS = 60.0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        COMMAND,
        help="expire, repair, replace drifted and consolidate nodes, as the disruption function does",
        description="Finish drains under way, clean up leaked instances and nodes, and make the disruption "
        "decisions (repair, expiry, drift, emptiness, consolidation) with this process's settings.",
    )
    p.add_argument("--once", action="store_true", help="one run, then exit (default: one run a minute)")
    p.add_argument("--dry-run", action="store_true",
                   help="show what would be disrupted, why, and the saving per hour; change nothing")
    common.add_lease_option(p)
    common.add_output_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = common.streams(out, err)
    common.quiet_metrics()
    from ..usecases.disrupt import run as disrupt

    rt = common.runtime_from_settings(COMMAND, err, mutating=not args.dry_run, no_lease=args.no_lease)
    if rt is None:
        return common.EXIT_BAD_INPUT
    while True:
        started = time.monotonic()
        try:
            summary = disrupt.disrupt_once(rt, dry_run=args.dry_run)
        except SettingsError as exc:
            return common.fail(COMMAND, err, exc)
        except (OSError, ApiException, ClientError, BotoCoreError, ClockError) as exc:
            return common.fail(COMMAND, err, f"cannot reach the cluster or AWS: {exc}", common.EXIT_UNREACHABLE)
        common.write_result(out, summary, args.output, to_text)
        out.flush()
        if args.once:
            return 0
        time.sleep(max(0.0, INTERVAL_SECONDS - (time.monotonic() - started)))


def to_text(summary: dict[str, Any]) -> str:
    """One line for each thing the run did or would do, and why; "Nothing to disrupt." only when it did nothing."""
    dry = summary.get("dryRun")
    currency = summary.get("currency") or USD
    lines = _decision_lines(summary, currency)
    lines += _section("Held back:", [f"  {', '.join(r['nodes'])}: {r['why']}" for r in summary.get("refused") or []])
    lines += _section("Terminations:" if not dry else "Terminations under way:", [
        f"  {t['node']}: {t['state']}" + (f" ({why})" if (why := t.get('reason') or t.get('disruptionReason')) else "")
        for t in summary.get("terminations") or []
    ] + [f"  {w['node']}: waiting for replacement {', '.join(w['replacements'])}"
         for w in summary.get("waitingForReplacement") or []])
    lines += _section("Emptiness clocks started:", [empty_line(e) for e in summary.get("emptySince") or []])
    cleanup = summary.get("cleanup") or {}
    verb = "would remove" if dry else "removed"
    for key, label in (("unregisteredInstances", "unregistered instances"), ("orphanedNodes", "nodes without instance"),
                       ("launchTemplates", "unused launch templates")):
        if cleanup.get(key):
            lines.append(f"Clean-up {verb} {label}: {', '.join(cleanup[key])}")
    if not lines:
        lines.append("Nothing to disrupt.")
    for note in summary.get("notes") or []:
        lines.append(f"Note: {note}")
    for error in summary.get("errors") or []:
        lines.append(f"Error: {error}")
    if summary.get("decisions"):
        saved = summary.get("pricePerHourSaved") or 0.0
        lines.append(f"{'Would save' if dry else 'Saving'} {money(saved, currency)}/h in total")
    return "\n".join(lines) + "\n"


def _decision_lines(summary: dict[str, Any], currency: str) -> list[str]:
    lines: list[str] = []
    for d in summary.get("decisions") or []:
        saving = f", saves {money(d['savingPerHour'], currency)}/h" if d.get("savingPerHour") else ""
        why = f"{d['reason']}: {d['drift']}" if d.get("drift") else d["reason"]  # the field that drifted, if any
        lines.append(f"  {', '.join(d['nodes'])}: {d['action']} ({why}{saving}): {d['detail']}")
        if d.get("error"):
            lines.append(f"    {d['error']}")
    return _section("Would disrupt:" if summary.get("dryRun") else "Disrupted:", lines)


def _section(title: str, lines: list[str]) -> list[str]:
    return [title, *lines] if lines else []


def empty_line(entry: dict[str, Any]) -> str:
    """``node X empty since T; removed after ttlSecondsAfterEmpty 30s at T+30``."""
    head = f"  node {entry['node']} empty since {entry['since']}"
    after = entry.get("afterSeconds")
    if after is None:
        return f"{head}; not removed for being empty ({entry['setting']}: Never)"
    return f"{head}; removed after {entry['setting']} {after:g}s at {entry.get('removeAt')} if it stays empty"
