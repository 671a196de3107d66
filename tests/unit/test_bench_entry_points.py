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
