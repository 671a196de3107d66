"""Run every benchmark and print its figures: `python -m bench` (what `make bench` runs)."""

from __future__ import annotations

import sys
from types import ModuleType

from . import (
    apiload,
    bound,
    coldstart,
    convergence,
    cost,
    disruption,
    interruption,
    print_lines,
    provisioner,
    scale,
    scheduling,
    soak,
)

# Each benchmark module has run() yielding the lines it prints.
BENCHMARKS: tuple[ModuleType, ...] = (
    scheduling, bound, convergence, provisioner, disruption, interruption, scale, apiload, coldstart, soak, cost,
)


def main() -> int:
    for module in BENCHMARKS:
        print_lines(module.run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
