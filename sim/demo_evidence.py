"""What happened during the demo, read from the environment, never told from the story's script.

An :class:`Observer` polls, every half second, what a person could look at themselves:

- EC2 launches: the `CreateFleet` calls sim's AWS proxy logged (their time is the launch's time)
  and the instances each one made;
- EC2 terminations: the `TerminateInstances` calls that succeeded, per instance;
- the `DisruptionBlocked` events the product records when a PodDisruptionBudget refuses an eviction;
- the story's pods (pending, running and healthy, terminating) and its PodDisruptionBudget's status.

Prices are the one thing it is told: the product's own summaries (the provisioner's launches, the
interruption function's replacement) say what each instance costs per hour.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from nodescale.k8s.raw import request_json
from nodescale.model.labels import NODEPOOL
from sim.environment import Environment
from sim.kube.objects import pod_healthy
from sim.report import Chart, Point, Series, Timeline, steps

log = logging.getLogger("sim.demo")

BLOCKED_REASON = "DisruptionBlocked"
POLL_SECONDS = 0.5


@dataclass
class Launch:
    instance_id: str
    at: float  # seconds since the demo started: when the CreateFleet call reached EC2
    instance_type: str
    zone: str
    capacity_type: str
    nodepool: str
    price: float | None = None  # $/hour, from the product's summary
    reported_by: str = ""


@dataclass(frozen=True, slots=True)
class PodSample:
    at: float
    pending: int
    running: int  # Running, Ready and not being deleted: what a PodDisruptionBudget counts as healthy
    terminating: int


@dataclass(frozen=True, slots=True)
class Blocked:
    at: float  # when the demo first saw the event
    kind: str  # Pod or Node
    name: str
    message: str


class Observer:
    """Polls the environment in the background; `narrate` prints pod/PDB changes as they happen."""

    def __init__(self, env: Environment, timeline: Timeline, api: Any, namespace: str, app: str, pdb: str) -> None:
        self.env, self.timeline, self.api = env, timeline, api
        self.namespace, self.app, self.pdb = namespace, app, pdb
        self.ec2 = env.boto3_client("ec2")
        self.launches: dict[str, Launch] = {}
        self.terminations: dict[str, float] = {}
        self.blocked: list[Blocked] = []
        self.samples: list[PodSample] = []
        self.pdb_status: dict[str, int] = {}
        self.narrate = False
        self._seen_events: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.poll()  # one last look: the chart runs to what was true at the end

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # a missed poll is only a coarser chart; the next one catches up
                log.debug("observation failed", exc_info=True)
            self._stop.wait(POLL_SECONDS)

    def poll(self) -> None:
        with self._lock:
            self._launches()
            self._terminations()
            self._pods()
            self._blocked_events()

    # ------------------------------------------------------------------ pods and the PDB
    def _pods(self) -> None:
        selector = quote(f"app={self.app}")
        pods = request_json(self.api, "GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={selector}")
        items = pods.get("items") or []
        terminating = sum(1 for p in items if (p.get("metadata") or {}).get("deletionTimestamp"))
        running = sum(1 for p in items if pod_healthy(p))
        pending = sum(
            1 for p in items
            if (p.get("status") or {}).get("phase") == "Pending" and not (p.get("metadata") or {}).get("deletionTimestamp")
        )
        sample = PodSample(self.timeline.elapsed(), pending, running, terminating)
        previous = self.samples[-1] if self.samples else None
        self.samples.append(sample)
        self._pdb()
        changed = previous is None or (previous.pending, previous.running, previous.terminating) != (
            sample.pending, sample.running, sample.terminating)
        if self.narrate and changed:
            self.timeline.log(
                f"{self.app}: {running} running, {pending} pending, {terminating} terminating",
                f"PDB {self.pdb}: {self.pdb_status.get('currentHealthy', '?')} healthy, "
                f"{self.pdb_status.get('desiredHealthy', '?')} required, "
                f"{self.pdb_status.get('disruptionsAllowed', '?')} disruption(s) allowed",
                at=sample.at,
            )

    def _pdb(self) -> None:
        path = f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets/{self.pdb}"
        try:
            status = request_json(self.api, "GET", path).get("status") or {}
        except Exception:  # not created yet, or already gone
            return
        keys = ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")
        self.pdb_status = {k: int(status.get(k) or 0) for k in keys}

    def min_running(self, start: float, end: float) -> int | None:
        """The fewest healthy pods seen between two moments (None: no sample then)."""
        seen = [s.running for s in self.samples if start <= s.at <= end]
        return min(seen) if seen else None

    # ------------------------------------------------------------------ EC2, as the proxy logged it
    def _launches(self) -> None:
        for call in self.env.aws_calls(service="ec2", action="CreateFleet"):
            new = [i for i in call.get("instanceIds") or [] if i not in self.launches]
            if call.get("status") == 200 and new:
                found = self.ec2.describe_instances(InstanceIds=new)
                for reservation in found["Reservations"]:
                    for inst in reservation["Instances"]:
                        self._note_launch(inst, float(call["time"]))

    def _note_launch(self, inst: dict[str, Any], call_time: float) -> None:
        launch = Launch(
            instance_id=inst["InstanceId"],
            at=round(self.timeline.since_start(call_time), 3),
            instance_type=inst.get("InstanceType", ""),
            zone=(inst.get("Placement") or {}).get("AvailabilityZone", ""),
            capacity_type="spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand",
            nodepool=next((t["Value"] for t in inst.get("Tags") or [] if t["Key"] == NODEPOOL), ""),
        )
        self.launches[launch.instance_id] = launch
        self.timeline.log(
            f"EC2 CreateFleet: launched {launch.instance_id}, {launch.instance_type} in {launch.zone}, "
            f"{launch.capacity_type}",
            f"nodepool {launch.nodepool}; at the CreateFleet call, as sim's AWS proxy logged it",
            at=launch.at,
        )

    def _terminations(self) -> None:
        for call in self.env.aws_calls(service="ec2", action="TerminateInstances"):
            if call.get("status") != 200:
                continue
            text = json.dumps(call.get("params"))
            for iid, launch in self.launches.items():
                if iid in text and iid not in self.terminations:
                    at = round(self.timeline.since_start(float(call["time"])), 3)
                    self.terminations[iid] = at
                    price = f"${launch.price:.4f}/h" if launch.price is not None else "price not reported yet"
                    self.timeline.log(f"EC2 TerminateInstances: {iid} terminated", f"{launch.instance_type}, {price}", at=at)

    def note_price(self, instance_id: str, price: float, reported_by: str) -> bool:
        """A product summary's price for an instance; False when no launch of it was observed (yet)."""
        with self._lock:
            if instance_id not in self.launches:
                self._launches()
            launch = self.launches.get(instance_id)
            if launch is None:
                return False
            if launch.price is None:
                launch.price, launch.reported_by = price, reported_by
            return True

    # ------------------------------------------------------------------ the PDB at work
    def _blocked_events(self) -> None:
        """New DisruptionBlocked events (or new counts of old ones); one line for those of one message."""
        now = self.timeline.elapsed()
        fresh: dict[tuple[str, str], list[str]] = {}
        for event in request_json(self.api, "GET", "/api/v1/events").get("items") or []:
            key = f"{(event.get('metadata') or {}).get('uid')}/{event.get('count')}"
            if event.get("reason") != BLOCKED_REASON or key in self._seen_events:
                continue
            self._seen_events.add(key)
            obj = event.get("involvedObject") or {}
            blocked = Blocked(now, obj.get("kind", ""), obj.get("name", ""), event.get("message", ""))
            self.blocked.append(blocked)
            fresh.setdefault((blocked.kind, blocked.message), []).append(blocked.name)
        for (kind, message), names in fresh.items():
            what = f"{kind.lower()} {names[0]}" if len(names) == 1 else f"{len(names)} {kind.lower()}s ({', '.join(names)})"
            self.timeline.log(f"DisruptionBlocked on {what}", message, at=now)

    def pdb_blocked_pods(self) -> list[Blocked]:
        return [b for b in self.blocked if b.kind == "Pod" and "PodDisruptionBudget" in b.message]

    # ------------------------------------------------------------------ what the report shows
    def end(self) -> float:
        """Where the chart ends: a moment after the last thing observed."""
        last = [self.samples[-1].at if self.samples else 0.0, *self.terminations.values(),
                *(launch.at for launch in self.launches.values())]
        return round(max(last) + 1.0, 3)

    def chart(self, marks: list[tuple[float, str]], min_available: int) -> Chart:
        end = self.end()
        instances: list[Point] = []
        price: list[Point] = []
        for iid, launch in self.launches.items():
            instances.append((launch.at, 1))
            price.append((launch.at, launch.price or 0.0))
            if iid in self.terminations:
                instances.append((self.terminations[iid], -1))
                price.append((self.terminations[iid], -(launch.price or 0.0)))
        series = [
            Series("pending", "pending pods", _sampled(self.samples, "pending", end), "#d62728", "", 2, "circle"),
            Series("running", "running pods (healthy)", _sampled(self.samples, "running", end), "#2ca02c",
                   "9,4", 4, "square"),
            Series("instances", "instances (EC2 launch to terminate)", steps(instances, end), "#1f77b4",
                   "3,3", 2.5, "triangle"),
            Series("price", "$/hour of running instances", steps(price, end), "#9467bd", "12,4,3,4", 2,
                   "diamond", axis="right"),
            Series("minAvailable", f"PDB {self.pdb} minAvailable", [(0.0, min_available), (end, min_available)],
                   "#7f7f7f", "1,5", 1.5, ""),
        ]
        return Chart(series, end, marks)

    def facts(self) -> dict[str, Any]:
        return {
            "launches": [asdict(launch) for launch in sorted(self.launches.values(), key=lambda x: x.at)],
            "terminations": [{"instance_id": i, "at": at} for i, at in sorted(self.terminations.items(), key=lambda x: x[1])],
            "disruptionBlocked": [asdict(b) for b in self.blocked],
        }


def _sampled(samples: list[PodSample], field_name: str, end: float) -> list[Point]:
    """A sampled count as a step series: a point where it changed, from 0 s to `end`."""
    points: list[Point] = [(0.0, 0.0)]
    for s in samples:
        value = float(getattr(s, field_name))
        if value != points[-1][1]:
            points.append((round(s.at, 3), value))
    points.append((end, points[-1][1]))
    return points
