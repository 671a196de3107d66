"""Seconds from a pod going pending to the EC2 Fleet call that launches its node, in watch mode.

50 pods (1 CPU each) arrive in 5 bursts of 10, 3 s apart, on a fresh `sim/` environment with the
default spot NodePool; the provisioner watches for them the way the Lambda does. A pod's clock starts
when it is created (the sim's scheduler marks it Unschedulable at once) and stops at the CreateFleet
call that carries it. Median and p95 are printed; the target p95 is under 3 s.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import print_lines

BURSTS = 5
PODS_PER_BURST = 10
BURST_GAP_SECONDS = 3.0
EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "examples"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def measure() -> dict[str, Any]:
    import os

    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    from nodescale.aws.clients import AwsClients
    from nodescale.k8s.raw import request_json
    from nodescale.runtime import Runtime
    from nodescale.settings import Settings
    from nodescale.usecases.provision import provisioner as provision
    from nodescale.usecases.world_sources import catalog
    from sim.environment import Environment

    with tempfile.TemporaryDirectory(prefix="bench-provisioner-") as tmp, Environment(Path(tmp), ready_delay=1.0) as env:
        settings = dataclasses.replace(Settings.from_env(env.env), watch_seconds=60.0)
        # The product runs as the functions (DIR/env); the benchmark seeds as the administrator.
        aws = AwsClients(**{s: env.functions_boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")})
        api = env.kube_api_client()
        rt = Runtime(settings, aws, env.functions_kube_api_client())
        path = settings.nodepool_parameter_path.rstrip("/")
        env.boto3_client("ssm").put_parameter(
            Name=f"{path}/default", Value=(EXAMPLES / "karpenter-v1alpha5/default-spot.yaml").read_text(),
            Type="String", Overwrite=True,
        )
        catalog(rt)  # a warm container has its catalog; the first invocation's fetch is not what is measured
        fleet_times: list[float] = []
        aws.ec2.meta.events.register("before-call.ec2.CreateFleet", lambda **_: fleet_times.append(time.time()))

        created: dict[str, float] = {}
        deadline = time.monotonic() + BURSTS * BURST_GAP_SECONDS + 15
        result: list[Any] = []  # the watch's Summary, once it ends
        watcher = threading.Thread(
            target=lambda: result.append(provision.provision_watch(rt, deadline)), name="bench-watch"
        )
        watcher.start()
        time.sleep(1.0)
        for burst in range(BURSTS):
            for i in range(PODS_PER_BURST):
                name = f"p-{burst}-{i}"
                body = {"metadata": {"name": name},
                        "spec": {"containers": [{"name": "c", "image": "pause",
                                                 "resources": {"requests": {"cpu": "1"}}}]}}
                created[f"default/{name}"] = time.time()
                request_json(api, "POST", "/api/v1/namespaces/default/pods", body=body)
            time.sleep(BURST_GAP_SECONDS)
        watcher.join()

    latencies = []
    launches = result[0].launches if result else []
    for launch, at in zip(launches, fleet_times, strict=False):
        for pod in launch.pods:
            if pod in created:
                latencies.append(at - created[pod])
    return {
        "pods": len(created),
        "podsLaunchedFor": len(latencies),
        "launches": len(launches),
        "batches": result[0].batches if result else 0,
        "median": statistics.median(latencies) if latencies else float("nan"),
        "p95": _percentile(latencies, 0.95) if latencies else float("nan"),
    }


def run() -> Iterator[str]:
    figures = measure()
    yield (
        f"provisioner watch mode: pending -> CreateFleet over {figures['podsLaunchedFor']}/{figures['pods']} pods "
        f"in {BURSTS} bursts: median {figures['median']:.2f} s, p95 {figures['p95']:.2f} s (target p95 < 3 s); "
        f"{figures['launches']} launches in {figures['batches']} batches"
    )


if __name__ == "__main__":
    print_lines(run)
