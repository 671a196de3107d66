"""The large scale run (issue 18): a cluster of about NODES nodes and 10 x NODES pods on `sim/`, driven
through the Lambda handlers as their triggers would start them, with every invocation measured.

Phases:
1. scale-out: four spot NodePools (`team-a` to `team-d`, xlarge and 2xlarge c/m/r types), a DaemonSet
   on every node, per pool one Deployment with hostname anti-affinity (NODES / 4 replicas: one node
   each) and two Deployments spread over zones (maxSkew 1), 9 x NODES Deployment pods in all;
   provisioner invocations until every pod runs;
2. one interruption wave: a spot interruption warning for 5% of the spot nodes at once, delivered as the
   stack delivers it: the rules put the events in the interruption queue and its event source mapping
   hands the function batches of up to BATCH_SIZE (the layer's `interruption/queue.py`), one invocation
   and one world read per batch, as many batches at a time as the machine has cores (``--at-once``);
   then provisioner and disruption invocations until every pod runs again and the interrupted nodes are gone.
   sim warns the instances as EC2 does and ends each when its two-minute notice runs out (#33.1), pods or no
   pods; its record of the API server's writes gives the figure per warned node (`sim/spotfigure.py`):
   warning -> tainted and cordoned -> first eviction -> last evictable pod gone, against the instance's end,
   from the warning and from its batch's start, and the pods lost, held by a PDB or not reached in time;
3. scale-in of every Deployment to 30%, then disruption (and provisioner) invocations until a run
   decides nothing and nothing is under way ("quiet").

Every disruption invocation is the scheduled one; when the cluster is larger than the split threshold
it fans out one asynchronous invocation per slice of NodePools (`usecases/disrupt/slices.py`). On sim
those Invoke calls are authorized (lambda:InvokeFunction on the function's ARN) and queued by sim's Lambda
(`sim/aws/lambda_service.py`); the slice events are taken from there and run through the handler side by side, each
in a container of its own (as Lambda runs asynchronous invocations), each measured as its own invocation.

Each function runs in warm containers of its own (`bench/containers.py`: a child process per container,
with its own clients and pod cache, started once and reused, as Lambda keeps a container warm); an
event burst runs in as many containers at once as the burst's concurrency.

Per function it prints invocation durations (p50/p95/max) and peak memory against the stack's
timeout and memory (`infra/function_specs.py`), pods' pending time (creation to Ready, simulated clock),
and the API server's load per invocation from sim's counters (`/sim/v1/stats`).

Memory is the container process's peak RSS during the invocation (VmHWM, reset before each through
`/proc/self/clear_refs`): that function's own figure, as Lambda's "Max Memory Used" measures a container.

`python -m bench.scalerun --nodes 10000` (default 10,000); `--nodes 200` for a quick run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import print_lines
from bench.containers import Container, Done
from nodescale.interruption.queue import BATCH_SIZE
from sim import spotfigure
from sim.aws.constants import DEMO_NODECLASS_YAML

NODES = 10_000
POOLS = ("team-a", "team-b", "team-c", "team-d")
WAVE_SHARE = 0.05
# Lambda runs a burst (the wave's batches, a split pass's slices) in parallel containers, each with CPU of
# its own (about 1.7 vCPU at 3008 MB). Here they share the machine's cores: more containers at once than
# cores only queue on the CPU, each invocation's duration stretched by the others' work (5 wave batches
# at once on 2 cores: 338-355 s each for 46-62 s of their own CPU), which on Lambda they would not be.
# So a burst runs this many at a time here; sim/ and moto still serve them all.
BURST_AT_ONCE = os.cpu_count() or 2
SCALE_IN_SHARE = 0.30
NAMESPACE = "scale"
LAMBDA_LIMIT_SECONDS = 900
QUIET_RUNS = 2  # consecutive disruption runs that decide nothing, with nothing under way
PHASES = ("scale-out", "interruption", "scale-in")


def nodepool_text(name: str, cpu_limit: int) -> str:
    """A spot NodePool whose nodes carry `team: <name>`; Karpenter's default budget (10%)."""
    return f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    metadata:
      labels:
        team: {name}
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: ["spot"]}}
        - {{key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}}
        - {{key: kubernetes.io/arch, operator: In, values: ["amd64"]}}
        - {{key: karpenter.k8s.aws/instance-size, operator: In, values: ["xlarge", "2xlarge"]}}
  limits:
    cpu: {cpu_limit}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets:
      - nodes: "10%"
"""


NODECLASS = DEMO_NODECLASS_YAML


def _container(cpu: str, memory: str) -> list[dict[str, Any]]:
    return [{"name": "app", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
             "resources": {"requests": {"cpu": cpu, "memory": memory}}}]


def workloads(nodes: int) -> list[dict[str, Any]]:
    """The DaemonSet and the Deployments for a cluster of about ``nodes`` nodes (10 x ``nodes`` pods)."""
    daemonset = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-agent", "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": {"app": "node-agent"}}, "template": {
            "metadata": {"labels": {"app": "node-agent"}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": _container("100m", "128Mi")}}}}
    out: list[dict[str, Any]] = [daemonset]
    per_pool = max(1, nodes // len(POOLS))
    for pool in POOLS:
        app = f"{pool}-edge"
        out.append(_deployment(app, pool, per_pool, "1", "1Gi", {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": app}}}]}}, None))
        for part in ("api", "worker"):
            app = f"{pool}-{part}"
            spread = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                       "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": app}}}]
            out.append(_deployment(app, pool, 4 * per_pool, "250m", "256Mi", None, spread))
    return out


def _deployment(app: str, pool: str, replicas: int, cpu: str, memory: str, affinity: dict | None,
                spread: list | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "nodeSelector": {"team": pool},
                            "containers": _container(cpu, memory)}
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": spec}}}


# ------------------------------------------------------------------------------------------ measuring


@dataclass
class Invocation:
    function: str
    phase: str
    seconds: float
    peak_rss_mib: float
    rss_before_mib: float
    api: dict[str, int]
    summary: dict[str, Any] = field(repr=False, default_factory=dict)
    # The container's own CPU: what the invocation costs whatever the load on sim's processes.
    cpu_seconds: float = 0.0
    started_at: float = 0.0  # time.time() as the handler was called


@dataclass
class Recorder:
    env: Any
    timeouts: dict[str, int]
    memories: dict[str, int]
    settings: dict[str, str] = field(default_factory=dict)  # the functions' environment, as the stack sets it
    phase: str = "scale-out"
    invocations: list[Invocation] = field(default_factory=list)
    peak_reset_works: bool = True
    batches: list[tuple[str, int, int, dict[str, int]]] = field(default_factory=list)  # function, events, at once, API
    containers: dict[str, list[Container]] = field(default_factory=dict)  # warm ones, per function

    def stats(self, method: str) -> dict[str, Any]:
        url = self.env.kube_url.rstrip("/") + "/sim/v1/stats"
        return _http(method, url)

    def invoke(self, function: str, event: dict[str, Any]) -> dict[str, Any]:
        return self.invoke_many(function, [event], 1)[0]

    def warm(self, function: str, count: int) -> list[Container]:
        """``count`` warm containers of the function (Lambda keeps them between invocations)."""
        pool = self.containers.setdefault(function, [])
        while len(pool) < count:
            pool.append(Container(function, self.settings))
        return pool[:count]

    def close(self) -> None:
        for pool in self.containers.values():
            for container in pool:
                container.close()
        self.containers.clear()

    def retire(self, function: str) -> None:
        """Let the function's warm containers go (Lambda reclaims idle ones): their memory is freed."""
        for container in self.containers.pop(function, []):
            container.close()

    def invoke_many(self, function: str, events: list[dict[str, Any]], concurrency: int,
                    keep_batch: bool = True) -> list[dict[str, Any]]:
        """Run one invocation per event, ``concurrency`` at a time, each in a warm container of its own (as
        Lambda runs an event burst in parallel containers). Durations, CPU and peak memory are each
        invocation's own; the API load is the batch's, split evenly over its invocations."""
        from concurrent.futures import ThreadPoolExecutor
        from queue import Queue

        at_once = max(1, min(concurrency, len(events)))
        idle: Queue[Container] = Queue()
        for container in self.warm(function, at_once):
            idle.put(container)

        def one(index: int) -> Done:
            container = idle.get()
            try:
                return container.invoke(events[index], self.timeouts[function])
            finally:
                idle.put(container)

        self.stats("DELETE")
        if at_once == 1:
            done = [one(i) for i in range(len(events))]
        else:
            with ThreadPoolExecutor(max_workers=at_once, thread_name_prefix=function) as pool:
                done = list(pool.map(one, range(len(events))))
        total = api_load(self.stats("GET"))
        out = []
        for index, result in enumerate(done):
            summary = result.summary if isinstance(result.summary, dict) else {}
            # An even share each, the remainder to the first, so the invocations add up to the batch.
            share = {k: v // len(events) + (v % len(events) if index == 0 else 0) for k, v in total.items()}
            self.invocations.append(Invocation(function, self.phase, result.seconds, result.peak_rss_mib,
                                               result.rss_before_mib, share, summary, result.cpu_seconds,
                                               result.started_at))
            self.peak_reset_works = self.peak_reset_works and result.peak_reset_works
            out.append(summary)
        if len(events) > 1 and keep_batch:
            self.batches.append((function, len(events), at_once, total))
        return out


def _http(method: str, url: str) -> dict[str, Any]:
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        return json.loads(response.read() or b"{}")


def api_load(report: dict[str, Any]) -> dict[str, int]:
    """Requests, objects and bytes listed, full pod lists and watch events, from sim's counters."""
    out = {"requests": 0, "listObjects": 0, "listBytes": 0, "fullPodLists": 0, "watchEvents": 0}
    for resource, verbs in (report.get("resources") or {}).items():
        for verb, counts in verbs.items():
            out["requests"] += counts.get("requests", 0)
            if verb == "list":
                out["listObjects"] += counts.get("objects", 0)
                out["listBytes"] += counts.get("bytes", 0)
                if resource == "pods":
                    out["fullPodLists"] += counts.get("fullLists", 0)
            if verb == "watch":
                out["watchEvents"] += counts.get("events", 0)
    return out


# ------------------------------------------------------------------------------------------- the run


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    done: bool = False
    detail: str = ""


@dataclass
class ScaleRunResult:
    nodes_asked: int
    invocations: list[Invocation]
    phases: list[Phase]
    pending_seconds: list[float]
    peak_nodes: int = 0
    peak_pods: int = 0
    final_nodes: int = 0
    interrupted: int = 0
    peak_reset_works: bool = True
    timeouts: dict[str, int] = field(default_factory=dict)
    memories: dict[str, int] = field(default_factory=dict)
    pool_of: dict[str, str] = field(default_factory=dict)  # every managed node seen -> its NodePool
    batches: list[tuple[str, int, int, dict[str, int]]] = field(default_factory=list)
    crowded: int = 0  # most nodes seen at once holding two Running pods of one hostname anti-affinity Deployment
    spot: list[dict[str, Any]] = field(default_factory=list)  # sim's record of the wave's warned nodes (#33.2)
    batch_started: dict[str, float] = field(default_factory=dict)  # warned node -> its batch's start (sim clock)


class Cluster:
    """The benchmark's own reads (as the administrator): not counted in any invocation's API load."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.api = env.kube_api_client()
        self.pool_of: dict[str, str] = {}  # every managed node seen -> its NodePool

    def get(self, path: str) -> dict[str, Any]:
        from nodescale.k8s.raw import request_json

        return request_json(self.api, "GET", path)

    def pods(self) -> list[dict[str, Any]]:
        return self.get(f"/api/v1/namespaces/{NAMESPACE}/pods").get("items") or []

    def managed_nodes(self) -> list[dict[str, Any]]:
        items = self.get("/api/v1/nodes").get("items") or []
        managed = [n for n in items if "karpenter.sh/nodepool" in (n["metadata"].get("labels") or {})]
        self.pool_of.update({n["metadata"]["name"]: n["metadata"]["labels"]["karpenter.sh/nodepool"] for n in managed})
        return managed

    def create(self, doc: dict[str, Any]) -> None:
        from nodescale.k8s.raw import request_json

        group = "apps/v1"
        plural = "daemonsets" if doc["kind"] == "DaemonSet" else "deployments"
        request_json(self.api, "POST", f"/apis/{group}/namespaces/{NAMESPACE}/{plural}", body=doc)

    def scale(self, name: str, replicas: int) -> None:
        from nodescale.k8s.raw import MERGE_PATCH, request_json

        request_json(self.api, "PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}",
                     body={"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)


def _running(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and bool(pod.get("spec", {}).get("nodeName"))


def crowded_nodes(pods: list[dict[str, Any]]) -> int:
    """Nodes running two or more pods of one of the run's hostname anti-affinity Deployments (``*-edge``)."""
    on_node = Counter((p["metadata"].get("labels", {}).get("app"), p["spec"]["nodeName"]) for p in pods
                      if _running(p) and str(p["metadata"].get("labels", {}).get("app", "")).endswith("-edge"))
    return len({node for (_, node), count in on_node.items() if count > 1})


def _ready_at(pod: dict[str, Any]) -> datetime | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True" and cond.get("lastTransitionTime"):
            return datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00"))
    return None


def _pending_seconds(pods: list[dict[str, Any]], seen: set[str]) -> list[float]:
    """Creation to Ready (simulated clock) of the Running pods not counted before."""
    out = []
    for pod in pods:
        uid = pod["metadata"].get("uid") or pod["metadata"]["name"]
        ready = _ready_at(pod)
        if uid in seen or ready is None or not _running(pod):
            continue
        seen.add(uid)
        created = datetime.fromisoformat(pod["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        out.append(max(0.0, (ready - created).total_seconds()))
    return out


class Run:
    def __init__(self, env: Any, recorder: Recorder, nodes: int, cap_seconds: float,
                 log: Callable[[str], None], at_once: int = BURST_AT_ONCE) -> None:
        self.env, self.rec, self.nodes, self.cap, self.log = env, recorder, nodes, cap_seconds, log
        self.at_once = max(1, at_once)
        self.cluster = Cluster(env)
        self.seen: set[str] = set()
        self.pending: list[float] = []
        self.phases: list[Phase] = []
        self.peak_nodes = self.peak_pods = 0
        self.interrupted = 0
        self.crowded = 0
        self.spot: list[dict[str, Any]] = []
        self.batch_started: dict[str, float] = {}

    # -- the triggers
    def provisioner(self) -> dict[str, Any]:
        from sim import invoke

        return self.rec.invoke("provisioner", invoke.scheduled_tick(rule="provisioner"))

    def disruption(self) -> list[dict[str, Any]]:
        """The scheduled run, then each slice it fanned out (its Invoke calls, which sim authorized and
        queued) through the handler."""
        from sim import invoke

        self.env.lambda_invocations(take=True)  # none left over from an earlier pass
        summaries = [self.rec.invoke("disruption", invoke.scheduled_tick(rule="disruption"))]
        sent = [i["payload"] for i in self.env.lambda_invocations(take=True) if i["function"] == "disruption"]
        if sent:
            # Lambda runs asynchronous invocations at once, each in a container of its own (up to the
            # function's reserved concurrency): here side by side too, as many at a time as BURST_AT_ONCE.
            summaries.extend(self.rec.invoke_many("disruption", sent, self.at_once, keep_batch=False))
        return summaries

    # -- waiting
    def settled(self) -> tuple[int, int]:
        pods = self.cluster.pods()
        self.pending.extend(_pending_seconds(pods, self.seen))
        running = sum(1 for p in pods if _running(p))
        self.peak_pods = max(self.peak_pods, running)
        # What kube-scheduler never does: evidence that sim placed every pod as it would.
        self.crowded = max(self.crowded, crowded_nodes(pods))
        return running, len(pods)

    def until_running(self, phase: Phase, expected: int, with_disruption: bool = False,
                      done: Callable[[], bool] = lambda: True) -> None:
        started = time.monotonic()
        while time.monotonic() - started < self.cap:
            running, total = self.settled()
            if running >= expected and total == running and done():
                phase.done = True
                break
            last = self.provisioner()
            if with_disruption:
                self.disruption()
            launched = sum(len(i.summary.get("launches") or []) for i in self.rec.invocations)
            self.log(f"  {phase.name} {time.monotonic() - started:6.0f} s: {running}/{expected} running, "
                     f"{launched} nodes launched so far; that pass: {_pass_line(last)}")
            self.env.advance(5)
        phase.seconds = time.monotonic() - started
        nodes = len(self.cluster.managed_nodes())
        self.peak_nodes = max(self.peak_nodes, nodes)
        phase.detail = f"{self.settled()[0]} pods Running on {nodes} nodes"

    # -- the phases
    def scale_out(self) -> None:
        phase = Phase("scale-out")
        self.phases.append(phase)
        self.rec.phase = phase.name
        docs = workloads(self.nodes)
        for doc in docs:
            self.cluster.create(doc)
        replicas = sum(d["spec"].get("replicas", 0) for d in docs if d["kind"] == "Deployment")
        # The DaemonSet's pods follow the nodes: done when the Deployments' pods run and no pod is pending.
        self.until_running(phase, replicas)
        phase.detail += f"; DaemonSet pods Running on {self.daemon_coverage()}"

    def daemon_coverage(self) -> str:
        nodes = {n["metadata"]["name"] for n in self.cluster.managed_nodes()}
        daemon = {p["spec"].get("nodeName") for p in self.cluster.pods()
                  if p["metadata"]["name"].startswith("node-agent") and _running(p)}
        return f"{len(nodes & daemon)} of {len(nodes)} nodes"

    def interruption_wave(self) -> None:
        from sim import invoke

        phase = Phase("interruption")
        self.phases.append(phase)
        self.rec.phase = phase.name
        spot = [n for n in self.cluster.managed_nodes()
                if (n["metadata"].get("labels") or {}).get("karpenter.sh/capacity-type") == "spot"]
        wave = spot[:: max(1, round(1 / WAVE_SHARE))][: max(1, int(len(spot) * WAVE_SHARE))]
        self.interrupted = len(wave)
        names = {n["metadata"]["name"] for n in wave}
        started = time.monotonic()
        # EC2 reclaims them: sim warns each now and ends it when its two-minute notice runs out (#33.1).
        warnings = self.env.spot_interruptions([node["spec"]["providerID"].rsplit("/", 1)[-1] for node in wave])
        events = [invoke.event_for_instance("spot-interruption-warning.json", w["instanceId"],
                                            when=datetime.fromisoformat(w["time"].replace("Z", "+00:00")))
                  for w in warnings]
        # As the queue's event source mapping hands them over: batches of the stack's batch size, each one
        # invocation (the layer's constant: the bench does not import aws_cdk).
        chunks = [warnings[i:i + BATCH_SIZE] for i in range(0, len(warnings), BATCH_SIZE)]
        batches = [invoke.sqs_batch(events[i:i + BATCH_SIZE]) for i in range(0, len(events), BATCH_SIZE)]

        # The simulated clock runs with the wall clock while the batches are handled (nothing advances it).
        wall, elapsed = time.time(), self.env.clock()["elapsedSeconds"]
        responses = self.rec.invoke_many("interruption", batches, self.at_once)
        for chunk, invocation in zip(chunks, self.rec.invocations[-len(batches):], strict=True):
            # A batch starts as its handler is called (a new container's init phase, imports, comes before).
            self.batch_started.update({w["node"]: elapsed + invocation.started_at - wall for w in chunk if w["node"]})
        # Records the function returned to the queue (none expected: a retry would be another invocation).
        failed = sum(len(r.get("batchItemFailures") or []) for r in responses)
        self.rec.retire("interruption")  # no more events: the containers go idle and Lambda reclaims them
        # The figure is whole once every warned instance has ended: print it now, since the wait for every pod to
        # run again can take far longer than the wave on a loaded machine (and may be stopped).
        self.spot = self.env.spot_notices_ended()
        for line in spotfigure.lines("spot notices", self.spot, self.batch_started):
            self.log(f"  {line}")
        # The Deployments' pods, not every pod: the DaemonSet's go with their nodes, and consolidation may
        # remove nodes while the wave is handled (a count of every pod would never be reached again).
        expected = sum(d["spec"].get("replicas", 0) for d in workloads(self.nodes) if d["kind"] == "Deployment")

        def gone() -> bool:
            return not names & {n["metadata"]["name"] for n in self.cluster.managed_nodes()}

        self.until_running(phase, expected, with_disruption=True, done=gone)
        phase.seconds = time.monotonic() - started
        phase.detail += (f"; {len(wave)} of {len(spot)} spot nodes interrupted in {len(batches)} batches"
                         f"{f', {failed} records returned to the queue' if failed else ''}")

    def scale_in(self) -> None:
        phase = Phase("scale-in and consolidation")
        self.phases.append(phase)
        self.rec.phase = "scale-in"
        for doc in workloads(self.nodes):
            if doc["kind"] == "Deployment":
                self.cluster.scale(doc["metadata"]["name"], max(1, int(doc["spec"]["replicas"] * SCALE_IN_SHARE)))
        started = time.monotonic()
        quiet = 0
        while time.monotonic() - started < self.cap:
            self.env.advance(35)  # past consolidateAfter (30 s)
            summaries = self.disruption()
            self.provisioner()
            # Busy: a decision taken, a drain or termination under way, a replacement awaited, or a node just
            # found empty (its consolidateAfter has started: the next runs remove it).
            busy = any(s.get("decisions") or s.get("terminations") or s.get("waitingForReplacement")
                       or s.get("emptySince") for s in summaries)
            quiet = 0 if busy else quiet + 1
            nodes = len(self.cluster.managed_nodes())
            self.log(f"  scale-in {time.monotonic() - started:6.0f} s: {nodes} nodes, "
                     f"{'busy' if busy else f'quiet {quiet}/{QUIET_RUNS}'}")
            if quiet >= QUIET_RUNS:
                running, total = self.settled()
                phase.done = running == total
                break
        phase.seconds = time.monotonic() - started
        phase.detail = f"{self.settled()[0]} pods Running on {len(self.cluster.managed_nodes())} nodes"


def _pass_line(summary: dict[str, Any]) -> str:
    """What one provisioner invocation did with the pods it planned: the over-launch of a burst shows here."""
    launches = summary.get("launches") or []
    # Which Deployments the launches were for (a pod's name is its ReplicaSet's and a suffix).
    apps = Counter(key.split("/")[-1].rsplit("-", 2)[0] for launch in launches for key in launch.get("pods") or [])
    top = ", ".join(f"{app} {n}" for app, n in apps.most_common(4))
    return (f"{summary.get('podsSeen', 0)} pods planned, {len(launches)} launched"
            f"{f' (for {top})' if top else ''}, "
            f"{summary.get('waitingForInFlight', 0)} waiting for nodes in flight, "
            f"{summary.get('placedOnExisting', 0)} placed on existing nodes, "
            f"{len(summary.get('unschedulable') or [])} unschedulable")


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


@contextlib.contextmanager
def sim_world(directory: Path, nodes: int, slice_nodes: int | None = None) -> Iterator[tuple[Any, dict[str, str]]]:
    """A fresh sim/ environment with the NodePools, and the functions' settings as the stack deploys them
    (``slice_nodes``: NODESCALE_DISRUPTION_SLICE_NODES, the functions' default when None)."""
    from nodescale.k8s.raw import request_json
    from nodescale.settings import DISRUPTION_SLICE_NODES
    from sim.environment import Environment

    extra = {} if slice_nodes is None else {DISRUPTION_SLICE_NODES: str(slice_nodes)}
    with Environment(directory, ready_delay=1.0) as env:
        settings = {**env.env, "NODESCALE_PROVISIONER_MODE": "poll", "POWERTOOLS_METRICS_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "ERROR", "LOG_LEVEL": "ERROR", **extra}
        ssm = env.boto3_client("ssm")
        path = env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/")
        ssm.put_parameter(Name=f"{path}/nodeclass", Value=NODECLASS, Type="String", Overwrite=True)
        for pool in POOLS:
            ssm.put_parameter(Name=f"{path}/{pool}", Value=nodepool_text(pool, 40 * nodes), Type="String",
                              Overwrite=True)
        request_json(env.kube_api_client(), "POST", "/api/v1/namespaces",
                     body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        yield env, settings


def function_limits(memory: str | None = None, timeout: str | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """The stack's timeout and memory per function (infra/function_specs.py), with the overrides a deploy would
    give (``memory``/``timeout`` as `-c functionMemory=...` / `-c functionTimeout=...` take them).
    Raises infra.config.ConfigError for an override the stack would refuse."""
    from infra.config import _MEMORY_MB, _TIMEOUT_SECONDS, _function_sizes
    from infra.function_specs import FUNCTION_SPECS

    memories = _function_sizes(memory, "functionMemory", _MEMORY_MB, "MB")
    timeouts = _function_sizes(timeout, "functionTimeout", _TIMEOUT_SECONDS, "seconds")
    return ({s.name: timeouts.get(s.name, s.timeout_seconds) for s in FUNCTION_SPECS},
            {s.name: memories.get(s.name, s.memory_mb) for s in FUNCTION_SPECS})


def scale_run(nodes: int, cap_seconds: float = 3600.0, log: Callable[[str], None] = lambda _: None,
              directory: Path | None = None, slice_nodes: int | None = None,
              after_phase: Callable[[ScaleRunResult], None] = lambda _: None,
              limits: tuple[dict[str, int], dict[str, int]] | None = None,
              at_once: int = BURST_AT_ONCE, through: str = PHASES[-1]) -> ScaleRunResult:
    """The three phases; ``after_phase`` gets the result so far after each (a long run that is stopped
    still leaves the figures of the phases it finished)."""
    timeouts, memories = limits or function_limits()
    with contextlib.ExitStack() as stack:
        workdir = directory or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scalerun-")))
        env, settings = stack.enter_context(sim_world(workdir, nodes, slice_nodes))
        recorder = Recorder(env, timeouts, memories, settings)
        stack.callback(recorder.close)
        run = Run(env, recorder, nodes, cap_seconds, log, at_once)

        def result() -> ScaleRunResult:
            return ScaleRunResult(
                nodes, recorder.invocations, run.phases, run.pending, run.peak_nodes, run.peak_pods,
                len(run.cluster.managed_nodes()), run.interrupted, recorder.peak_reset_works, timeouts, memories,
                run.cluster.pool_of, recorder.batches, run.crowded, run.spot, run.batch_started)

        for phase in (run.scale_out, run.interruption_wave, run.scale_in)[:PHASES.index(through) + 1]:
            if run.phases and not run.phases[-1].done:
                break
            phase()
            after_phase(result())
        return result()


# ------------------------------------------------------------------------------------------- report


def function_figures(result: ScaleRunResult) -> dict[str, dict[str, Any]]:
    """Per function: invocations, duration p50/p95/max, peak RSS max, API load per invocation, and the verdict."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({i.function for i in result.invocations}):
        mine = [i for i in result.invocations if i.function == name]
        seconds = [i.seconds for i in mine]
        peak = max(i.peak_rss_mib for i in mine)
        timeout, memory = result.timeouts[name], result.memories[name]
        out[name] = {
            "invocations": len(mine),
            "p50": statistics.median(seconds), "p95": _percentile(seconds, 0.95), "max": max(seconds),
            "cpuP50": statistics.median(i.cpu_seconds for i in mine), "cpuMax": max(i.cpu_seconds for i in mine),
            "peakRssMiB": peak, "timeout": timeout, "memory": memory,
            "withinTimeout": max(seconds) < timeout, "withinMemory": peak < memory,
            "requestsMax": max(i.api["requests"] for i in mine),
            "listObjectsMax": max(i.api["listObjects"] for i in mine),
            "listBytesMax": max(i.api["listBytes"] for i in mine),
            "fullPodListsMax": max(i.api["fullPodLists"] for i in mine),
            "fullPodListsTotal": sum(i.api["fullPodLists"] for i in mine),
        }
    return out


def report_lines(result: ScaleRunResult) -> Iterator[str]:
    head = f"scale run ({result.nodes_asked:,} nodes asked)"
    yield (f"{head}: peak {result.peak_nodes:,} nodes and {result.peak_pods:,} pods Running; "
           f"{result.interrupted} spot nodes interrupted at once; {result.final_nodes:,} nodes at the end; "
           f"{result.crowded} nodes ever held two pods of one hostname anti-affinity Deployment")
    for phase in result.phases:
        yield f"{head}: {phase.name}: {'done' if phase.done else 'NOT done'} in {phase.seconds:.0f} s wall ({phase.detail})"
    fanned = [i for i in result.invocations if i.function == "disruption" and len(i.summary.get("slices") or []) > 1]
    sliced = [i for i in result.invocations if i.function == "disruption" and len(i.summary.get("slices") or []) == 1]
    if fanned:
        yield (f"{head}: disruption: {len(fanned)} scheduled passes split into "
               f"{max(len(i.summary['slices']) for i in fanned)} slices of NodePools; {len(sliced)} slice invocations, "
               f"{max(i.seconds for i in sliced):.1f} s the longest")
    for function, count, at_once, api in result.batches:
        yield (f"{head}: {function}: {count} events, {at_once} at a time: {api['requests']:,} API requests, "
               f"{api['listObjects']:,} objects and {api['listBytes'] / 2**20:.1f} MiB listed, "
               f"{api['fullPodLists']} full pod lists in all (each new container lists once)")
    if result.spot:
        yield from spotfigure.lines(f"{head}: spot notices", result.spot, result.batch_started)
    pending = result.pending_seconds
    yield (f"{head}: pods pending (creation to Ready, simulated clock): p50 {_percentile(pending, 0.5):.0f} s, "
           f"p95 {_percentile(pending, 0.95):.0f} s over {len(pending):,} pods")
    memory_how = "peak RSS of its container during the invocation" if result.peak_reset_works else \
        "peak RSS of its container so far (VmHWM could not be reset)"
    for name, f in function_figures(result).items():
        verdict = "within" if f["withinTimeout"] and f["withinMemory"] else "NOT within"
        yield (f"{head}: {name}: {f['invocations']} invocations, {f['p50']:.1f} / {f['p95']:.1f} / {f['max']:.1f} s "
               f"(p50/p95/max; timeout {f['timeout']} s; the handler's own CPU p50 {f['cpuP50']:.1f} s, max "
               f"{f['cpuMax']:.1f} s), {f['peakRssMiB']:.0f} MiB ({memory_how}; "
               f"memory {f['memory']} MB): {verdict} the stack's limits; API per invocation at most "
               f"{f['requestsMax']:,} requests, {f['listObjectsMax']:,} objects and "
               f"{f['listBytesMax'] / 2**20:.1f} MiB listed, {f['fullPodListsMax']} full pod lists "
               f"({f['fullPodListsTotal']} in all)")


def write_json(path: Path, nodes: int, result: ScaleRunResult) -> None:
    path.write_text(json.dumps({
        "nodes": nodes, "functions": function_figures(result),
        "phases": [vars(p) for p in result.phases], "crowdedNodes": result.crowded,
        "finalNodes": result.final_nodes, "spotInterruptions": result.spot, "batchStarted": result.batch_started,
        "invocations": [{k: v for k, v in vars(i).items() if k != "summary"} for i in result.invocations],
    }, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scalerun", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=NODES, help="about how many nodes (10 pods each)")
    parser.add_argument("--cap", type=float, default=3600.0, help="wall seconds each phase may take")
    parser.add_argument("--json", help="also write the invocations here")
    parser.add_argument("--slice-nodes", type=int, help="NODESCALE_DISRUPTION_SLICE_NODES (default: the functions')")
    parser.add_argument("--function-memory", metavar="F=MB,...",
                        help="the memory deployed, as `cdk deploy -c functionMemory=...` sets it")
    parser.add_argument("--function-timeout", metavar="F=SECONDS,...",
                        help="the timeouts deployed, as `cdk deploy -c functionTimeout=...` sets them")
    parser.add_argument("--at-once", type=int, default=BURST_AT_ONCE,
                        help="containers of a burst (wave batches, slices) run at a time (default: the machine's cores)")
    parser.add_argument("--through", choices=PHASES, default=PHASES[-1],
                        help="the last phase to run (e.g. interruption: the wave's figure without the scale-in)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if args.at_once < 1:
        parser.error(f"--at-once {args.at_once}: allowed is 1 or more")
    if args.nodes < 4:
        parser.error(f"--nodes {args.nodes}: allowed is 4 or more")
    from infra.config import ConfigError

    try:
        limits = function_limits(args.function_memory, args.function_timeout)
    except ConfigError as exc:
        parser.error(str(exc).replace("functionMemory", "--function-memory").replace("functionTimeout",
                                                                                     "--function-timeout"))
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    log = (lambda _: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.monotonic()

    def keep(partial: ScaleRunResult) -> None:
        for line in report_lines(partial):
            log("  so far: " + line)
        if args.json:
            write_json(Path(args.json), args.nodes, partial)

    result = scale_run(args.nodes, args.cap, log, slice_nodes=args.slice_nodes, after_phase=keep, limits=limits,
                       at_once=args.at_once, through=args.through)
    log(f"scale run: {time.monotonic() - started:.0f} s wall in all; load average at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print_lines(lambda: report_lines(result))
    if args.json:
        write_json(Path(args.json), args.nodes, result)
    return 0 if all(p.done for p in result.phases) and len(result.phases) == PHASES.index(args.through) + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
