"""What the `nodescale` subcommands share: output and lease options, printing a result, reporting failures."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from .. import names
from ..settings import CLUSTER_NAME, TABLE_NAME, Settings, SettingsError

if TYPE_CHECKING:
    from ..runtime import Runtime

EXIT_UNREACHABLE = 1
EXIT_BAD_INPUT = 2


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text", help="output format")


def streams(out: TextIO | None, err: TextIO | None) -> tuple[TextIO, TextIO]:
    """The command's output and error streams: the given ones, else the process's."""
    return out or sys.stdout, err or sys.stderr


def write_result(
    out: TextIO, result: Any, output: str, to_text: Callable[[Any], str], to_json: Callable[[Any], Any] | None = None
) -> None:
    """`result` as indented JSON (`output` "json", through `to_json` if given) or as `to_text` renders it."""
    if output == "json":
        json.dump(result if to_json is None else to_json(result), out, indent=2, default=str)
        out.write("\n")
    else:
        out.write(to_text(result))


def fail(command: str, err: TextIO, problem: object, code: int = EXIT_BAD_INPUT) -> int:
    """Report `problem` on one line naming the command; returns the exit code."""
    print(f"nodescale {command}: {problem}", file=err)
    return code


def quiet_metrics() -> None:
    """Keep metric (EMF) and log lines out of the command's output (stdout); call before the use-case runs."""
    from .. import telemetry

    telemetry.for_command_line()


def add_lease_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-lease", action="store_true",
        help=f"run without the launch lease shared with the functions (in the stack's DynamoDB table: "
        f"{TABLE_NAME}, else the stack's name for {CLUSTER_NAME}); only passes within this process are kept apart",
    )


def runtime_from_settings(
    command: str, err: TextIO, *, mutating: bool = False, no_lease: bool = False
) -> Runtime | None:
    """The Runtime for this process's settings, or None once unusable settings (or, for a command that
    launches or terminates, a lease table that does not answer) were reported."""
    from ..runtime import Runtime

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        fail(command, err, exc)
        return None
    if mutating:
        leased = lease_settings(command, settings, no_lease, err)
        if leased is None:
            return None
        settings = leased
    return Runtime.from_settings(settings)


def lease_settings(command: str, settings: Settings, no_lease: bool, err: TextIO,
                   dynamodb: Any | None = None) -> Settings | None:
    """The settings a command that changes the cluster runs with: the stack's table (NODESCALE_TABLE, else the
    name the stack gives it for CLUSTER_NAME), checked to answer, so that this command and the functions take
    turns on one launch lease and never launch twice for the same pods. None once a refusal was reported.
    With ``no_lease`` no table is used at all, and stderr says so."""
    if no_lease:
        print(f"nodescale {command}: --no-lease: running without the lease shared with the functions; only "
              "passes in this process are kept apart, so one running elsewhere now may launch for the same pods",
              file=err)
        return dataclasses.replace(settings, table_name=None)
    from botocore.exceptions import BotoCoreError, ClientError

    from ..aws import clients, leases

    table = settings.table_name or names.table_name(settings.cluster_name)
    source = (f"{TABLE_NAME}={table}" if settings.table_name else
              f"{table}, the stack's table for {CLUSTER_NAME}={settings.cluster_name} ({TABLE_NAME} is not set)")
    try:
        leases.check_table(dynamodb or clients.client("dynamodb", settings.region), table)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "an error")
        why = ("does not exist" if code == "ResourceNotFoundException"
               else f"answered {code}: {error.get('Message', '')}")
        return _refuse(command, err, source, why)
    except BotoCoreError as exc:
        return _refuse(command, err, source, f"cannot be reached ({exc})")
    return dataclasses.replace(settings, table_name=table)


def _refuse(command: str, err: TextIO, source: str, why: str) -> None:
    fail(command, err, f"no lease table: DynamoDB table {source} {why.rstrip(': ')}; set {TABLE_NAME} to the "
                       "stack's table, or pass --no-lease to run without the lease the functions share")
    return None
