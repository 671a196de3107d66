"""What running nodescale itself costs per month for a 100-node cluster, in watch mode and in poll mode.

Measured: a fresh `sim/` environment gets 100 m5.xlarge instances tagged for the cluster, a Ready Node for
each with ten pods that fill it to 90% of its cpu (nothing to provision, nothing worth consolidating: the
steady state), and the handlers run in this process the way their triggers run them (``sim.invoke``):
the provisioner in poll mode and in watch mode, the disruption function on its tick, the interruption
function on one EC2 state-change event. Each invocation's wall time, its DynamoDB calls (counted on the
boto3 clients) and what it writes to stdout (its log stream: JSON logs at INFO and the EMF documents its
custom metrics travel in) are recorded; the distinct EMF series are the custom metrics.

Priced: Lambda bills configured memory (``infra/functions.py``) times billed duration, plus requests;
both scheduled functions tick every minute (``infra/triggers.py``). In watch mode the provisioner stays
for ``NODESCALE_WATCH_SECONDS`` (50 s as deployed) each tick: the bench watches for WATCH_SECONDS and bills
50 s plus what the invocation took beyond its watch window. Interruption events for a 100-node on-demand
cluster are an assumption (INTERRUPTION_EVENTS_PER_MONTH). Free tiers are left out (they are per account).
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import print_lines
from sim.aws.constants import DEMO_NODECLASS_YAML

# --------------------------------------------------------------------------------------------- prices
# AWS's published us-east-1 prices on these pages, as written down on 2026-11-24 (not fetched live from
# this machine, which has no route to aws.amazon.com: they are the rates AWS has published since its last
# changes, Lambda arm64 since its launch in 2021-09, DynamoDB on-demand since the 2024-11-01 price cut):
#   https://aws.amazon.com/lambda/pricing/       arm64: $0.0000133334 per GB-second (first 7.5 billion
#                                                GB-s a month), $0.20 per million requests
#   https://aws.amazon.com/dynamodb/pricing/on-demand/   $0.625 per million write request units,
#                                                $0.125 per million read request units
#   https://aws.amazon.com/cloudwatch/pricing/   custom metrics $0.30 per metric-month (first 10,000),
#                                                logs ingestion $0.50 per GB (standard class), standard
#                                                resolution alarms $0.10 per alarm-month, dashboards
#                                                $3.00 per dashboard-month (beyond the first three)
PRICES_AS_OF = "2026-11-24 (as written down, not fetched live)"


@dataclass(frozen=True)
class Prices:
    lambda_gb_second: float = 0.0000133334
    lambda_request: float = 0.20 / 1e6
    dynamodb_read_unit: float = 0.125 / 1e6
    dynamodb_write_unit: float = 0.625 / 1e6
    metric_month: float = 0.30
    log_gb: float = 0.50
    alarm_month: float = 0.10
    dashboard_month: float = 3.00


# ------------------------------------------------------------------------------------------ deployment
# From infra/functions.py and infra/triggers.py (tests/cdk/test_cost_inputs.py holds these to the stack).
MEMORY_MB = {"provisioner": 1024, "disruption": 1024, "interruption": 1024}
WATCH_SECONDS_DEPLOYED = 50.0
TICKS_PER_MONTH = 730 * 60  # a one-minute schedule over AWS's 730-hour month
# infra/dashboard.py: one errors alarm per function (3), dead letters, interruption queue age, pods pending,
# launch failing, limit reached, configuration errors (the price alarm is optional and left out); one dashboard.
ALARMS = 9
DASHBOARDS = 1
# Assumed: 100 on-demand nodes, a tenth of them replaced a day, two state-change events each
# (shutting-down, terminated) that the interruption function is started for.
INTERRUPTION_EVENTS_PER_MONTH = round(100 * 0.1 * 30.4 * 2)
# Lambda's own START / END / REPORT lines in every invocation's log stream.
PLATFORM_LOG_BYTES = 350


@dataclass(frozen=True)
class FunctionUsage:
    invocations: float  # a month
    seconds: float  # billed per invocation
    memory_mb: int
    log_bytes: float  # per invocation, platform lines included
    dynamodb_reads: float  # request units per invocation
    dynamodb_writes: float


@dataclass(frozen=True)
class Usage:
    functions: Mapping[str, FunctionUsage]
    metrics: int  # distinct custom metric series, each sent all month
    alarms: int = ALARMS
    dashboards: int = DASHBOARDS


def monthly_cost(usage: Usage, prices: Prices = Prices()) -> dict[str, float]:
    """USD a month, by item, and the total."""
    gb_seconds = sum(f.invocations * f.seconds * f.memory_mb / 1024 for f in usage.functions.values())
    requests = sum(f.invocations for f in usage.functions.values())
    reads = sum(f.invocations * f.dynamodb_reads for f in usage.functions.values())
    writes = sum(f.invocations * f.dynamodb_writes for f in usage.functions.values())
    log_gb = sum(f.invocations * f.log_bytes for f in usage.functions.values()) / 1e9
    out = {
        "lambda compute": gb_seconds * prices.lambda_gb_second,
        "lambda requests": requests * prices.lambda_request,
        "dynamodb": reads * prices.dynamodb_read_unit + writes * prices.dynamodb_write_unit,
        "custom metrics": usage.metrics * prices.metric_month,
        "logs ingestion": log_gb * prices.log_gb,
        "alarms": usage.alarms * prices.alarm_month,
        "dashboard": usage.dashboards * prices.dashboard_month,
    }
    out["total"] = sum(out.values())
    return out


# ----------------------------------------------------------------------------------------- measurement
NODES = 100
PODS_PER_NODE = 10
WATCH_SECONDS = 5.0  # the bench's watch window; the bill uses the deployed 50 s
TICKS = 3

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
---
""" + DEMO_NODECLASS_YAML


@dataclass
class Sample:
    seconds: float
    log_bytes: int
    reads: float
    writes: float
    series: set[tuple] = field(default_factory=set)


class _DynamoCounter:
    """Request units of the DynamoDB calls made: every read call 1 RRU (small items, under 4 KB a page,
    strongly consistent at worst), every written or deleted item 1 WRU (items under 1 KB)."""

    READS = ("GetItem", "Query", "Scan", "BatchGetItem")

    def __init__(self) -> None:
        self.reads = 0.0
        self.writes = 0.0
        self.calls: Counter[str] = Counter()

    def before(self, model: Any = None, params: Any = None, **_: Any) -> None:
        op = model.name
        self.calls[op] += 1
        if op in self.READS:
            self.reads += 1
        elif op == "BatchWriteItem":
            self.writes += sum(len(v) for v in (params or {}).get("RequestItems", {}).values())
        elif op in ("PutItem", "DeleteItem", "UpdateItem"):
            self.writes += 1


def _emf_series(text: str) -> tuple[set[tuple], int]:
    series: set[tuple] = set()
    for line in text.splitlines():
        if '"_aws"' not in line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for directive in doc["_aws"].get("CloudWatchMetrics", []):
            for dims in directive.get("Dimensions", []):
                key = tuple(sorted((d, str(doc.get(d))) for d in dims))
                for metric in directive.get("Metrics", []):
                    series.add((directive.get("Namespace"), metric["Name"], key))
    return series, len(text.encode())


def _seed(env: Any) -> list[dict[str, Any]]:
    from concurrent.futures import ThreadPoolExecutor

    from bench.disruption import AL2023, _node
    from nodescale.k8s.raw import request_json

    path = env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
    env.boto3_client("ssm").put_parameter(Name=f"{path}/default", Value=POOL, Type="String", Overwrite=True)
    ec2 = env.boto3_client("ec2")
    image = env.boto3_client("ssm").get_parameter(Name=AL2023)["Parameter"]["Value"]
    zones = sorted(env.seed["subnets"])
    instances: list[dict[str, Any]] = []
    for batch, zone in enumerate(zones):
        count = NODES // len(zones) + (1 if batch < NODES % len(zones) else 0)
        instances += ec2.run_instances(
            ImageId=image, InstanceType="m5.xlarge", MinCount=count, MaxCount=count,
            SubnetId=env.seed["subnets"][zone], SecurityGroupIds=[env.seed["security_group_id"]],
            TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": "nodescale.io/cluster", "Value": env.cluster},
                {"Key": "karpenter.sh/nodepool", "Value": "default"}]}],
        )["Instances"]
    ready_since = env.clock()["now"]
    env.advance(3600)
    api = env.kube_api_client()
    nodes = [_node(i, ready_since) for i in instances]

    def pod(node: str, i: int) -> dict[str, Any]:
        return {"metadata": {"name": f"app-{node.split('.')[0]}-{i}", "namespace": "default",
                             "labels": {"app": f"app-{i}"}},
                "spec": {"nodeName": node, "containers": [{"name": "app", "image": "pause", "resources": {
                    "requests": {"cpu": "350m", "memory": "1Gi"}}}]}}

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: request_json(api, "POST", "/api/v1/nodes", body=n), nodes))
        pods = [pod(n["metadata"]["name"], i) for n in nodes for i in range(PODS_PER_NODE)]
        list(pool.map(lambda p: request_json(api, "POST", "/api/v1/namespaces/default/pods", body=p), pods))
    return instances


def measure() -> dict[str, Any]:
    from nodescale.aws import clients
    from sim import invoke
    from sim.environment import Environment

    counter = _DynamoCounter()
    made_session = clients.session

    def counted_session(region: str | None = None) -> Any:
        sess = made_session(region)
        if not getattr(sess, "_bench_counted", False):
            sess.events.register("before-call.dynamodb", counter.before)
            sess._bench_counted = True  # type: ignore[attr-defined]
        return sess

    def one(function: str, event: dict[str, Any], timeout: float = 120.0) -> Sample:
        reads, writes = counter.reads, counter.writes
        out = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out):
            invoke.invoke(function, event, timeout_seconds=timeout)
        seconds = time.perf_counter() - started
        series, size = _emf_series(out.getvalue())
        return Sample(seconds, size, counter.reads - reads, counter.writes - writes, series)

    samples: dict[str, list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp, Environment(Path(tmp)) as env:
        instances = _seed(env)
        overrides = {"NODESCALE_WATCH_SECONDS": str(WATCH_SECONDS), "POWERTOOLS_LOG_LEVEL": "INFO",
                     "POWERTOOLS_METRICS_NAMESPACE": "nodescale", "POWERTOOLS_METRICS_DISABLED": "false"}
        clients.session = counted_session
        try:
            for mode in ("poll", "watch"):
                with invoke.product_environment(env.env, NODESCALE_PROVISIONER_MODE=mode, **overrides):
                    # A warm container: its first invocation (imports, catalog, clients) is not the steady state.
                    one("provisioner", invoke.scheduled_tick(rule="provisioner"))
                    if mode == "poll":
                        one("disruption", invoke.scheduled_tick(rule="disruption"), 300)
                    for _ in range(TICKS):
                        samples.setdefault(f"provisioner-{mode}", []).append(
                            one("provisioner", invoke.scheduled_tick(rule="provisioner")))
                        if mode == "poll":
                            samples.setdefault("disruption", []).append(
                                one("disruption", invoke.scheduled_tick(rule="disruption"), 300))
                    if mode == "watch":
                        event = invoke.event_for_instance("state-change-stopping.json", instances[0]["InstanceId"])
                        samples["interruption"] = [one("interruption", event, 150)]
        finally:
            clients.session = made_session
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"samples": samples, "peak_mib": peak_mib, "calls": dict(counter.calls)}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def usage_for(mode: str, samples: Mapping[str, list[Sample]]) -> Usage:
    def usage(key: str, invocations: float, memory: int, extra_seconds: float = 0.0) -> FunctionUsage:
        s = samples[key]
        return FunctionUsage(
            invocations, _mean([x.seconds for x in s]) + extra_seconds, memory,
            _mean([x.log_bytes for x in s]) + PLATFORM_LOG_BYTES,
            _mean([x.reads for x in s]), _mean([x.writes for x in s]),
        )

    if mode == "watch":
        # Billed: the deployed watch window plus what the invocation took beyond the bench's window.
        prov = usage("provisioner-watch", TICKS_PER_MONTH, MEMORY_MB["provisioner"], WATCH_SECONDS_DEPLOYED - WATCH_SECONDS)
    else:
        prov = usage("provisioner-poll", TICKS_PER_MONTH, MEMORY_MB["provisioner"])
    functions = {
        "provisioner": prov,
        "disruption": usage("disruption", TICKS_PER_MONTH, MEMORY_MB["disruption"]),
        "interruption": usage("interruption", INTERRUPTION_EVENTS_PER_MONTH, MEMORY_MB["interruption"]),
    }
    keys = ("provisioner-" + mode, "disruption", "interruption")
    series: set[tuple] = set()
    for key in keys:
        for s in samples[key]:
            series |= s.series
    return Usage(functions, len(series))


def run() -> Iterator[str]:
    measured = measure()
    samples = measured["samples"]
    yield (f"cost: nodescale itself for {NODES} nodes ({NODES * PODS_PER_NODE} pods) on sim/, steady state, "
           f"US East prices as of {PRICES_AS_OF}; durations measured here (mean of {TICKS} warm ticks)")
    for key, s in samples.items():
        yield (f"  {key:<18} {_mean([x.seconds for x in s]):6.2f} s, {_mean([x.log_bytes for x in s]) / 1024:6.1f} KiB "
               f"of logs+EMF, {_mean([x.reads for x in s]):.0f} DynamoDB reads / {_mean([x.writes for x in s]):.0f} "
               f"writes per invocation")
    for mode in ("watch", "poll"):
        usage = usage_for(mode, samples)
        cost = monthly_cost(usage)
        parts = ", ".join(f"{k} ${v:,.2f}" for k, v in cost.items() if k != "total")
        yield (f"  {mode} mode: ${cost['total']:,.2f}/month ({parts}; provisioner billed "
               f"{usage.functions['provisioner'].seconds:.1f} s x {TICKS_PER_MONTH:,} ticks at "
               f"{MEMORY_MB['provisioner']} MB; {usage.metrics} custom metric series)")
    yield (f"  peak RSS of this process {measured['peak_mib']:.0f} MiB (the bench and the handlers; Lambda bills "
           f"configured memory); DynamoDB calls {measured['calls']}")


if __name__ == "__main__":
    print_lines(run)
