"""Run every benchmark and print its figures: `python -m bench` (what `make bench` runs)."""

from __future__ import annotations

import sys
from types import ModuleType

from . import coldstart, disruption, interruption, provisioner, scale, scheduling, soak

# Each benchmark module has run() yielding the lines it prints.
BENCHMARKS: tuple[ModuleType, ...] = (scheduling, provisioner, disruption, interruption, scale, coldstart, soak)


def main() -> int:
    for module in BENCHMARKS:
        for line in module.run():
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
