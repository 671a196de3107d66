"""The `nodescale` console command: a small dispatcher, each subcommand in its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from . import telemetry
from .commands import disrupt, explain, plan, provision, replay, scale, status

# Each module registers its own parser and returns an exit code from run(args).
COMMANDS: tuple[ModuleType, ...] = (plan, provision, replay, disrupt, status, explain, scale)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nodescale", description="Karpenter-style node autoscaling for EKS.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Before any command runs: stdout is the command's output alone (no metric lines, logs on stderr).
    telemetry.for_command_line()
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug must still read as one line, never a traceback
        print(f"nodescale {args.command}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
