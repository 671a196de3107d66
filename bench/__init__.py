"""Benchmarks: `python -m bench` (or `make bench`) runs every one and prints its figures; each module also
runs alone (`python -m bench.<name>`) and prints the same lines."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def print_lines(run: Callable[[], Iterable[str]]) -> None:
    """Print a benchmark's lines as they come (a long run shows progress, not one block at the end)."""
    for line in run():
        print(line, flush=True)
