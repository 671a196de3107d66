"""Records, or checks, every plan the test suite asks the core for (#29, "plans stay identical").

Off unless an environment variable turns it on:

- ``NODESCALE_PLAN_RECORD=<path>``: every call of ``scheduling.solve`` and ``disruption.planner.plan`` made in
  this pytest process (a test, its fixtures, the use-cases and the in-process sim/ handlers they run) appends
  ``{"test", "kind", "in", "out"}`` to ``<path>`` as a JSON line at the end of the session (each xdist worker
  appends its own lines under a lock). Calls made in child processes are not seen.
- ``NODESCALE_PLAN_CHECK=<path>``: a recording (``.jsonl`` or ``.jsonl.gz``, input digest -> output digest);
  a call whose input digest is recorded must give the recorded output digest, else its test fails, naming the
  call's kind and both digests. ``NODESCALE_PLAN_STATS=<path>`` (optional) gets one JSON line per process:
  calls, hits, mismatches.

scripts/plan_identity.py runs both; tests/plan_digest.py says what a digest covers.
"""

from __future__ import annotations

import fcntl
import functools
import gzip
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import plan_digest

RECORD, CHECK, STATS = "NODESCALE_PLAN_RECORD", "NODESCALE_PLAN_CHECK", "NODESCALE_PLAN_STATS"


def load(path: str | Path) -> dict[str, str]:
    """A recording as input digest -> output digest; an input recorded with two outputs is left out."""
    opener = gzip.open if str(path).endswith(".gz") else open
    out: dict[str, str] = {}
    ambiguous: set[str] = set()
    with opener(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            if out.setdefault(row["in"], row["out"]) != row["out"]:
                ambiguous.add(row["in"])
    for key in ambiguous:
        del out[key]
    return out


class Recorder:
    """Wraps the core's two planners; what each call gave goes to the recording or is held to it."""

    def __init__(self, recorded: dict[str, str] | None) -> None:
        self.recorded = recorded  # None: record mode
        self.test = "<outside a test>"
        self.rows: list[dict[str, str]] = []
        self.calls = self.hits = 0
        self.mismatches: dict[str, list[str]] = {}

    def wrap(self, kind: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            self.seen(kind, plan_digest.bound_arguments(fn, args, kwargs), result)
            return result

        recorded.__wrapped_planner__ = fn  # type: ignore[attr-defined]
        return recorded

    def seen(self, kind: str, arguments: dict[str, Any], result: Any) -> None:
        digest_in, digest_out, _ = plan_digest.digests(kind, arguments, result)
        self.calls += 1
        if self.recorded is None:
            self.rows.append({"test": self.test, "kind": kind, "in": digest_in, "out": digest_out})
            return
        expected = self.recorded.get(digest_in)
        if expected is None:
            return
        self.hits += 1
        if expected != digest_out:
            self.mismatches.setdefault(self.test, []).append(
                f"{kind} input {digest_in[:16]}: recorded output {expected[:16]}, now {digest_out[:16]} "
                f"({plan_digest.summary(kind, result)})")


_RECORDER: Recorder | None = None


def _install(recorder: Recorder) -> None:
    """Puts the wrappers wherever the originals are bound: the defining modules, their packages, and every
    module already imported that took them by name (``from ..scheduling.scheduler import solve``)."""
    from nodescale.disruption import planner
    from nodescale.scheduling import scheduler

    originals = {scheduler.solve: recorder.wrap("solve", scheduler.solve),
                 planner.plan: recorder.wrap("plan", planner.plan)}
    scheduler.solve = originals[scheduler.solve]
    for module in list(sys.modules.values()):
        for name in ("solve", "plan"):
            value = getattr(module, name, None) if module is not None else None
            if callable(value) and value in originals:
                setattr(module, name, originals[value])


def pytest_configure(config: pytest.Config) -> None:
    global _RECORDER
    if os.environ.get(RECORD):
        _RECORDER = Recorder(None)
    elif os.environ.get(CHECK):
        _RECORDER = Recorder(load(os.environ[CHECK]))
    if _RECORDER is not None:
        _install(_RECORDER)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    if _RECORDER is not None:
        _RECORDER.test = item.nodeid
        plan_digest.forget()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if _RECORDER is not None and call.when == "teardown" and item.nodeid in _RECORDER.mismatches:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: a plan changed (NODESCALE_PLAN_CHECK):\n  " + "\n  ".join(
            _RECORDER.mismatches[item.nodeid])
    return report


def _append(path: str, lines: list[str]) -> None:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("".join(lines))
        fcntl.flock(f, fcntl.LOCK_UN)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _RECORDER is None:
        return
    if _RECORDER.recorded is None:
        _append(os.environ[RECORD], [json.dumps(r, sort_keys=True) + "\n" for r in _RECORDER.rows])
    elif os.environ.get(STATS):
        stats = {"calls": _RECORDER.calls, "hits": _RECORDER.hits, "mismatches": _RECORDER.mismatches}
        _append(os.environ[STATS], [json.dumps(stats, sort_keys=True) + "\n"])
