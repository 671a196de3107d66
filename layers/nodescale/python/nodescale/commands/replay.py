"""`nodescale replay`: feed recorded EventBridge events to the interruption function's code path.

    nodescale replay FILE [FILE ...] [-o json|text] [--account ID] [--seconds N] [--no-lease]

Each FILE holds one event (a JSON object) or a list of events. They run in order against the
environment in the process's settings (CLUSTER_NAME, AWS_REGION, KUBECONFIG, AWS_ENDPOINT_URL,
NODESCALE_TABLE... e.g. `sim/`'s env file), exactly as the Lambda runs them, idempotency record
included, and replacements launched under the functions' lease in the stack's table (NODESCALE_TABLE, else
the stack's name for CLUSTER_NAME; without a table that answers it refuses, unless --no-lease). The account
an event must name is `--account`, else the caller's own (STS); events for
another account or region are ignored as the Lambda ignores them.

Exit 0 when every event was handled or ignored with a reason, 2 for unreadable input or settings or no lease
table, 1 when handling an event failed (the Lambda would have been retried).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from ..aws import clients
from ..model.currency import USD, currency_of, money
from ..runtime import Runtime
from ..settings import Settings, SettingsError
from ..usecases.interrupt import entry
from ..usecases.interrupt import handle as interrupt
from . import common


class ReplayInputError(Exception):
    """A file that cannot be replayed; the message names it and says why."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replay",
        help="feed recorded EventBridge events to the interruption handler (against the configured environment)",
        description="Run recorded interruption events (spot warnings, rebalance, state changes, AWS Health) "
        "through the interruption function's code path and print what it did.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="a JSON file holding one event or a list of events")
    common.add_output_option(p)
    p.add_argument("--account", help="the account events must be for (default: the caller's, from STS)")
    p.add_argument("--seconds", type=float, default=interrupt.DEFAULT_DRAIN_SECONDS,
                   help="how long each event may keep draining (default %(default)s)")
    common.add_lease_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = common.streams(out, err)
    common.quiet_metrics()
    try:
        recorded = list(read_events(args.files))
        settings = Settings.from_env()
    except (ReplayInputError, SettingsError) as exc:
        return common.fail("replay", err, exc)
    leased = common.lease_settings("replay", settings, args.no_lease, err)
    if leased is None:
        return common.EXIT_BAD_INPUT
    settings = leased
    account = args.account or caller_account(settings.region)
    holder: list[Runtime] = []

    def runtime() -> Runtime:
        if not holder:
            holder.append(Runtime.from_settings(settings))
        return holder[0]

    summaries: list[dict[str, Any]] = []
    currency = currency_of(settings.region)  # of the replacements' prices
    status = 0
    for source, event in recorded:
        try:
            summary = entry.process(
                event, settings, runtime, account=account, deadline_monotonic=time.monotonic() + args.seconds
            ).to_json()
        except Exception as exc:  # noqa: BLE001 - reported per event; the Lambda would retry it
            summary = {"source": source, "error": f"{type(exc).__name__}: {exc}"}
            status = 1
        summaries.append({"source": source, **summary, "currency": currency})
    common.write_result(out, summaries, args.output, to_text)
    return status


def read_events(paths: Iterable[str]) -> Iterable[tuple[str, Any]]:
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ReplayInputError(f"{path}: cannot read the file ({exc})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReplayInputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        if isinstance(data, list):
            for n, event in enumerate(data):
                yield f"{path}[{n}]", event
        else:
            yield path, data


def caller_account(region: str) -> str | None:
    """The account of the credentials in use, or None (no account check) when STS cannot say."""
    try:
        return str(clients.client("sts", region).get_caller_identity()["Account"])
    except (ClientError, BotoCoreError, KeyError):
        return None


def to_text(summaries: list[dict[str, Any]]) -> str:
    """One line per event (a repeated event id says it is a duplicate and that nothing was done again), then
    one line per instance it named: what was done and why."""
    lines = []
    for s in summaries:
        head = f"{s['source']}: {s.get('detailType') or '?'} ({s.get('eventId') or 'no id'})"
        if s.get("error"):
            lines.append(f"{head}: FAILED {s['error']}")
        elif s.get("ignored"):
            lines.append(f"{head}: ignored: {s['ignored']}")
        elif s.get("duplicate"):
            lines.append(f"{head}: duplicate of event {s.get('eventId')} handled at {s.get('handledAt') or 'an earlier run'}"
                         ": nothing done again")
        elif s.get("zonalShift"):
            lines.append(f"{head}: {zonal_shift_line(s['zonalShift'])}")
        else:
            instances = s.get("instances") or []
            lines.append(f"{head}: {len(instances)} instance(s)" if instances else f"{head}: no instance named")
            lines += [instance_line(inst, s.get("currency") or USD) for inst in instances]
    return "\n".join(lines) + "\n"


def zonal_shift_line(shift: dict[str, Any]) -> str:
    """``zone us-east-1c (use1-az2): no launches there (autoshift) until ...`` or ``... takes launches again``."""
    zone = f"zone {shift.get('zone') or '?'} ({shift['zoneId']})"
    if not shift.get("recorded"):
        return f"{zone}: a newer {shift['kind']} event is recorded already; nothing changed"
    if shift.get("shiftedAway"):
        return f"{zone}: no launches there ({shift['kind']}) until it ends, at the latest {shift.get('until')}"
    return f"{zone}: {shift['kind']} ended; the zone takes launches again unless another shift holds it"


def instance_line(inst: dict[str, Any], currency: str = USD) -> str:
    """``  i-0abc node=ip-10-0-1-2 drained (spot interruption) replacement=m5.large/i-0def ($0.0960/h)``."""
    line = f"  {inst['instanceId']} node={inst.get('node') or '-'} {inst['action']}"
    if inst.get("reason"):
        line += f" ({inst['reason']})"
    replacement = inst.get("replacement") or {}
    launched = replacement.get("launched") or []
    if launched:
        line += " replacement=" + ",".join(
            f"{x['instanceType']}/{x['instanceId']}" + (f" ({money(x['price'], currency)}/h)" if "price" in x else "")
            for x in launched)
    elif replacement.get("waitingOnInFlight"):
        line += " replacement=in-flight:" + ",".join(replacement["waitingOnInFlight"])
    elif replacement.get("reason"):
        line += f" no replacement: {replacement['reason']}"
    if "podsEvicted" in inst:
        line += f" evicted={inst['podsEvicted']} blocked={len(inst.get('podsBlockedByPdb') or [])}"
    return line
