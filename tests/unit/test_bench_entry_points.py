"""Every benchmark module docs/figures.md names prints its figures when run alone (`python -m bench.<name>`),
as `python -m bench` prints them all."""

from __future__ import annotations

import runpy

import pytest

import bench
from bench.__main__ import BENCHMARKS


@pytest.mark.parametrize("module", [m.__name__ for m in BENCHMARKS])
def test_each_benchmark_prints_its_lines_when_run_alone(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    printed: list[str] = []
    # The benchmark itself is not run here (some take minutes): run() is what __main__ hands to the printer.
    monkeypatch.setattr(bench, "print_lines", lambda run: printed.append(run.__module__))
    monkeypatch.setattr("sys.argv", [module])  # as `python -m module` sees it, not pytest's own arguments
    runpy.run_module(module, run_name="__main__", alter_sys=False)
    assert printed == ["__main__"], f"python -m {module} prints nothing"


def test_the_scale_run_reads_the_stacks_sizes_without_starting_the_cdk() -> None:
    """`python -m bench.scalerun` takes the functions' timeouts and memory from the stack's own definitions
    without importing aws_cdk: before, that import started jsii's Node.js from the PATH (the system's, not the
    pinned one in node_modules/) and its end-of-life banner landed in the run's output."""
    import subprocess
    import sys

    code = ("import sys; from bench.scalerun import function_limits; "
            "t, m = function_limits(timeout='interruption=300'); "
            "print(t['interruption'], m['provisioner'], 'aws_cdk' in sys.modules, 'jsii' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["300", "1024", "False", "False"], done.stdout + done.stderr
