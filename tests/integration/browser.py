"""Headless Chromium driven over the DevTools protocol, for tests that look at a page as a person would.

Debian's `chromium` package (`make test` installs it when missing); the protocol is spoken with the
`websocket-client` package (already there: the `kubernetes` client depends on it), so nothing is
downloaded at run time. Chromium runs with a fresh profile and no network features of its own.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--remote-allow-origins=*",
)
START_TIMEOUT = 30.0


class BrowserError(RuntimeError):
    """Chromium did not start, or a protocol command failed."""


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """`with Browser() as b: b.open(url); b.evaluate("1 + 1"); b.screenshot(path)`."""

    def __init__(self, width: int = 1100, height: int = 1000) -> None:
        self.width, self.height = width, height
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self._proc: subprocess.Popen[bytes] | None = None
        self._ws: websocket.WebSocket | None = None
        self._next_id = 0

    def __enter__(self) -> Browser:
        binary = chromium_path()
        if binary is None:
            raise BrowserError("chromium is not installed (apt-get install -y chromium)")
        profile = Path(self._profile.name)
        self._proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port = self._port(profile)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            pages = [t for t in json.loads(response.read()) if t.get("type") == "page"]
        if not pages:
            raise BrowserError("chromium opened no page")
        self._ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=False)
        return self

    def _port(self, profile: Path) -> int:
        """The DevTools port Chromium chose, from the file it writes in its profile."""
        deadline = time.monotonic() + START_TIMEOUT
        marker = profile / "DevToolsActivePort"
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise BrowserError(f"chromium exited at start (code {self._proc.returncode})")
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.1)
        raise BrowserError(f"chromium did not open its DevTools port within {START_TIMEOUT:.0f}s")

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            self._ws.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        self._profile.cleanup()

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One protocol command; its result (events that arrive meanwhile are skipped)."""
        assert self._ws is not None, "use the Browser as a context manager"
        self._next_id += 1
        self._ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") != self._next_id:
                continue
            if "error" in message:
                raise BrowserError(f"{method}: {message['error']}")
            return dict(message.get("result") or {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serializable values only)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, timeout: float = 20.0) -> None:
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate("document.readyState") == "complete" and self.evaluate("location.href") == url:
                return
            time.sleep(0.1)
        raise BrowserError(f"{url} did not load within {timeout:.0f}s")

    def screenshot(self, path: Path) -> Path:
        """The page as rendered, top to bottom, as a PNG."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
