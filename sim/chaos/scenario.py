"""One chaos run: the three functions on their schedules and events, under faults, watched all along.

The provisioner and the disruption function run on their schedules (threads, each tick an
invocation, now and then two at once, now and then cut off at a random call); the interruption
function gets EventBridge events for a share of the spot instances (some delivered twice, some after
the instance's state-change event), and the instance is terminated when its two minutes are up, as
EC2 would. 10% of AWS and Kubernetes calls fail; offerings the product uses get capacity errors.
The simulated clock runs faster than the wall clock so TTLs and consolidation delays pass.

Then the faults are cleared, clean rounds run until the cluster settles, and the final invariants are
checked. `ChaosRun(env, config).run()` returns a `ChaosReport` with the figures and the violations.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nodescale.aws.clients import AwsClients
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.scheduling.scheduler import solve
from nodescale.settings import Settings
from nodescale.usecases.world import read_world
from sim import invoke, spotfigure
from sim.environment import Environment, SimEnvironmentError

from . import final_checks, setup
from .checkers import CLUSTER_TAG, DisruptionChecker, ForeignChecker, LimitsChecker, Violation
from .cutoff import InvocationCutOff, calls_made, cut_off_at
from .faults import FaultPlan, injected
from .watcher import Watcher, describe_all, moto_ec2

log = logging.getLogger("sim.chaos")

SPOT_NOTICE_SECONDS = 120.0
SIM_END_MARGIN_SECONDS = 10.0  # simulated: sim's own end of a warned instance comes first
EVENT_RETRIES = 2  # Lambda retries an asynchronous invocation twice before giving up
INTERRUPTION_TIMEOUT = 20.0


@dataclass
class ChaosConfig:
    seconds: float = 45.0  # wall time under faults
    settle_seconds: float = 90.0  # at most this long for the clean rounds
    min_clean_rounds: int = 3
    seed: int = 7
    nginx_replicas: int = 4
    inflate_start: int = 8
    inflate_peak: int = 20
    interruption_share: float = 0.20
    min_interruptions: int = 1  # a short run still sees one, whatever the dice say
    duplicate_share: float = 0.30
    late_share: float = 0.25
    cutoff_share: float = 0.15
    overlap_share: float = 0.15
    max_cutoff_call: int = 40
    clock_step_seconds: float = 5.0  # simulated seconds added every wall second
    provisioner_every: float = 1.0
    disruption_every: float = 2.5
    capacity_fault_every: float = 4.0
    faults: FaultPlan = field(default_factory=FaultPlan)


@dataclass
class Invocation:
    function: str
    outcome: str  # ok | error | cut-off
    seconds: float
    overlapped: bool = False
    detail: str = ""


@dataclass
class ChaosReport:
    config: ChaosConfig
    violations: list[Violation]
    figures: dict[str, Any]  # what `lines()` prints
    injected: dict[str, int]  # aws_errors, aws_capacity_errors, kube_errors
    invocations: Counter[tuple[str, str]]  # (function, ok|error|cut-off) -> count
    overlapping: int
    interruptions: int
    pods_moved: dict[str, int]  # voluntary, involuntary
    spot: list[dict[str, Any]] = field(default_factory=list)  # sim's record of the notices given in time

    def lines(self) -> list[str]:
        out = ["chaos run figures:"]
        out += [f"  {key:44} {value}" for key, value in self.figures.items()]
        out.append(f"  {'violations':44} {len(self.violations)}")
        out += [f"    {v}" for v in self.violations]
        out += [f"  {line}" for line in spotfigure.lines("spot notices given in time", self.spot)] if self.spot else []
        return out


class ChaosRun:
    def __init__(self, env: Environment, config: ChaosConfig | None = None) -> None:
        self.env = env
        self.config = config or ChaosConfig()
        self.rng = random.Random(self.config.seed)
        self._rng_lock = threading.Lock()
        self.cluster = env.cluster
        self.api = env.kube_api_client()
        self.moto = moto_ec2(env.state["moto_url"])
        self.started = time.monotonic()
        self.stop_chaos = threading.Event()
        self.invocations: list[Invocation] = []
        self._inv_lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        self._busy: Counter[str] = Counter()
        self._calls: dict[str, list[int]] = {}  # HTTP calls each uncut invocation of a function made
        self.interrupted: dict[str, dict[str, Any]] = {}  # instance id -> its interruption's progress
        self.decided: set[str] = set()
        self.spot: list[dict[str, Any]] = []  # sim's record of the spot notices it gave (#33.2)
        self.events_sent: Counter[str] = Counter()
        self.capacity_rules = 0
        self.watcher: Watcher | None = None
        self.disruption = DisruptionChecker(
            expected={f"{setup.NAMESPACE}/nginx-pdb": self.config.nginx_replicas})

    # ---------------------------------------------------------------------------------------- helpers
    def _roll(self, share: float) -> bool:
        with self._rng_lock:
            return self.rng.random() < share

    def _pick(self, low: int, high: int) -> int:
        with self._rng_lock:
            return self.rng.randint(low, high)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def sim_now(self) -> datetime:
        return datetime.fromisoformat(self.env.clock()["now"].replace("Z", "+00:00"))

    def _retrying(self, what: str, action: Any, attempts: int = 20) -> Any:
        """The driver's own calls (scaling, events) ride out injected faults."""
        for attempt in range(attempts):
            try:
                return action()
            except Exception:  # injected faults are the point of the run; the next try is as good
                if attempt == attempts - 1:
                    raise
                time.sleep(0.2)
        raise AssertionError(f"{what}: unreachable")

    # ------------------------------------------------------------------------------------ invocations
    def invoke(self, function: str, event: dict[str, Any], timeout: float, cut: bool, overlapped: bool) -> Any:
        started = time.monotonic()
        with self._inv_lock:
            self._busy[function] += 1
            overlapped = overlapped or self._busy[function] > 1
        outcome, detail, result, made = "ok", "", None, 0
        # The cut falls within the calls such an invocation makes (as learnt from the uncut ones).
        seen = sorted(self._calls.get(function) or [self.config.max_cutoff_call])
        point = self._pick(1, max(2, seen[len(seen) // 2])) if cut else 10**9
        try:
            with cut_off_at(point):
                try:
                    result = invoke.invoke(function, event, timeout_seconds=timeout, cluster=self.cluster)
                finally:
                    made = calls_made()
        except InvocationCutOff as exc:
            outcome, detail = "cut-off", str(exc)
        except Exception as exc:  # a failed invocation is what Lambda would record; the schedule goes on
            outcome, detail = "error", f"{type(exc).__name__}: {exc}"[:300]
        finally:
            with self._inv_lock:
                self._busy[function] -= 1
                if outcome == "ok":
                    self._calls.setdefault(function, []).append(made)
                self.invocations.append(Invocation(function, outcome, time.monotonic() - started, overlapped, detail))
        return result if outcome == "ok" else outcome

    def _spawn(self, target: Any, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        with self._inv_lock:
            self._workers = [t for t in self._workers if t.is_alive()]
            self._workers.append(thread)
        return thread

    def _tick(self, function: str) -> None:
        if function == "provisioner":
            watch = self._roll(0.25)
            event = invoke.scheduled_tick(self.cluster, rule=function)
            event["mode"] = "watch" if watch else "poll"
            timeout = 14.0 if watch else 30.0
        else:
            event, timeout = invoke.scheduled_tick(self.cluster, rule=function), 40.0
        self.invoke(function, event, timeout, cut=self._roll(self.config.cutoff_share) or self._cut_overdue(),
                    overlapped=False)

    def _cut_overdue(self) -> bool:
        """Half-way through and nothing cut off yet: a short run still sees one, whatever the dice say."""
        with self._inv_lock:
            cut = any(i.outcome == "cut-off" for i in self.invocations)
        return not cut and self.elapsed() > self.config.seconds / 2

    def _schedule(self, function: str, every: float) -> None:
        while not self.stop_chaos.is_set():
            if self._roll(self.config.overlap_share):
                self._spawn(self._tick, function)  # a second invocation of the same function, at once
            self._tick(function)
            self.stop_chaos.wait(every)

    # ---------------------------------------------------------------------------------- interruptions
    def _send(self, name: str, event: dict[str, Any]) -> None:
        """Deliver one event, retried the way Lambda retries a failed asynchronous invocation."""
        self.events_sent[name] += 1
        for attempt in range(1 + EVENT_RETRIES):
            cut = self._roll(self.config.cutoff_share) and attempt < EVENT_RETRIES
            result = self.invoke("interruption", event, INTERRUPTION_TIMEOUT, cut=cut, overlapped=False)
            if isinstance(result, dict):
                return
            self.events_sent[f"{name} (retried)"] += 1
            # Lambda retries only after the failed attempt's time is up (its idempotency record lapses with it).
            if self.stop_chaos.wait(INTERRUPTION_TIMEOUT):
                return  # the run is winding down: the clean rounds finish what is left

    def _interrupt(self, iid: str) -> None:
        info = self.interrupted[iid]
        when = self.sim_now()
        if not info["late"]:
            # EC2's warning in time: sim ends the instance when the notice runs out and records the drain.
            when = self._warned_by_sim(iid) or when
        warning = invoke.event_for_instance("spot-interruption-warning.json", iid, when=when)
        info["warned_at"] = self.env.clock()["elapsedSeconds"]
        if info["late"]:
            self._terminate(iid)
        self._send("spot-interruption-warning", warning)
        if info["duplicate"]:
            time.sleep(self._pick(1, 3))
            self._send("spot-interruption-warning (again)", warning)

    def _warned_by_sim(self, iid: str) -> datetime | None:
        """sim's warning time for the instance; None when sim would not warn it (no longer running)."""
        try:
            (warning,) = self.env.spot_interruptions([iid])
        except SimEnvironmentError as exc:
            log.warning("sim did not warn %s: %s", iid, exc)
            return None
        self.interrupted[iid]["sim"] = True
        return datetime.fromisoformat(warning["time"].replace("Z", "+00:00"))

    def _terminate(self, iid: str) -> None:
        info = self.interrupted[iid]
        if info.get("terminated"):
            return
        info["terminated"] = True
        info["drained_in_time"] = self._node_empty(iid)
        self.moto.terminate_instances(InstanceIds=[iid])
        self._send("state-change-terminated", invoke.event_for_instance("state-change-terminated.json", iid,
                                                                        when=self.sim_now()))

    def _node_empty(self, iid: str) -> bool:
        with self.disruption.lock:
            nodes = {n for n, i in self.disruption.node_instance.items() if i == iid}
            return not any((p.get("spec") or {}).get("nodeName") in nodes and not p["metadata"].get("deletionTimestamp")
                           for p in self.disruption.pods.values())

    def _interruptions(self) -> None:
        assert self.watcher is not None
        while not self.stop_chaos.wait(1.0):
            with self.disruption.lock:
                registered = set(self.disruption.node_instance.values())
            for iid, inst in list(self.watcher.instances.items()):
                if iid in self.decided or inst.state != "running" or inst.capacity_type != "spot":
                    continue
                if inst.tags.get(CLUSTER_TAG) != self.cluster or iid not in registered:
                    continue
                # A short run must still see pods moved by an interruption, so the one it forces is aimed
                # at a node that holds pods and is warned in time; the dice pick any node.
                with_pods = sum(1 for i in self.interrupted.values() if i["had_pods"] and not i["late"])
                overdue = with_pods < self.config.min_interruptions and self.elapsed() > self.config.seconds / 4
                occupied = not self._node_empty(iid)
                if overdue and not occupied:
                    continue  # not decided yet: it may hold pods next time round
                self.decided.add(iid)
                if not (overdue or self._roll(self.config.interruption_share)):
                    continue
                # Marked before anything is sent: what happens to its pods from now on is not voluntary.
                self.disruption.mark_involuntary(iid)
                self.interrupted[iid] = {"late": not overdue and self._roll(self.config.late_share),
                                         "duplicate": self._roll(self.config.duplicate_share),
                                         "had_pods": occupied}
                self._spawn(self._interrupt, iid)
            now = self.env.clock()["elapsedSeconds"]
            for iid, info in list(self.interrupted.items()):
                # What sim warned, sim ends as the notice runs out; the state-change event follows it.
                notice = SPOT_NOTICE_SECONDS + (SIM_END_MARGIN_SECONDS if info.get("sim") else 0.0)
                if "warned_at" in info and not info.get("terminated") and now - info["warned_at"] >= notice:
                    self._spawn(self._terminate, iid)

    # ----------------------------------------------------------------------------- other background
    def _clock(self) -> None:
        while not self.stop_chaos.wait(1.0):
            self._retrying("advance the clock", lambda: self.env.advance(self.config.clock_step_seconds))

    def _capacity_faults(self) -> None:
        assert self.watcher is not None
        while not self.stop_chaos.wait(self.config.capacity_fault_every):
            live = final_checks.managed_live(self.watcher.instances.values(), self.cluster)
            if not live:
                continue
            with self._rng_lock:
                target = self.rng.choice(live)
                rule = self.config.faults.capacity_rule(self.rng, target.instance_type, target.zone,
                                                        target.capacity_type)
            self._retrying("add a capacity fault", lambda r=rule: self.env.add_aws_fault(**r))
            self.capacity_rules += 1

    def _workload_churn(self) -> None:
        if not self.stop_chaos.wait(self.config.seconds / 3):
            self._retrying("scale inflate", lambda: setup.scale(self.api, setup.INFLATE, self.config.inflate_peak))

    # ------------------------------------------------------------------------------------------ phases
    def prepare(self) -> None:
        setup.install_pools(self.env)
        setup.install_workloads(self.api, self.config.nginx_replicas, self.config.inflate_start)
        setup.install_foreign_node(self.env, self.api)
        seed = self.env.seed
        account = describe_all(self.moto)
        foreign_ids = [*seed["unmanaged_instance_ids"], *seed["karpenter_instance_ids"]]
        nodes = [n for n in _items(self.api, "/api/v1/nodes") if n["metadata"]["name"] in self._foreign_names()]
        self.foreign = ForeignChecker([account[i] for i in foreign_ids if i in account], nodes)
        self.limits = LimitsChecker(self.cluster, setup.pool_limits(self.cluster), setup.capacity_lookup())
        self.watcher = Watcher(self.env.kube_url, self.env.state["moto_url"], self.disruption, self.foreign,
                               self.limits, started=self.started).start()

    def _foreign_names(self) -> set[str]:
        return {setup.FOREIGN_NODE, *self.env.kubelet().get("other_nodes", [])}

    def _likely_offerings(self, types_per_claim: int = 2) -> list[tuple[str, str, str]]:
        """Offerings of the types the bin-packer picks for the pods waiting now: the ones launches will try."""
        world = read_world(self._runtime())
        plan = solve(world.pending, world.nodepools.values(), world.types_by_pool(),
                     daemonset_pods=world.daemonset_pods(), node_labels_by_pool=world.labels_by_pool())
        return sorted({(t, zone, ct) for claim in plan.node_claims for t in claim.instance_types[:types_per_claim]
                       for zone in claim.zones for ct in claim.capacity_types})

    def _runtime(self) -> Runtime:
        clients = {s: self.env.boto3_client(s) for s in ("ec2", "ssm", "eks", "dynamodb", "iam")}
        return Runtime(Settings.from_env(self.env.env), AwsClients(**clients), self.api)

    def chaos(self) -> dict[str, int]:
        offerings = self._likely_offerings()
        with self._rng_lock:
            chosen = self.rng.sample(offerings, min(3, len(offerings)))
        for instance_type, zone, capacity_type in chosen:
            self.env.add_aws_fault(**self.config.faults.capacity_rule(self.rng, instance_type, zone, capacity_type))
            self.capacity_rules += 1
        self.config.faults.apply(self.env, self.config.seed)
        background = [
            threading.Thread(target=self._schedule, args=("provisioner", self.config.provisioner_every), daemon=True),
            threading.Thread(target=self._schedule, args=("disruption", self.config.disruption_every), daemon=True),
            threading.Thread(target=self._interruptions, daemon=True),
            threading.Thread(target=self._clock, daemon=True),
            threading.Thread(target=self._capacity_faults, daemon=True),
            threading.Thread(target=self._workload_churn, daemon=True),
        ]
        for thread in background:
            thread.start()
        time.sleep(self.config.seconds)
        self.stop_chaos.set()
        for thread in background:
            thread.join(timeout=120)
        for worker in list(self._workers):
            worker.join(timeout=120)
        counts = injected(self.env)
        self.env.reset_faults()
        return counts

    def settle(self) -> tuple[int, list[Violation], dict[str, Any]]:
        """Clean rounds (no faults, no cut-offs) until the final invariants hold, or time runs out."""
        if any(i.get("sim") and not i.get("terminated") for i in self.interrupted.values()):
            self.spot = self.env.spot_notices_run_out()  # sim ends what it warned, as the notice runs out
        for iid, info in self.interrupted.items():
            if not info.get("terminated"):
                self._terminate(iid)  # the notice ran out while the run was winding down
        deadline = time.monotonic() + self.config.settle_seconds
        rounds = 0
        while True:
            rounds += 1
            self.invoke("provisioner", {**invoke.scheduled_tick(self.cluster, "provisioner"), "mode": "poll"},
                        30.0, cut=False, overlapped=False)
            summary = self.invoke("disruption", invoke.scheduled_tick(self.cluster, "disruption"), 40.0, cut=False,
                                  overlapped=False)
            self.env.advance(30)
            time.sleep(1.5)  # the kubelet registers, pods start
            violations, figures = self.final_state(final_checks.protected_nodes(summary))
            if (rounds >= self.config.min_clean_rounds and not violations) or time.monotonic() > deadline:
                return rounds, violations, figures

    def final_state(self, protected: set[str] | frozenset[str] = frozenset()) -> tuple[list[Violation], dict[str, Any]]:
        assert self.watcher is not None
        self.watcher.poll_once()
        instances = list(self.watcher.instances.values())
        nodes = _items(self.api, "/api/v1/nodes")
        pods = _items(self.api, "/api/v1/pods")
        foreign = self._foreign_names()
        world = read_world(self._runtime())
        planned = [p for node, bound in world.pods_by_node.items() if node not in foreign for p in bound
                   if not p.is_daemon] + list(world.pending)
        plan = solve(planned, world.nodepools.values(), world.types_by_pool(),
                     daemonset_pods=world.daemonset_pods(), node_labels_by_pool=world.labels_by_pool())
        managed_nodes = [n for n in nodes if n["metadata"]["name"] not in foreign
                         and {"karpenter.sh/nodepool", "karpenter.sh/provisioner-name"}
                         & set(n["metadata"].get("labels") or {})]
        live = final_checks.managed_live(instances, self.cluster)
        violations = [
            *final_checks.pods_not_running(pods, [u.pod.key for u in plan.unschedulable]),
            *final_checks.leaks(instances, nodes, self.cluster, foreign),
            *final_checks.excess_capacity(
                len(managed_nodes), len(plan.node_claims),
                protected=len(protected & {n["metadata"]["name"] for n in managed_nodes}),
                detail=f"in use {final_checks.instance_types_summary(live)}, from scratch "
                       f"{Counter(c.instance_types[0] for c in plan.node_claims)}"),
        ]
        price = sum(n.price for n in world.existing_nodes() if n.name not in foreign)
        figures = {
            "pods at the end (running/all)": f"{sum(1 for p in pods if p['status'].get('phase') == 'Running')}"
                                             f"/{len(pods)}",
            "nodes at the end / from scratch": f"{len(managed_nodes)} / {len(plan.node_claims)}",
            "price per hour at the end / from scratch": f"{price:.4f} / "
                                                          f"{plan.price_per_hour:.4f}",
        }
        return violations, figures

    def run(self) -> ChaosReport:
        self.prepare()
        assert self.watcher is not None
        try:
            counts = self.chaos()
            chaos_done = self.elapsed()
            rounds, final_violations, end_figures = self.settle()
        finally:
            self.stop_chaos.set()
            self.watcher.stop()
        return ChaosReport(self.config, [*self.watcher.violations, *final_violations],
                           self._figures(counts, chaos_done, rounds, end_figures), counts,
                           Counter((i.function, i.outcome) for i in self.invocations),
                           sum(1 for i in self.invocations if i.overlapped), len(self.interrupted),
                           self.disruption.counts(), self.spot)

    def _figures(self, counts: dict[str, int], chaos_done: float, rounds: int,
                 end: dict[str, Any]) -> dict[str, Any]:
        by_outcome = Counter((i.function, i.outcome) for i in self.invocations)
        assert self.watcher is not None
        ever = {iid for iid, i in self.watcher.instances.items() if i.tags.get(CLUSTER_TAG) == self.cluster}
        moved = self.disruption.counts()
        figures: dict[str, Any] = {
            "wall seconds (chaos / total)": f"{chaos_done:.0f} / {self.elapsed():.0f}",
            "AWS calls failed (injected errors)": counts["aws_errors"],
            "AWS capacity errors (offerings faulted)": f"{counts['aws_capacity_errors']} ({self.capacity_rules})",
            "Kubernetes calls failed (injected)": counts["kube_errors"],
        }
        for function in ("provisioner", "disruption", "interruption"):
            figures[f"{function} invocations ok/error/cut-off/overlapping"] = (
                f"{by_outcome[(function, 'ok')]}/{by_outcome[(function, 'error')]}/"
                f"{by_outcome[(function, 'cut-off')]}/"
                f"{sum(1 for i in self.invocations if i.function == function and i.overlapped)}")
        self.spot = self.env.spot_interruption_record()
        record = {e["instanceId"]: e for e in self.spot}
        drained = sum(1 for iid, i in self.interrupted.items()
                      if (_drained(record[iid]) if iid in record else i.get("drained_in_time")))
        figures.update({
            "instances launched": len(ever),
            "spot interruptions (late / duplicated)": f"{len(self.interrupted)} "
            f"({sum(1 for i in self.interrupted.values() if i['late'])} / "
            f"{sum(1 for i in self.interrupted.values() if i['duplicate'])})",
            "interruptions handled (node drained before termination)": f"{drained}/{len(self.interrupted)}",
            "warned in time (sim's record): drained before the end": f"{sum(map(_drained, record.values()))}/"
                                                                      f"{len(record)}",
            "interruption events delivered": sum(v for k, v in self.events_sent.items() if "retried" not in k),
            "pods moved (voluntary / involuntary)": f"{moved['voluntary'] + moved['involuntary']} "
                                                    f"({moved['voluntary']} / {moved['involuntary']})",
            "watch events checked / EC2 polls": f"{self.watcher.events} / {self.watcher.polls}",
            "clean rounds": rounds,
            **end,
        })
        errors = Counter(i.detail.split(":")[0] for i in self.invocations if i.outcome == "error")
        if errors:
            figures["invocation errors by type"] = dict(errors.most_common(5))
        return figures


def _drained(entry: dict[str, Any]) -> bool:
    """sim's record: the instance ended with no evictable pod left on its node."""
    return entry["endedAt"] is not None and not entry["lostHeldByPdb"] and not entry["lostNotReached"]


def _items(api: Any, path: str) -> list[dict[str, Any]]:
    return list(request_json(api, "GET", path).get("items") or [])


@contextmanager
def product_environment(env: Environment, watch_seconds: float = 4.0) -> Iterator[None]:
    """The handlers' settings pointed at `env` (as the CDK stack would set them), and a fresh runtime."""
    with invoke.product_environment(
        env.env,
        NODESCALE_PROVISIONER_MODE="poll",
        NODESCALE_WATCH_SECONDS=str(watch_seconds),
        POWERTOOLS_METRICS_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="CRITICAL",
        LOG_LEVEL="CRITICAL",
    ):
        yield
