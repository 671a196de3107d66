"""`make demo`: the story a new user tries first, end to end on a local sim/ environment.

The default spot NodePool (Karpenter v1alpha5 example) and `inflate` at 0 replicas; scale to 5 and
capacity is launched and the pods run; a spot interruption warning arrives for that node, a
replacement comes up and the pods move; scale to 0 and the empty node goes after its TTL.

The real handlers run, invoked the way their triggers would invoke them: the provisioner on its
schedule (watch mode, in the background), the interruption function with the EventBridge event,
the disruption function on its schedule. Exit status 0 only if every step of the story happened.
"""

from __future__ import annotations

import argparse
import logging
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
from sim.environment import Environment
from sim.report import Timeline, write_html

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
NAMESPACE = "default"
DEPLOYMENT = "inflate"
REPLICAS = 5
EMPTY_TTL_SECONDS = 30  # ttlSecondsAfterEmpty of the default-spot example


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
        self.ec2 = env.boto3_client("ec2")
        self.ssm = env.boto3_client("ssm")
        self.prices: dict[str, float] = {}  # instance id -> $/hour, from the launches
        self.launched: list[dict[str, Any]] = []
        self.removed: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.pending_since: float | None = None
        self.warm = threading.Event()  # the provisioner has finished one invocation
        self.running_at: float | None = None

    # ------------------------------------------------------------------ world
    def pods(self) -> list[Any]:
        return self.core.list_namespaced_pod(NAMESPACE, label_selector=f"app={DEPLOYMENT}").items

    def running_pods(self) -> list[Any]:
        return [p for p in self.pods() if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    def nodes(self) -> list[Any]:
        return [n for n in self.core.list_node().items if (n.metadata.labels or {}).get("karpenter.sh/nodepool")]

    def instance_state(self, instance_id: str) -> str:
        found = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return found[0]["Instances"][0]["State"]["Name"] if found else "gone"

    def price_now(self) -> float:
        total = 0.0
        for node in self.nodes():
            iid = (node.spec.provider_id or "").rsplit("/", 1)[-1]
            total += self.prices.get(iid, 0.0)
        return total

    def wait(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.25)
        raise StoryFailed(f"{what}: not within {timeout:.0f}s")

    # ------------------------------------------------------------- background
    def start_background(self) -> None:
        self._threads = [
            threading.Thread(target=self._provisioner_schedule, name="provisioner", daemon=True),
            threading.Thread(target=self._sampler, name="sampler", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop_background(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _provisioner_schedule(self) -> None:
        # The one-minute schedule starts a watch-mode invocation; here each one watches a few seconds.
        while not self._stop.is_set():
            try:
                summary = invoke.invoke("provisioner", invoke.scheduled_tick(rule="provisioner"), timeout_seconds=20)
            except Exception as exc:  # the story reports it; the schedule keeps ticking like Lambda's would
                self.timeline.log("provisioner invocation failed", f"{type(exc).__name__}: {exc}")
                time.sleep(1)
                continue
            self.note_launches(summary, "pending pods")
            self.warm.set()

    def note_launches(self, summary: Any, why: str) -> None:
        for launch in (summary or {}).get("launches", []) if isinstance(summary, dict) else []:
            iid = launch.get("instanceId", "")
            if not iid or iid in self.prices:
                continue
            self.prices[iid] = float(launch.get("price") or 0.0)
            self.launched.append(launch)
            self.timeline.log(
                f"launched {iid}: {launch.get('instanceType')} in {launch.get('zone')}, {launch.get('capacityType')}",
                f"{why}; nodepool {launch.get('nodePool')}, ${float(launch.get('price') or 0):.4f}/h, "
                f"for {len(launch.get('pods') or [])} pod(s)",
            )

    def _sampler(self) -> None:
        while not self._stop.is_set():
            try:
                pods = self.pods()
                pending = sum(1 for p in pods if p.status.phase == "Pending")
                running = sum(1 for p in pods if p.status.phase == "Running")
                self.timeline.sample(pending, running, len(self.nodes()), self.price_now())
            except Exception:  # a sample lost to a transient error is only a gap in the chart
                logging.getLogger("sim.demo").debug("sample failed", exc_info=True)
            self._stop.wait(0.5)

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
        self.timeline.log("deployment inflate created with 0 replicas", "5 x 1 CPU once scaled")

    def scale(self, replicas: int) -> None:
        self.apps.patch_namespaced_deployment_scale(DEPLOYMENT, NAMESPACE, {"spec": {"replicas": replicas}})
        self.timeline.log(f"inflate scaled to {replicas}")

    def scale_out(self) -> None:
        # On its schedule the provisioner is always warm; the story starts once it has run once.
        if not self.warm.wait(60):
            raise StoryFailed("the provisioner did not finish its first invocation within 60s")
        self.pending_since = self.timeline.elapsed()
        self.scale(REPLICAS)
        self.wait("5 inflate pods Running", lambda: len(self.running_pods()) == REPLICAS, 90)
        self.running_at = self.timeline.elapsed()
        # The launch is told from the provisioner's summary, which its watch invocation returns at its end.
        self.wait("the provisioner's report of the launch", lambda: bool(self.launched), 30)
        nodes = sorted({p.spec.node_name for p in self.running_pods()})
        self.timeline.log(
            f"all {REPLICAS} pods Running on {', '.join(nodes)}",
            f"{self.running_at - self.pending_since:.1f}s from pending to running",
        )

    def interrupt(self) -> None:
        node_name = self.running_pods()[0].spec.node_name
        node = self.core.read_node(node_name)
        iid = node.spec.provider_id.rsplit("/", 1)[-1]
        now = datetime.fromisoformat(self.env.clock()["now"].replace("Z", "+00:00"))
        event = invoke.event_for_instance("spot-interruption-warning.json", iid, when=now)
        self.timeline.log(f"spot interruption warning for {iid} ({node_name})", "EC2 reclaims it in 2 minutes")
        summary = invoke.invoke("interruption", event, timeout_seconds=60)
        self.note_launches(_replacement_launches(summary), f"replacing interrupted {iid}")
        self.timeline.log("interruption handled", _describe(summary))

        def moved() -> bool:
            running = self.running_pods()
            return len(running) == REPLICAS and all(p.spec.node_name != node_name for p in running)

        self.wait("pods moved off the interrupted node", moved, 120)
        self.timeline.log("pods moved", f"all {REPLICAS} Running on {sorted({p.spec.node_name for p in self.running_pods()})}")
        # A drain that outlived the invocation is finished by the next scheduled disruption run.
        self.wait(
            f"interrupted instance {iid} terminated and its node deleted",
            lambda: self._run_disruption_until(lambda: self.instance_state(iid) in ("terminated", "gone")
                                               and not self._node_exists(node_name)),
            90,
        )
        self.removed.append(iid)
        self.timeline.log(f"{iid} terminated, node {node_name} deleted", "drained first, PDBs respected")

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
        self.wait(
            "empty nodes removed after their TTL",
            lambda: self._run_disruption_until(lambda: not any(self._node_exists(n) for n in node_names)),
            90,
        )
        self.wait("their instances terminated", lambda: all(self.instance_state(i) in ("terminated", "gone") for i in ids), 60)
        self.removed.extend(ids)
        self.timeline.log(f"empty node(s) {', '.join(node_names)} removed", "empty for longer than ttlSecondsAfterEmpty")

    def _run_disruption_until(self, done: Callable[[], bool]) -> bool:
        if done():
            return True
        summary = invoke.invoke("disruption", invoke.scheduled_tick(rule="disruption"), timeout_seconds=60)
        self.note_launches(_replacement_launches(summary), "replacement")
        return done()

    def _node_exists(self, name: str) -> bool:
        return any(n.metadata.name == name for n in self.core.list_node().items)

    def summary(self) -> dict[str, Any]:
        peak = max((s.price for s in self.timeline.samples), default=0.0)
        return {
            "seconds from pending to running": (
                f"{self.running_at - self.pending_since:.1f}" if self.running_at and self.pending_since else "n/a"
            ),
            "nodes launched": len(self.launched),
            "nodes removed": len(self.removed),
            "peak price per hour": f"${peak:.4f}",
            "instance types": ", ".join(sorted({str(x.get("instanceType")) for x in self.launched})),
            "wall time": f"{self.timeline.elapsed():.1f}s",
        }


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="demo-report.html", help="where to write the HTML report")
    parser.add_argument("--dir", help="sim/ state directory (default: a temporary one)")
    args = parser.parse_args(argv)

    timeline = Timeline("nodescale demo: inflate on the default spot NodePool")
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="nodescale-demo-"))
    env = Environment(workdir, ready_delay=2.0)
    timeline.log("starting sim/ (moto + local Kubernetes API)", str(workdir))
    env.start()
    demo: Demo | None = None
    failed: str | None = None
    try:
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
            try:
                timeline.log("sim/ is up", f"cluster {env.env['CLUSTER_NAME']}, API {env.kube_url}")
                demo = Demo(env, timeline)
                demo.configure()
                demo.start_background()
                demo.scale_out()
                demo.interrupt()
                demo.scale_in()
            finally:
                if demo is not None:
                    demo.stop_background()
    except StoryFailed as exc:
        failed = str(exc)
        timeline.log("the story did not happen", failed)
    except Exception as exc:  # any other failure is still a story that did not happen, told in one line
        failed = f"{type(exc).__name__}: {exc}"
        timeline.log("the story did not happen", failed)
    finally:
        env.stop()
        timeline.log("sim/ stopped")
    summary = demo.summary() if demo else {}
    summary["result"] = "FAILED: " + failed if failed else "the story happened"
    report = write_html(Path(args.report).resolve(), timeline, summary)
    print("\nSummary")
    for key, value in summary.items():
        print(f"  {key:32} {value}")
    print(f"\nReport: {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
