"""Warm Lambda containers for the benchmarks: one child process per container, running a function's handler
for each event it is sent, with its own memory, clients and pod cache, as a Lambda container has them.

    with Container("provisioner", settings) as c:
        done = c.invoke(event, timeout_seconds=180)   # Done: seconds, cpu, summary, peak RSS, fan-out

The peak RSS of an invocation is the container process's high-water mark (VmHWM) during it, reset before
it through ``/proc/self/clear_refs`` (Lambda's "Max Memory Used" is the same measure of a container), so
it is that function's own figure: the benchmark's lists and the other functions are in other processes.
The asynchronous self-invocations a handler asks for (the disruption function's slices) are real Lambda
Invoke calls to sim, authorized as lambda:InvokeFunction on the function's ARN; sim queues them
(sim/aws/lambda_service.py) and the caller takes them from there to run them.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ContainerError(RuntimeError):
    """The handler raised in the container: the traceback as the container printed it."""


@dataclass
class Done:
    seconds: float
    cpu_seconds: float  # the container process's CPU during the invocation
    summary: Any
    peak_rss_mib: float
    rss_before_mib: float
    peak_reset_works: bool
    started_at: float = 0.0  # time.time() as the handler was called (after the container's init phase)


class Container:
    """A warm container of ``function``: its settings (a sim/ environment's ``env`` plus overrides) applied
    as the stack applies them, started once and reused for every invocation sent to it."""

    def __init__(self, function: str, settings: Mapping[str, str]) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of the parent's heap
        self.function = function
        self._conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(function, dict(settings), child),
                                       name=f"lambda-{function}", daemon=True)
        self.process.start()
        child.close()

    def invoke(self, event: dict[str, Any], timeout_seconds: float) -> Done:
        self._conn.send((event, timeout_seconds))
        ok, payload = self._conn.recv()
        if not ok:
            raise ContainerError(f"{self.function} raised in its container:\n{payload}")
        return Done(**payload)

    def close(self) -> None:
        with contextlib.suppress(OSError, BrokenPipeError):
            self._conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=5)

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _serve(function: str, settings: dict[str, str], conn: Any) -> None:
    from sim import invoke

    with invoke.product_environment(settings):
        invoke.handler_module(function)  # the init phase, outside any invocation's figures
        while True:
            message = conn.recv()
            if message is None:
                return
            event, timeout_seconds = message
            try:
                conn.send((True, _invoke_once(function, event, timeout_seconds)))
            except Exception:
                conn.send((False, traceback.format_exc()))


def _invoke_once(function: str, event: dict[str, Any], timeout_seconds: float) -> dict[str, Any]:
    from sim import invoke

    reset = _reset_peak_rss()
    before = _status_kib("VmRSS")
    started, cpu, started_at = time.perf_counter(), time.process_time(), time.time()
    summary = invoke.invoke(function, event, timeout_seconds=timeout_seconds)
    return {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu,
            "summary": json.loads(json.dumps(summary, default=str)), "peak_rss_mib": _status_kib("VmHWM") / 1024,
            "rss_before_mib": before / 1024, "peak_reset_works": reset, "started_at": started_at}


def _status_kib(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+); False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
