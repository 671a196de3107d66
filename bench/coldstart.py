"""Handler cold start: importing each function's handler module plus building its clients, per function.

Each measurement runs in a fresh interpreter (what a new Lambda container does): the handler module
is imported from `lambdas/<fn>/handler.py` and `BaseRuntime.from_settings()` builds the boto3 clients
and the Kubernetes client from dummy settings that point at loopback (nothing is called: building
clients makes no request). Every function's runtime is built from these clients: the launching
functions' `Runtime` (which their handlers import) adds a launcher built on its first use, as before,
and the cleanup function's `BaseRuntime` has none, so the probe imports no launch path for it.
Reported per function: import seconds, client seconds, their sum (target under 0.8 s), the whole process's wall time, and the heaviest top-level packages the
import pulls in (from `python -X importtime`), to see what a slow start is made of.

An absolute time on a shared machine says little (#32, cold start), so each handler start is paired
with a start of the floor every Python Lambda with boto3 and Powertools pays, run just before it on the
same interpreter: import boto3 and Powertools' Logger and Metrics (what the handlers use), set both up
and build one EC2 client. The ratio of the handler's time to the floor's (median to median, worst to
worst) is the figure to compare across machines; the goal is at most 1.25. The same ratio of the processes'
own CPU seconds (time.process_time) is printed beside it with the load average: on a loaded shared machine
the wall-time ratio swings with what else runs, the CPU-time one much less.

The Kubernetes client is built from a kubeconfig of the plain token shape (KUBECONFIG_TEXT), read
without kubernetes.config. In Lambda there is no kubeconfig: the client comes from eks:DescribeCluster and
an STS-signed token (nodescale/k8s/client.py). Both paths import the same modules; the Lambda path's extra
cost is an EKS client, that call and the token's signature, which need a network and are not measured (CLIENT_NOTE,
printed first).

`python -m bench.coldstart [repeats]` (default 5 starts of each).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import print_lines

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ("provisioner", "interruption", "disruption", "cleanup")
TARGET_SECONDS = 0.5  # issue #16 item 5 (the layer budget of item 2 allowed 0.8)
REPEATS = 5
CLIENT_NOTE = ("coldstart: the Kubernetes client is built from a token kubeconfig; Lambda builds it from "
               "eks:DescribeCluster and an STS-signed token (same imports; its EKS client, that call and the signature are "
               "not measured)")
RATIO_GOAL = 1.25  # issue #32, cold start: a handler's start at most 1.25 times the floor

# Runs in the fresh interpreter: time the import, then the clients.
_PROBE = """
import importlib.util, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t1 = time.perf_counter()
from nodescale.base_runtime import BaseRuntime
rt = BaseRuntime.from_settings()
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"import": t1 - t0, "clients": t2 - t1, "cpu": c2 - c0, "modules": len(sys.modules)}))
"""

# The floor, in the fresh interpreter: what any Powertools Lambda that calls EC2 does before its first event.
_FLOOR_PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import boto3
from aws_lambda_powertools import Logger, Metrics
Logger(); Metrics()
boto3.client("ec2")
t1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({"total": t1 - t0, "cpu": c1 - c0, "modules": len(sys.modules)}))
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


@dataclass(frozen=True)
class Summary:
    """A function's starts beside the floor's: seconds, and the ratios that carry across machines."""

    median: float
    worst: float
    floor_median: float
    floor_worst: float

    @property
    def median_ratio(self) -> float:
        return self.median / self.floor_median

    @property
    def worst_ratio(self) -> float:
        return self.worst / self.floor_worst


def summarize(starts: Sequence[float], floor: Sequence[float]) -> Summary:
    """Median and worst of a function's start times and of the floor's, measured side by side."""
    if not starts or not floor:
        raise ValueError("summarize needs at least one start of the function and one of the floor")
    if min(floor) <= 0:
        raise ValueError(f"floor times must be positive seconds, got {min(floor)}")
    return Summary(statistics.median(starts), max(starts), statistics.median(floor), max(floor))


def _run_probe(code: str, args: list[str], env: dict[str, str], what: str) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=ROOT)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{what}: the cold start failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = wall
    return result


def measure(function: str, env: dict[str, str]) -> dict[str, float]:
    """One cold start of ``function`` in a new interpreter."""
    result = _run_probe(_PROBE, [str(handler_path(function))], env, function)
    result["total"] = result["import"] + result["clients"]
    return result


def measure_floor(env: dict[str, str]) -> dict[str, float]:
    """One start of the floor (boto3, Powertools, one EC2 client) in a new interpreter."""
    return _run_probe(_FLOOR_PROBE, [], env, "floor")


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


def repeats_from(argv: Sequence[str]) -> int:
    """The optional first argument: how many measured starts per function (default REPEATS)."""
    if len(argv) < 2:
        return REPEATS
    if not argv[1].isdigit() or int(argv[1]) < 1:
        raise SystemExit(f"bench.coldstart: repeats must be a positive whole number, got {argv[1]!r}")
    return int(argv[1])


def run() -> Iterator[str]:
    repeats = repeats_from(sys.argv)
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        env = dummy_env(Path(tmp))
        yield CLIENT_NOTE
        measure_floor(env)  # writes the floor's bytecode, as the handlers' first start does theirs
        for function in FUNCTIONS:
            # The first start also warms the file system cache: the median of the next ones is reported.
            measure(function, env)
            runs: list[dict[str, float]] = []
            floor: list[dict[str, float]] = []
            for _ in range(repeats):  # each start right after a floor start, so both see the same load
                floor.append(measure_floor(env))
                runs.append(measure(function, env))
            wall = summarize([r["total"] for r in runs], [f["total"] for f in floor])
            cpu = summarize([r["cpu"] for r in runs], [f["cpu"] for f in floor])
            yield report_line(function, runs, wall, repeats, heaviest_imports(function, env), cpu=cpu,
                              load=os.getloadavg()[0])


def report_line(function: str, runs: list[dict[str, float]], summary: Summary, repeats: int,
                heavy: list[tuple[str, float]], *, cpu: Summary, load: float) -> str:
    med: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    best = min(r["total"] for r in runs)
    verdict = "met" if med["total"] < TARGET_SECONDS else "MISSED"
    ratio_verdict = "met" if summary.median_ratio <= RATIO_GOAL and summary.worst_ratio <= RATIO_GOAL else "MISSED"
    heaviest = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in heavy)
    return (f"coldstart: {function}: median {med['total']:.2f} s, best {best:.2f} s, worst {summary.worst:.2f} s "
            f"of {repeats} (import {med['import']:.2f} s + clients "
            f"{med['clients']:.2f} s; process {med['process']:.2f} s; {int(med['modules'])} modules) "
            f"target < {TARGET_SECONDS} s: {verdict}; floor (boto3 + Powertools + one EC2 client) median "
            f"{summary.floor_median:.2f} s, worst {summary.floor_worst:.2f} s; ratio to the floor median "
            f"{summary.median_ratio:.2f}, worst {summary.worst_ratio:.2f} (goal <= {RATIO_GOAL}): {ratio_verdict}; "
            f"CPU-time ratio median {cpu.median_ratio:.2f}, worst {cpu.worst_ratio:.2f}; load average {load:.1f}; "
            f"heaviest imports: {heaviest}")


if __name__ == "__main__":
    print_lines(run)
