"""`make demo`: the story a new user tries first, end to end on a local sim/ environment.

The default spot NodePool (Karpenter v1alpha5 example), `inflate` at 0 replicas and a
PodDisruptionBudget that keeps 4 of its pods running; scale to 5 and capacity is launched and the
pods run; a spot interruption warning arrives for that node, a replacement comes up and the pods
move, one at a time as the budget allows; scale to 0 and the empty node goes after its TTL.

The real handlers run, invoked the way their triggers would invoke them: the provisioner on its
schedule (watch mode, in the background), the interruption function with the EventBridge event,
the disruption function on its schedule. What the timeline and the chart show is read from the
environment (sim/demo_evidence.py): EC2 calls as sim's AWS proxy logged them, the events the product
recorded, the pods. Exit status 0 only if every step of the story happened.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from nodescale.k8s.raw import request_json
from sim import invoke
from sim.demo_evidence import Observer
from sim.environment import Environment
from sim.prepare import prepare
from sim.report import Chart, Timeline, write_html

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
NAMESPACE = "default"
DEPLOYMENT = "inflate"
PDB = "inflate-pdb"
REPLICAS = 5
EMPTY_TTL_SECONDS = 30  # ttlSecondsAfterEmpty of the default-spot example
PROGRESS_SECONDS = 3.0  # while waiting, say so this often


class StoryFailed(RuntimeError):
    """A step of the story did not happen in time."""


class Demo:
    def __init__(self, env: Environment, timeline: Timeline) -> None:
        from kubernetes import client as k8s

        self.env = env
        self.timeline = timeline
        self.api = api = env.kube_api_client()
        self.core = k8s.CoreV1Api(api)
        self.apps = k8s.AppsV1Api(api)
        self.ssm = env.boto3_client("ssm")
        self.min_available = int(_pdb_manifest()["spec"]["minAvailable"])
        self.observer = Observer(env, timeline, api, NAMESPACE, DEPLOYMENT, PDB)
        self.marks: list[tuple[float, str]] = []
        self.unpriced: list[tuple[str, float, str]] = []  # (instance, price, reporter) not yet matched to a launch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.warm = threading.Event()  # the provisioner has finished one invocation
        self.pending_since: float | None = None
        self.running_at: float | None = None
        self.pdb_held = ""

    # ------------------------------------------------------------------ world
    def pods(self) -> list[Any]:
        return self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={DEPLOYMENT}").items

    def running_pods(self) -> list[Any]:
        return [p for p in self.pods() if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    def nodes(self) -> list[Any]:
        return [n for n in self.core.list_node().items if (n.metadata.labels or {}).get("karpenter.sh/nodepool")
                or (n.metadata.labels or {}).get("karpenter.sh/provisioner-name")]

    def instance_state(self, instance_id: str) -> str:
        found = self.observer.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return found[0]["Instances"][0]["State"]["Name"] if found else "gone"

    def wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        """Until `check()`; says every few seconds what it is waiting for, so no silence looks like a hang."""
        started = time.monotonic()
        deadline, next_word = started + timeout, started + PROGRESS_SECONDS
        while time.monotonic() < deadline:
            if check():
                return
            if time.monotonic() >= next_word:
                print(f"[{self.timeline.elapsed():6.1f}s]   ... waiting for {what} "
                      f"({time.monotonic() - started:.0f}s so far)", flush=True)
                next_word += PROGRESS_SECONDS
            time.sleep(0.25)
        raise StoryFailed(f"{what}: not within {timeout:.0f}s")

    def mark(self, label: str) -> None:
        self.marks.append((round(self.timeline.elapsed(), 3), label))

    # ------------------------------------------------------------- background
    def start_background(self) -> None:
        self.observer.start()
        self._thread = threading.Thread(target=self._provisioner_schedule, name="provisioner", daemon=True)
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.observer.stop()
        self._match_prices()

    def _provisioner_schedule(self) -> None:
        # The one-minute schedule starts a watch-mode invocation; here each one watches a few seconds.
        while not self._stop.is_set():
            try:
                summary = invoke.invoke("provisioner", invoke.scheduled_tick(rule="provisioner"), timeout_seconds=20)
            except Exception as exc:  # the story reports it; the schedule keeps ticking like Lambda's would
                self.timeline.log("provisioner invocation failed", f"{type(exc).__name__}: {exc}")
                time.sleep(1)
                continue
            self.note_launches(summary, "the provisioner")
            self.warm.set()

    def note_launches(self, summary: Any, reporter: str) -> None:
        """What a product summary says of its launches: for which pods, and the price the chart adds up."""
        for launch in (summary or {}).get("launches", []) if isinstance(summary, dict) else []:
            iid, price = launch.get("instanceId", ""), float(launch.get("price") or 0.0)
            if not iid:
                continue
            self.timeline.log(
                f"{reporter} reported {iid}: {launch.get('instanceType')}, {launch.get('capacityType')}",
                f"nodepool {launch.get('nodePool')}, ${price:.4f}/h, for {len(launch.get('pods') or [])} pod(s)",
            )
            if not self.observer.note_price(iid, price, reporter):
                self.unpriced.append((iid, price, reporter))

    def _match_prices(self) -> None:
        left = [(i, p, r) for i, p, r in self.unpriced if not self.observer.note_price(i, p, r)]
        self.unpriced = left

    # ---------------------------------------------------------------- steps
    def configure(self) -> None:
        path = self.env.env["NODESCALE_NODEPOOL_PARAMETER_PATH"].rstrip("/") + "/default"
        text = (EXAMPLES / "karpenter-v1alpha5" / "default-spot.yaml").read_text()
        self.ssm.put_parameter(Name=path, Value=text, Type="String", Overwrite=True)
        self.timeline.log("NodePool 'default' written to SSM", f"{path}: v1alpha5 Provisioner + AWSNodeTemplate, spot only")
        body = yaml.safe_load((EXAMPLES / "workloads" / "inflate.yaml").read_text())
        body["spec"]["replicas"] = 0
        # Sent as written (`cpu: 1`), the way kubectl would; the typed client would refuse the bare number.
        request_json(self.api, "POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", body=body)
        self.timeline.log("deployment inflate created with 0 replicas", f"{REPLICAS} x 1 CPU once scaled")
        request_json(self.api, "POST", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
                     body=_pdb_manifest())
        self.timeline.log(f"PodDisruptionBudget {PDB} created", f"minAvailable {self.min_available}: "
                          f"a drain may take one of the {REPLICAS} pods down at a time")

    def scale(self, replicas: int) -> None:
        self.apps.patch_namespaced_deployment_scale(DEPLOYMENT, NAMESPACE, {"spec": {"replicas": replicas}})
        self.timeline.log(f"inflate scaled to {replicas}")
        self.mark(f"scaled to {replicas}")

    def scale_out(self) -> None:
        # On its schedule the provisioner is always warm; the story starts once it has run once.
        self.timeline.log("waiting for the provisioner's first scheduled run", "a watch-mode invocation, 3 s of watching")
        self.wait("the provisioner's first run to finish", self.warm.is_set, 60)
        self.timeline.log("the provisioner has run once")
        self.pending_since = self.timeline.elapsed()
        self.scale(REPLICAS)
        self.wait(f"{REPLICAS} inflate pods Running", lambda: len(self.running_pods()) == REPLICAS, 90)
        self.running_at = self.timeline.elapsed()
        nodes = sorted({p.spec.node_name for p in self.running_pods()})
        self.timeline.log(
            f"all {REPLICAS} pods Running on {', '.join(nodes)}",
            f"{self.running_at - self.pending_since:.1f}s from pending to running",
        )

    def interrupt(self) -> None:
        node_name = self.running_pods()[0].spec.node_name
        iid = self.core.read_node(node_name).spec.provider_id.rsplit("/", 1)[-1]
        now = datetime.fromisoformat(self.env.clock()["now"].replace("Z", "+00:00"))
        event = invoke.event_for_instance("spot-interruption-warning.json", iid, when=now)
        started = self.timeline.elapsed()
        self.timeline.log(f"spot interruption warning for {iid} ({node_name})", "EC2 reclaims it in 2 minutes")
        self.mark("spot interruption warning")
        self.observer.narrate = True  # the drain, pod by pod, as the budget lets it
        try:
            summary = invoke.invoke("interruption", event, timeout_seconds=60)
            self.note_launches(_replacement_launches(summary), "the interruption function")
            self.timeline.log("the interruption function returned", _describe(summary))
            self.wait("the pods to move off the interrupted node", lambda: self._moved_off(node_name), 120)
            self.timeline.log("pods moved", f"all {REPLICAS} Running on {sorted({p.spec.node_name for p in self.running_pods()})}")
            # A drain that outlived the invocation is finished by the next scheduled disruption run.
            self.wait(
                f"interrupted instance {iid} terminated and its node deleted",
                lambda: self._run_disruption_until(lambda: self.instance_state(iid) in ("terminated", "gone")
                                                   and not self._node_exists(node_name)),
                90,
            )
        finally:
            self.observer.narrate = False
        self.observer.poll()
        self.pdb_held = self._pdb_evidence(node_name, started)
        self.timeline.log(f"{iid} terminated, node {node_name} deleted", self.pdb_held)

    def _moved_off(self, node_name: str) -> bool:
        running = self.running_pods()
        return len(running) == REPLICAS and all(p.spec.node_name != node_name for p in running)

    def _pdb_evidence(self, node_name: str, started: float) -> str:
        """That the budget held the drain, from what was recorded: the product's DisruptionBlocked events
        for the interrupted node's pods, and the pods that kept running throughout."""
        blocked = self.observer.pdb_blocked_pods()
        if not blocked:
            raise StoryFailed(f"no DisruptionBlocked event: PodDisruptionBudget {PDB} never held the drain of {node_name}")
        fewest = self.observer.min_running(started, self.timeline.elapsed())
        if fewest is None or fewest < self.min_available:
            raise StoryFailed(f"PodDisruptionBudget {PDB} broken: {fewest} pod(s) running during the drain, "
                              f"minAvailable {self.min_available}")
        return (f"drained first: PDB {PDB} refused the eviction of {len(blocked)} pod(s) until replacements ran "
                f"(DisruptionBlocked events); never fewer than {fewest} of {REPLICAS} pods running")

    def scale_in(self) -> None:
        self.scale(0)
        self.wait("inflate pods gone", lambda: not self.pods(), 60)
        node_names = [n.metadata.name for n in self.nodes()]
        ids = [n.spec.provider_id.rsplit("/", 1)[-1] for n in self.nodes()]
        summary = invoke.invoke("disruption", invoke.scheduled_tick(rule="disruption"), timeout_seconds=60)
        self.timeline.log("disruption run: empty nodes noticed", _describe(summary))
        early = [n for n in node_names if not self._node_exists(n)]
        if early:
            raise StoryFailed(f"nodes {early} were removed before their {EMPTY_TTL_SECONDS}s TTL")
        self.env.advance(EMPTY_TTL_SECONDS + 1)
        self.timeline.log(f"{EMPTY_TTL_SECONDS + 1}s of simulated time pass", "ttlSecondsAfterEmpty: 30")
        self.mark(f"+{EMPTY_TTL_SECONDS + 1}s simulated")
        self.wait(
            "empty nodes removed after their TTL",
            lambda: self._run_disruption_until(lambda: not any(self._node_exists(n) for n in node_names)),
            90,
        )
        self.wait("their instances terminated", lambda: all(self.instance_state(i) in ("terminated", "gone") for i in ids), 60)
        self.timeline.log(f"empty node(s) {', '.join(node_names)} removed", "empty for longer than ttlSecondsAfterEmpty")

    def _run_disruption_until(self, done: Callable[[], bool]) -> bool:
        if done():
            return True
        summary = invoke.invoke("disruption", invoke.scheduled_tick(rule="disruption"), timeout_seconds=60)
        self.note_launches(_replacement_launches(summary), "the disruption function")
        return done()

    def _node_exists(self, name: str) -> bool:
        return any(n.metadata.name == name for n in self.core.list_node().items)

    def check_observed(self) -> None:
        """Every launch was seen as a CreateFleet call, priced by the product, and terminated by the end."""
        launches = self.observer.launches
        if self.unpriced:
            raise StoryFailed(f"no CreateFleet call seen for reported launches {[i for i, _, _ in self.unpriced]}")
        unpriced = sorted(i for i, launch in launches.items() if launch.price is None)
        if unpriced:
            raise StoryFailed(f"no price reported for {unpriced}")
        running = sorted(set(launches) - set(self.observer.terminations))
        if running:
            raise StoryFailed(f"instances still running at the end: {running}")

    def summary(self) -> dict[str, Any]:
        chart = self.observer.chart(self.marks, self.min_available)
        price = next(s for s in chart.series if s.key == "price")
        launches = list(self.observer.launches.values())
        return {
            "seconds from pending to running": (
                f"{self.running_at - self.pending_since:.1f}" if self.running_at and self.pending_since else "n/a"
            ),
            "instances launched (CreateFleet)": len(launches),
            "instances terminated": len(self.observer.terminations),
            "peak price per hour": f"${max((v for _, v in price.points), default=0.0):.4f}",
            "PodDisruptionBudget": self.pdb_held or "not shown to hold",
            "instance types": ", ".join(sorted({launch.instance_type for launch in launches})),
            "story time": f"{self.timeline.elapsed():.1f}s",
            "set-up before the story": f"{self.timeline.setup_seconds:.1f}s",
        }


def _pdb_manifest() -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLES / "workloads" / "inflate-pdb.yaml").read_text()))


def _replacement_launches(summary: Any) -> dict[str, Any]:
    """The launches an interruption or disruption summary reports, in the provisioner's shape."""
    launches: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "instanceId" in value and "instanceType" in value and "price" in value:
                launches.append(value)
                return
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(summary)
    return {"launches": launches}


def _describe(summary: Any) -> str:
    """One line a person can read from a handler's summary."""
    if not isinstance(summary, dict):
        return str(summary)[:200]
    parts: list[str] = []
    for inst in summary.get("instances") or []:
        launched = [x.get("instanceId") for x in _replacement_launches(inst.get("replacement"))["launches"]]
        text = f"{inst.get('node') or inst.get('instanceId')}: {inst.get('action')}"
        if inst.get("reason"):
            text += f" ({inst['reason']})"
        if launched:
            text += f", replacement {', '.join(launched)}"
        if "podsEvicted" in inst:
            text += f", {inst['podsEvicted']} pod(s) evicted"
        if inst.get("podsBlockedByPdb"):
            text += f", {len(inst['podsBlockedByPdb'])} held by PDBs for now"
        parts.append(text)
    for d in summary.get("decisions") or []:
        parts.append(f"{d.get('reason')}: {', '.join(d.get('nodes') or [])} ({d.get('detail', '')})")
    for t in summary.get("terminations") or []:
        parts.append(f"{t.get('node')}: {t.get('state')}")
    return "; ".join(parts) or "nothing to do yet"


def _play(demo: Demo) -> None:
    """The story, step by step; raises StoryFailed (or anything else) when a step did not happen."""
    demo.timeline.begin_story()  # the chart's time axis starts here, whatever the set-up took
    try:
        demo.configure()
        demo.start_background()
        demo.scale_out()
        demo.interrupt()
        demo.scale_in()
    finally:
        demo.stop_background()
    demo.check_observed()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="demo-report.html", help="where to write the HTML report (and its .json)")
    parser.add_argument("--dir", help="sim/ state directory (default: a temporary one)")
    args = parser.parse_args(argv)

    timeline = Timeline("nodescale demo: inflate on the default spot NodePool")
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="nodescale-demo-"))
    env = Environment(workdir, ready_delay=2.0)
    demo: Demo | None = None
    failed: str | None = None
    try:
        # A fresh clone builds for minutes before sim can start: each step is said, with its time.
        prepare(env.cluster, env.region, timeline.log)
        timeline.log("starting sim/ (moto + local Kubernetes API)", str(workdir))
        env.start()
        # The handlers run with the settings the stack would give them, pointed at sim/. Quiet, readable
        # output: the timeline is the story; metrics and info logs would drown it.
        with invoke.product_environment(
            env.env,
            NODESCALE_PROVISIONER_MODE="watch",
            NODESCALE_WATCH_SECONDS="3",
            POWERTOOLS_METRICS_DISABLED="true",
            POWERTOOLS_LOG_LEVEL="ERROR",
            LOG_LEVEL="ERROR",
        ):
            timeline.log("sim/ is up", f"cluster {env.env['CLUSTER_NAME']}, API {env.kube_url}")
            demo = Demo(env, timeline)
            _play(demo)
    except StoryFailed as exc:
        failed = str(exc)
    except Exception as exc:  # any other failure is still a story that did not happen, told in one line
        failed = f"{type(exc).__name__}: {exc}"
    finally:
        env.stop()
    if failed:
        timeline.log("the story did not happen", failed)
    timeline.log("sim/ stopped")
    return _report(Path(args.report).resolve(), timeline, demo, failed)


def _report(path: Path, timeline: Timeline, demo: Demo | None, failed: str | None) -> int:
    summary: dict[str, Any] = demo.summary() if demo else {}
    summary["result"] = "FAILED: " + failed if failed else "the story happened"
    chart = demo.observer.chart(demo.marks, demo.min_available) if demo else Chart([], 1.0)
    facts = demo.observer.facts() if demo else {}
    report = write_html(path, timeline, summary, chart, facts)
    print("\nSummary")
    for key, value in summary.items():
        print(f"  {key:34} {value}")
    print(f"\nReport: {report} (data: {report.with_suffix('.json').name})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
