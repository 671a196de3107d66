"""`python -m sim.chaos [--seconds N] [--seed S]`: one chaos run on a fresh sim/ environment, its figures."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from sim.environment import Environment

from .scenario import ChaosConfig, ChaosRun, product_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45.0, help="wall seconds under faults (default 45)")
    parser.add_argument("--seed", type=int, default=7, help="seed of every random choice (default 7)")
    parser.add_argument("--inflate", type=int, default=20, help="inflate replicas at the peak (default 20)")
    parser.add_argument("--dir", help="sim/ state directory (default: a temporary one)")
    args = parser.parse_args(argv)
    config = ChaosConfig(seconds=args.seconds, seed=args.seed, inflate_peak=args.inflate)
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="nodescale-chaos-"))
    with Environment(directory, ready_delay=1.0) as env, product_environment(env):
        report = ChaosRun(env, config).run()
    for line in report.lines():
        print(line, flush=True)
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
