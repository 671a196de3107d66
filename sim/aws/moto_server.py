"""moto's server as a child process on 127.0.0.1 and a free port: start, reset, stop."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class MotoServerError(RuntimeError):
    """moto's server did not start or answer; the message says what it printed."""


class MotoServer:
    """One moto server child (see `sim.aws.moto_main`); `url` is valid after `start()`."""

    def __init__(self, log_path: Path | None = None, start_timeout: float = 60.0) -> None:
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise MotoServerError("moto server is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> MotoServer:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH", "")]))
        env.pop("MOTO_AMIS_PATH", None)
        if self.log_path:
            self._log = open(self.log_path, "ab")  # noqa: SIM115  (kept open for the child's lifetime)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "sim.aws.moto_main"],
            stdout=subprocess.PIPE,
            stderr=self._log if self._log else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(PROJECT_ROOT),
        )
        self.port = self._read_port()
        self._wait_answering()
        return self

    def _read_port(self) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self._proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + self.start_timeout
        line = b""
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line = self._proc.stdout.readline()
                break
            if self._proc.poll() is not None:
                break
        selector.close()
        if not line.startswith(b"PORT "):
            self.stop()
            raise MotoServerError(
                f"moto server did not report its port within {self.start_timeout:.0f}s"
                + (f"; see {self.log_path}" if self.log_path else "")
            )
        return int(line.split()[1])

    def _wait_answering(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise MotoServerError(f"moto server on port {self.port} does not answer")

    def reset(self) -> None:
        """Forget every resource (the public images and parameters come back on first use)."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30):
            pass

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
