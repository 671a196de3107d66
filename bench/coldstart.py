"""Handler cold start: importing each function's handler module plus building its clients, per function.

Each measurement runs in a fresh interpreter (what a new Lambda container does): the handler module
is imported from `lambdas/<fn>/handler.py` and `Runtime.from_settings()` builds the boto3 clients
and the Kubernetes client from dummy settings that point at loopback (nothing is called: building
clients makes no request). Reported per function: import seconds, client seconds, their sum
(target under 0.8 s), the whole process's wall time, and the heaviest top-level packages the
import pulls in (from `python -X importtime`), to see what a slow start is made of.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import print_lines

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("provisioner", "interruption", "disruption", "cleanup")
TARGET_SECONDS = 0.5  # issue #16 item 5 (the layer budget of item 2 allowed 0.8)
REPEATS = 3

# Runs in the fresh interpreter: time the import, then the clients.
_PROBE = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t1 = time.perf_counter()
from nodescale.runtime import Runtime
rt = Runtime.from_settings()
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "clients": t2 - t1, "modules": len(sys.modules)}))
"""

KUBECONFIG_TEXT = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: dummy}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def dummy_env(directory: Path) -> dict[str, str]:
    """Settings a handler accepts, every endpoint on loopback; nothing here is ever contacted."""
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG_TEXT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "NODESCALE_", "POWERTOOLS_"))}
    # The layers ship bytecode (infra/layers.py): the first, unreported start writes it here, and the
    # measured ones read it, as a Lambda container reads the layers' .pyc files.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(directory / "pycache")
    env.update({
        "PYTHONPATH": os.pathsep.join([str(ROOT / "layers/nodescale/python")]),
        "KUBECONFIG": str(kubeconfig),
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "CLUSTER_NAME": "coldstart",
        "NODESCALE_TABLE": "coldstart-table",
        "POWERTOOLS_SERVICE_NAME": "nodescale",
        "POWERTOOLS_METRICS_NAMESPACE": "nodescale",
    })
    return env


def handler_path(function: str) -> Path:
    return ROOT / "lambdas" / function / "handler.py"


def measure(function: str, env: dict[str, str]) -> dict[str, float]:
    """One cold start of ``function`` in a new interpreter."""
    import time

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _PROBE, str(handler_path(function))], capture_output=True,
                          text=True, env=env, timeout=60, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{function}: the cold start failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = wall
    result["total"] = result["import"] + result["clients"]
    return result


def heaviest_imports(function: str, env: dict[str, str], top: int = 5) -> list[tuple[str, float]]:
    """Packages by the seconds their first (outermost) import took, from `python -X importtime`: a
    package imported inside another counts in both, which is what shows where the time goes."""
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('handler', sys.argv[1]); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec))")
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code, str(handler_path(function))],
                          capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        # "import time: <self us> | <cumulative us> | <indent><module>"
        parts = line.split("|")
        if len(parts) != 3 or not line.startswith("import time:") or "cumulative" in line:
            continue
        root = parts[2].strip().split(".")[0]
        totals[root] = max(totals.get(root, 0.0), int(parts[1]) / 1e6)
    return sorted(totals.items(), key=lambda kv: -kv[1])[:top]


def run() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        env = dummy_env(Path(tmp))
        for function in FUNCTIONS:
            # The first start also warms the file system cache: the median of the next ones is reported.
            measure(function, env)
            runs = [measure(function, env) for _ in range(REPEATS)]
            med: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            best = min(r["total"] for r in runs)
            verdict = "met" if med["total"] < TARGET_SECONDS else "MISSED"
            heavy = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in heaviest_imports(function, env))
            yield (f"coldstart: {function}: median {med['total']:.2f} s, best {best:.2f} s of {REPEATS} "
                   f"(import {med['import']:.2f} s + clients "
                   f"{med['clients']:.2f} s; process {med['process']:.2f} s; {int(med['modules'])} modules) "
                   f"target < {TARGET_SECONDS} s: {verdict}; heaviest imports: {heavy}")


if __name__ == "__main__":
    print_lines(run)
