"""Scale: listing a big cluster, and scaling `inflate` out and back in on `sim/`.

1. Listing: 5,000 nodes and 50,000 pods served by the local Kubernetes API; a fresh process lists
   them with nodescale's listing (plain dicts, paged, no client model objects) and reports the
   seconds and its peak RSS. Targets: under 10 s and under 1 GB.
2. Scale-out and in: 1,000 `inflate` pods (1 CPU each) on the default spot NodePool, provisioner
   passes until every pod is Running; then 0 replicas and disruption runs until every node is gone.
   Target: Running within 2 minutes of wall time.
3. The same with 2,000 pods spread over hostnames (maxSkew 1), which takes one node per pod; its
   wall time is capped (SPREAD_CAP_SECONDS) and reported as it stands when the cap is hit.

`python -m bench.scale list URL` is the listing process of part 1; `python -m bench.scale --nodes N`
is the large scale run of issue 18 (`bench/scalerun.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import print_lines

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
NODES = 5_000
PODS = 50_000
LIST_TARGET_SECONDS = 10.0
LIST_TARGET_BYTES = 2**30
SCALE_OUT_TARGET_SECONDS = 120.0
SPREAD_CAP_SECONDS = 600.0


# ----------------------------------------------------------------------------------------------- listing


def node_name(index: int) -> str:
    return f"ip-10-{index // 62500}-{index // 250 % 250}-{index % 250}.ec2.internal"


def seed_store(store: Any, nodes: int = NODES, pods: int = PODS) -> None:
    """Nodes and pods shaped like a real cluster's: labels, allocatable, conditions, owner, requests."""
    for index in range(nodes):
        store.create("v1/nodes", {
            "metadata": {"name": node_name(index), "labels": {
                "karpenter.sh/nodepool": f"pool-{index % 4}", "karpenter.sh/capacity-type": "spot",
                "node.kubernetes.io/instance-type": "m5.4xlarge", "topology.kubernetes.io/zone": "us-east-1a",
                "kubernetes.io/hostname": node_name(index)}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}"},
            "status": {"allocatable": {"cpu": "15890m", "memory": "60Gi", "pods": "110"},
                       "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
    for index in range(pods):
        store.create("v1/pods", {
            "metadata": {"name": f"app-{index}", "labels": {"app": f"app-{index % 100}"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": f"app-{index % 100}-5d8f", "uid": f"rs-{index % 100}",
                                              "controller": True}]},
            "spec": {"nodeName": node_name(index % nodes), "containers": [
                {"name": "app", "image": "public.ecr.aws/nginx/nginx:1.27",
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        }, "default")


def list_in_fresh_process(url: str, timeout: float = 300.0) -> dict[str, Any]:
    """Run the listing in a new interpreter (so its memory is its own) and return its report."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers/nodescale/python")])}
    done = subprocess.run([sys.executable, "-m", "bench.scale", "list", url], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the listing process failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss() -> int:
    """This process's peak resident memory in bytes (VmHWM: unlike ru_maxrss, not inherited through exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _list_main(url: str) -> None:
    from kubernetes import client

    from nodescale.k8s import listing
    from sim.aws.constants import KUBE_FUNCTIONS_TOKEN

    # Every response that would become client model objects goes through deserialize; count them.
    deserialized = 0
    original = client.ApiClient.deserialize

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal deserialized
        deserialized += 1
        return original(self, *args, **kwargs)

    client.ApiClient.deserialize = counting  # type: ignore[method-assign]
    config = client.Configuration(host=url)
    config.api_key = {"authorization": KUBE_FUNCTIONS_TOKEN}  # the functions' identity, as the product lists
    config.api_key_prefix = {"authorization": "Bearer"}
    api = client.ApiClient(config)
    rss_before = peak_rss()
    started = time.perf_counter()
    nodes = listing.list_nodes(api).items
    pods = listing.list_pods(api).items
    seconds = time.perf_counter() - started
    peak = peak_rss()
    print(json.dumps({
        "nodes": len(nodes),
        "pods": len(pods),
        "distinctPods": len({p["metadata"]["name"] for p in pods}),
        "itemsArePlainDicts": all(type(x) is dict for x in (*nodes[:10], *pods[:10])),
        "deserializeCalls": deserialized,
        "seconds": round(seconds, 3),
        "peakRssBytes": peak,
        "rssBeforeBytes": rss_before,
    }))


def listing_server(store: Any) -> Any:
    """A started API server over `store` that holds the functions' RBAC, for `list_in_fresh_process`."""
    from sim.environment import RBAC_MANIFEST
    from sim.kube.rbac import apply_manifest
    from sim.kube.server import KubeServer

    apply_manifest(store, RBAC_MANIFEST)
    return KubeServer(store).start()


def measure_listing() -> dict[str, Any]:
    from sim.clock import Clock
    from sim.kube.store import Store

    store = Store(Clock())
    started = time.perf_counter()
    seed_store(store)
    seeded = time.perf_counter() - started
    server = listing_server(store)
    try:
        report = list_in_fresh_process(server.url)
    finally:
        server.stop()
    report["seedSeconds"] = round(seeded, 1)
    return report


# ------------------------------------------------------------------------------------------- scale out/in


@dataclasses.dataclass
class ScaleRun:
    pods: int
    spread: bool
    out_seconds: float | None = None  # None: not all Running within the cap
    running: int = 0
    nodes: int = 0
    launches: int = 0
    provision_passes: int = 0
    in_seconds: float | None = None
    disruption_runs: int = 0
    nodes_left: int = 0
    price_per_hour: float = 0.0
    error: str = ""  # why a phase stopped early (e.g. the environment stopped answering)


def pool_text(cpu_limit: int) -> str:
    """The default spot NodePool (v1alpha5 example) with room for the run."""
    text = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()
    return text.replace("cpu: 1000", f"cpu: {cpu_limit}")


def inflate(namespace: str, replicas: int, spread: bool) -> dict[str, Any]:
    import yaml

    doc = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["replicas"] = replicas
    if spread:
        doc["spec"]["template"]["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "inflate"}}}]
    return doc


def scale_out_and_in(env: Any, rt: Any, replicas: int, spread: bool, cap: float, namespace: str = "default",
                     log: Any = None) -> ScaleRun:
    """Create inflate with ``replicas`` pods, provision until all run, scale to 0, disrupt until no
    managed node is left. ``env`` is a running sim Environment whose clock the process reads."""
    from nodescale.k8s.raw import MERGE_PATCH, request_json
    from nodescale.usecases.disrupt import run as disrupt
    from nodescale.usecases.provision import provisioner as provision

    api = env.kube_api_client()
    run = ScaleRun(replicas, spread)

    def pods() -> list[dict]:
        return request_json(api, "GET", f"/api/v1/namespaces/{namespace}/pods").get("items") or []

    def managed_nodes() -> list[dict]:
        items = request_json(api, "GET", "/api/v1/nodes").get("items") or []
        pool_keys = {"karpenter.sh/nodepool", "karpenter.sh/provisioner-name"}  # v1 and v1alpha5 nodes
        return [n for n in items if pool_keys & set(n["metadata"].get("labels") or {})]

    started = time.monotonic()
    request_json(api, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments",
                 body=inflate(namespace, replicas, spread))
    while time.monotonic() - started < cap:
        found = pods()
        run.running = sum(1 for p in found if p["status"].get("phase") == "Running" and p["spec"].get("nodeName"))
        if run.running >= replicas:
            run.out_seconds = time.monotonic() - started
            break
        try:
            summary = provision.provision_once(rt)
        except Exception as exc:  # a benchmark reports how far it got, whatever stopped it
            run.error = f"provisioner pass {run.provision_passes + 1}: {type(exc).__name__}: {exc}"
            break
        run.provision_passes += 1
        run.launches += len(summary.launches)
        run.price_per_hour += summary.price_per_hour_launched
        if log:
            log(f"  {time.monotonic() - started:6.1f} s: {run.running}/{replicas} running, "
                f"{run.launches} nodes launched")
        env.advance(2)
        time.sleep(0.3)
    if run.out_seconds is None:
        run.running = sum(1 for p in pods() if p["status"].get("phase") == "Running" and p["spec"].get("nodeName"))
    run.nodes = len(managed_nodes())
    if run.error:
        return run

    started = time.monotonic()
    request_json(api, "PATCH", f"/apis/apps/v1/namespaces/{namespace}/deployments/inflate",
                 body={"spec": {"replicas": 0}}, content_type=MERGE_PATCH)
    while time.monotonic() - started < cap:
        left = managed_nodes()
        run.nodes_left = len(left)
        if not left:
            run.in_seconds = time.monotonic() - started
            break
        try:
            disrupt.disrupt_once(rt)
        except Exception as exc:  # as above
            run.error = f"disruption run {run.disruption_runs + 1}: {type(exc).__name__}: {exc}"
            break
        run.disruption_runs += 1
        # past the pool's ttlSecondsAfterEmpty (30 s) in simulated time
        env.advance(11)
        time.sleep(0.3)
    request_json(api, "DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/inflate")
    return run


@dataclasses.dataclass
class SimRuntime:
    env: Any
    rt: Any


@contextlib.contextmanager
def sim_runtime(directory: Path, cpu_limit: int) -> Iterator[SimRuntime]:
    """A fresh environment with the default spot pool; the process reads the environment's clock."""
    from nodescale.aws.clients import AwsClients
    from nodescale.clock import CLOCK_URL
    from nodescale.runtime import Runtime
    from nodescale.settings import Settings
    from nodescale.usecases.world_sources import catalog
    from sim.environment import Environment
    from tests.integration.helpers import Registrar

    with Environment(directory, ready_delay=1.0) as env:
        previous = os.environ.get(CLOCK_URL)
        os.environ[CLOCK_URL] = env.env[CLOCK_URL]
        try:
            settings = Settings.from_env(env.env)
            # The product runs as the functions (DIR/env); the benchmark seeds and watches as the administrator.
            aws = AwsClients(**{s: env.functions_boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")})
            rt = Runtime(settings, aws, env.functions_kube_api_client())
            env.boto3_client("ssm").put_parameter(
                Name=settings.nodepool_parameter_path.rstrip("/") + "/default", Value=pool_text(cpu_limit),
                Type="String", Overwrite=True)
            catalog(rt)  # a warm container has its catalog; its first fetch is not what is measured
            # The deployed provisioner's watch registers each node as it joins (karpenter.sh/unregistered, #30.4).
            with Registrar(env):
                yield SimRuntime(env, rt)
        finally:
            if previous is None:
                os.environ.pop(CLOCK_URL, None)
            else:
                os.environ[CLOCK_URL] = previous


def _scale_lines(run: ScaleRun, cap: float, target: float | None) -> Iterator[str]:
    kind = f"{run.pods} inflate pods" + (" with hostname spread" if run.spread else "")
    if run.out_seconds is None:
        yield (f"scale: {kind}: NOT all Running ({run.running}/{run.pods} running on {run.nodes} nodes, "
               f"{run.launches} launched in {run.provision_passes} provisioner passes, cap {cap:.0f} s)")
    else:
        met = target is not None and run.out_seconds < target
        verdict = "" if target is None else f" (target < {target:.0f} s: {'met' if met else 'MISSED'})"
        yield (f"scale: {kind}: all Running in {run.out_seconds:.1f} s wall{verdict}; {run.nodes} nodes "
               f"({run.launches} launched, ${run.price_per_hour:.2f}/hour) in {run.provision_passes} provisioner passes")
    if run.error:
        yield f"scale: {kind}: stopped: {run.error}"
    elif run.in_seconds is None:
        yield f"scale: {kind}: scale-in NOT finished within {cap:.0f} s ({run.nodes_left} nodes left)"
    else:
        yield (f"scale: {kind}: scaled in, every node removed in {run.in_seconds:.1f} s wall "
               f"({run.disruption_runs} disruption runs)")


def run() -> Iterator[str]:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    report = measure_listing()
    ok = report["seconds"] < LIST_TARGET_SECONDS and report["peakRssBytes"] < LIST_TARGET_BYTES
    yield (f"scale: listed {report['nodes']} nodes and {report['pods']} pods in {report['seconds']:.2f} s, "
           f"peak RSS {report['peakRssBytes'] / 2**20:.0f} MiB ({report['rssBeforeBytes'] / 2**20:.0f} MiB before "
           f"listing), {report['deserializeCalls']} model deserializations "
           f"(target < {LIST_TARGET_SECONDS:.0f} s and < 1 GiB: {'met' if ok else 'MISSED'})")
    for replicas, spread, cap, target in ((1000, False, 300.0, SCALE_OUT_TARGET_SECONDS),
                                          (2000, True, SPREAD_CAP_SECONDS, SCALE_OUT_TARGET_SECONDS)):
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, \
                sim_runtime(Path(tmp), cpu_limit=10 * replicas) as sim:
            result = scale_out_and_in(sim.env, sim.rt, replicas, spread, cap)
            yield from _scale_lines(result, cap, target)


if __name__ == "__main__":
    if sys.argv[1:2] == ["list"] and len(sys.argv) == 3:
        _list_main(sys.argv[2])
    elif any(arg == "--nodes" or arg.startswith("--nodes=") for arg in sys.argv[1:]):
        from bench import scalerun

        sys.exit(scalerun.main(sys.argv[1:]))
    else:
        print_lines(run)
