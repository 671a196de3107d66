"""The reliability soak: a longer chaos run on a fresh sim/ environment, and its figures.

The same run as the reliability suite in `make test` (tests/integration/test_reliability.py), held
under faults for `SOAK_SECONDS` with more pods: 10% of AWS and Kubernetes calls failing, capacity
errors, spot interruptions (duplicated, out of order), cut-off and overlapping invocations. Prints
calls failed, interruptions handled, pods moved and the violations found (the target is 0).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench import print_lines

SOAK_SECONDS = 240.0
INFLATE_PEAK = 40


def run() -> Iterator[str]:
    from sim.chaos.scenario import ChaosConfig, ChaosRun, product_environment
    from sim.environment import Environment

    yield f"reliability soak: {SOAK_SECONDS:.0f}s under faults, inflate up to {INFLATE_PEAK} pods"
    config = ChaosConfig(seconds=SOAK_SECONDS, settle_seconds=180.0, seed=23, inflate_start=12,
                         inflate_peak=INFLATE_PEAK)
    with tempfile.TemporaryDirectory(prefix="nodescale-soak-") as directory, \
            Environment(Path(directory), ready_delay=1.0) as env, product_environment(env):
        report = ChaosRun(env, config).run()
    yield from report.lines()
    yield f"reliability soak: {'PASS' if not report.violations else 'FAIL'} ({len(report.violations)} violations)"


if __name__ == "__main__":
    print_lines(run)
