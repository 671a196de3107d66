"""What the `nodescale` subcommands share: the output option, printing a result, and reporting failures."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..settings import SettingsError

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
    """Keep Powertools' metric (EMF) lines out of the command's own output; call before importing the use-case."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


def runtime_from_settings(command: str, err: TextIO) -> Runtime | None:
    """The Runtime for this process's settings, or None once unusable settings were reported."""
    from ..runtime import Runtime

    try:
        return Runtime.from_settings()
    except SettingsError as exc:
        fail(command, err, exc)
        return None
