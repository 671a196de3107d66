"""What one provisioner invocation did, as data.

    Summary           the result of ``provision_once`` / ``provision_watch`` (snake_case fields, typed records)
    Summary.to_json   its JSON document (camelCase keys): the Lambda's answer and `nodescale provision -o json`
    Tally             the passes of one invocation, accumulated; ``finish()`` gives the Summary

Only the provisioner handler and the command line serialize a summary; the use-case hands the data back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ...aws.launchfailures import LaunchFailure
from ...model.buffers import ResolvedBuffer
from ...model.pod import Pod
from ..world import World
from .launch import Launch, LaunchOutcome, LimitHit, PodReason

log = logging.getLogger(__name__)


class Mode(StrEnum):
    """How the invocation looked for pods: one pass (poll) or batches until a deadline (watch)."""

    POLL = "poll"
    WATCH = "watch"


@dataclass(frozen=True)
class BufferReport:
    """An active CapacityBuffer: its pods, and those that found no room."""

    resolved: ResolvedBuffer
    unplaced: list[PodReason] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {**self.resolved.to_dict(), "unplaced": [u.to_json() for u in self.unplaced]}


@dataclass(frozen=True)
class Summary:
    """What one invocation did, over its passes. A dry run launches nothing: what it would launch is
    ``planned`` and ``launches`` is empty."""

    mode: Mode
    dry_run: bool
    pods_seen: int = 0
    batches: int = 0
    launches: list[Launch] = field(default_factory=list)
    waiting_for_in_flight: int = 0
    placed_on_existing: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # error code -> how many times
    unschedulable: list[PodReason] = field(default_factory=list)  # as the last pass left them
    limits: list[LimitHit] = field(default_factory=list)
    config_errors: list[str] = field(default_factory=list)
    pod_errors: list[PodReason] = field(default_factory=list)
    registration_timeouts: list[str] = field(default_factory=list)  # instance ids
    solve_seconds: float = 0.0
    buffers: list[BufferReport] = field(default_factory=list)
    # NodePools whose launch failed for a reason other than capacity (the last failure), by pool name.
    launch_failing: list[LaunchFailure] = field(default_factory=list)
    seconds: float = 0.0
    price_per_hour_launched: float = 0.0  # of what was launched, or in a dry run planned
    planned: list[Launch] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The summary's JSON document; its keys and their order are the functions' contract."""
        out: dict[str, Any] = {"mode": self.mode.value, "dryRun": self.dry_run, "podsSeen": self.pods_seen,
                               "batches": self.batches}
        if not self.dry_run:
            out["launches"] = [launch.to_dict() for launch in self.launches]
        out.update({
            "waitingForInFlight": self.waiting_for_in_flight,
            "placedOnExisting": self.placed_on_existing,
            "errors": dict(self.errors),
            "unschedulable": [u.to_json() for u in self.unschedulable],
            "limits": [x.to_json() for x in self.limits],
            "configErrors": list(self.config_errors),
            "podErrors": [e.to_json() for e in self.pod_errors],
            "registrationTimeouts": list(self.registration_timeouts),
            "solveSeconds": self.solve_seconds,
            "buffers": [b.to_json() for b in self.buffers],
            "launchFailing": [f.to_dict() for f in self.launch_failing],
            "seconds": self.seconds,
            "pricePerHourLaunched": self.price_per_hour_launched,
        })
        if self.dry_run:
            # A dry run's launches are named for what they are, after the rest.
            out["planned"] = [launch.to_dict() for launch in self.planned]
            out["launches"] = []
        return out


class Tally:
    """The passes of one invocation, accumulated into its :class:`Summary`."""

    def __init__(self, mode: Mode, dry_run: bool) -> None:
        self.started = time.monotonic()
        self.mode = mode
        self.dry_run = dry_run
        self.batches = 0
        self.launches: list[Launch] = []
        self.waiting = 0
        self.placed_existing = 0
        self.errors: dict[str, int] = {}
        self.unschedulable: list[PodReason] = []
        self.limits: list[LimitHit] = []
        self.config_errors: list[str] = []
        self.pod_errors: list[PodReason] = []
        self.registration_timeouts: list[str] = []
        self.solve_seconds = 0.0
        self.buffers: list[BufferReport] = []
        self._failing: dict[str, LaunchFailure] = {}
        self._seen: set[str] = set()

    def add_world(self, world: World) -> None:
        for e in world.config_errors:
            text = str(e)
            if text not in self.config_errors:
                self.config_errors.append(text)
                log.error("configuration error: %s", text)
        for key, why in world.pod_errors:
            entry = PodReason(key, why)
            if entry not in self.pod_errors:
                self.pod_errors.append(entry)

    def add_buffers(self, world: World, outcome: LaunchOutcome) -> None:
        """Each active CapacityBuffer: its pods, and those that found no room (the last pass knows best)."""
        unplaced = dict(outcome.buffer_unplaced)
        self.buffers = [
            BufferReport(r, [PodReason(p.key, unplaced[p.key]) for p in r.pods if p.key in unplaced])
            for r in world.resolved_buffers
        ]

    def add_outcome(self, pods: Sequence[Pod], outcome: LaunchOutcome) -> None:
        self._seen.update(p.uid or p.key for p in pods)
        self.batches += 1
        self.launches.extend(outcome.launches)
        self.waiting = sum(len(v) for v in outcome.waiting.values())
        self.placed_existing = outcome.placed_existing
        self.add_errors(outcome)
        # The last pass knows best which pods are still left.
        self.unschedulable = [PodReason(k, r) for k, r in outcome.unschedulable]
        self.limits.extend(x for x in outcome.limits if x not in self.limits)
        self.add_failing(outcome)
        self.solve_seconds = round(self.solve_seconds + outcome.solve_seconds, 6)

    def add_static(self, outcome: LaunchOutcome) -> None:
        """Static pools topped up: what launched joins the launches."""
        self.launches.extend(outcome.launches)
        self.add_errors(outcome)
        self.add_failing(outcome)

    def add_errors(self, outcome: LaunchOutcome) -> None:
        for code, n in outcome.errors.items():
            self.errors[code] = self.errors.get(code, 0) + n

    def add_failing(self, outcome: LaunchOutcome) -> None:
        """A pool that launched in a later pass is no longer failing; one that failed is, with its last error."""
        for launch in outcome.launches:
            self._failing.pop(launch.nodepool, None)
        self._failing.update(outcome.failing)

    def add_timeouts(self, instance_ids: Sequence[str]) -> None:
        self.registration_timeouts.extend(i for i in instance_ids if i not in self.registration_timeouts)

    def finish(self) -> Summary:
        launched = list(self.launches)
        return Summary(
            mode=self.mode, dry_run=self.dry_run, pods_seen=len(self._seen), batches=self.batches,
            launches=[] if self.dry_run else launched, waiting_for_in_flight=self.waiting,
            placed_on_existing=self.placed_existing, errors=dict(self.errors),
            unschedulable=list(self.unschedulable), limits=list(self.limits),
            config_errors=list(self.config_errors), pod_errors=list(self.pod_errors),
            registration_timeouts=list(self.registration_timeouts), solve_seconds=self.solve_seconds,
            buffers=list(self.buffers), launch_failing=[self._failing[p] for p in sorted(self._failing)],
            seconds=round(time.monotonic() - self.started, 3),
            # Each price as the summary shows it (rounded), then their sum.
            price_per_hour_launched=round(sum(round(x.price, 6) for x in launched), 6),
            planned=launched if self.dry_run else [],
        )
