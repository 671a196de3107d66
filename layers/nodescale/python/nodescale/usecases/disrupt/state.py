"""What one disruption run shares between its reading, clean-up, deciding and acting parts.

The annotations and event reasons it writes, the summary it returns (``Report``), and ``RunState``:
the runtime, the world read at the start, the deadline, and the two writes every part makes (an
event on a node, an annotation patch), both of which a dry run skips.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import clock, telemetry
from ...disruption import event_words as words
from ...disruption.claim_conditions import Mark
from ...disruption.consolidation import Replacement
from ...disruption.decisions import UNHEALTHY, Action, Blocked, Blocker, Decision, Reason
from ...disruption.drift import DriftKind
from ...k8s import events as k8s_events
from ...k8s import nodes as k8s_nodes
from ...model.currency import USD, currency_of
from ...model.pod import Pod
from ...runtime import Runtime
from ..terminate import DISRUPTION_REASON_ANNOTATION, TerminationBatch, TerminationStep
from ..world import World

log = logging.getLogger("nodescale.usecases.disrupt.run")

# Written on a node being disrupted: why, since when, and the instances replacing it.
REASON_ANNOTATION = DISRUPTION_REASON_ANNOTATION
STARTED_ANNOTATION = "nodescale.io/disruption-started"
REPLACEMENT_ANNOTATION = "nodescale.io/disruption-replacement"
# First time the node's instance was seen failing its EC2 status checks (repair counts from it).
IMPAIRED_SINCE = "nodescale.io/impaired-since"

EVENT_DECISION = words.DISRUPTION_TERMINATING  # Karpenter's, on the Node and its NodeClaim
EVENT_BLOCKED = words.DISRUPTION_BLOCKED
EVENT_UNCONSOLIDATABLE = words.UNCONSOLIDATABLE
EVENT_REPLACING = "DisruptionReplacing"
EVENT_REPLACEMENT_FAILED = "DisruptionReplacementFailed"
EVENT_TERMINATED = "DisruptionTerminated"
# A pod's karpenter.sh/do-not-disrupt value that is ignored (Karpenter's reason for the same Warning).
EVENT_INVALID_DO_NOT_DISRUPT = "InvalidDoNotDisruptAnnotation"
# The reasons Karpenter publishes on the NodeClaim as well as the Node (disruption/events/events.go); the
# others are nodescale's own and stay on the Node.
ON_NODECLAIM_TOO = frozenset({EVENT_DECISION, EVENT_BLOCKED, EVENT_UNCONSOLIDATABLE, "ConsolidationApproved"})
EVENT_WINDOW_SECONDS = 55.0  # below the one-minute schedule: each run may restate a refusal once
# Refusal events one run writes at most (a zero budget in business hours holds every node of a pool
# every minute); the rest are in the log and the summary only.
MAX_REFUSAL_EVENTS = 200
# Invalid-annotation Warnings one run writes at most: any namespace user can annotate thousands of pods.
MAX_ANNOTATION_EVENTS = 200

# Reasons whose drain evicts do-not-disrupt pods too (the node is broken and goes regardless). Expiry
# is forceful only in starting (past budgets and do-not-disrupt): its drain, as in Karpenter v1, respects
# do-not-disrupt and PodDisruptionBudgets until the pool's terminationGracePeriod runs out.
FORCEFUL = frozenset({UNHEALTHY})
DEFAULT_RUN_SECONDS = 240.0


def _replacement_json(r: Replacement) -> dict[str, Any]:
    return {"nodePool": r.nodepool, "instanceType": r.instance_type, "pricePerHour": r.price}


@dataclass
class DecisionEntry:
    """A decision as the report gives it (``to_json``: the summary's camelCase shape)."""

    nodes: list[str]
    reason: Reason
    action: Action
    detail: str  # its prices shown in the report's currency
    saving_per_hour: float
    pods: int
    score: float | None = None
    drift: DriftKind | None = None
    replacements: list[Replacement] = field(default_factory=list)  # the command's new nodes, cheapest type of each
    replacement_instances: list[str] | None = None  # once launched
    error: str | None = None  # why the replacement could not be launched (action is then NONE)

    @classmethod
    def of(cls, d: Decision, detail: str) -> DecisionEntry:
        return cls(
            nodes=d.nodes, reason=d.reason, action=d.action, detail=detail,
            saving_per_hour=round(d.saving_per_hour, 6), pods=len(d.pods),
            score=None if d.score is None else round(d.score, 4), drift=d.drift,
            replacements=list(d.replacements),
        )

    def replacement_failed(self, why: str) -> None:
        """Decided, but its replacement could not be launched: nothing is done."""
        self.dropped(f"replacement could not be launched: {why}")

    def dropped(self, message: str) -> None:
        """Decided, but not acted on (``message`` says why): nothing is done."""
        self.action = Action.NONE
        self.error = message

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "nodes": self.nodes, "reason": self.reason, "action": self.action, "detail": self.detail,
            "savingPerHour": self.saving_per_hour, "pods": self.pods,
        }
        if self.score is not None:
            out["score"] = self.score
        if self.drift is not None:
            out["drift"] = self.drift
        if self.replacements:
            out["replacement"] = _replacement_json(self.replacements[0])
        if len(self.replacements) > 1:  # a repacking consolidation: every new node
            out["replacements"] = [_replacement_json(r) for r in self.replacements]
        if self.replacement_instances is not None:
            out["replacementInstances"] = self.replacement_instances
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class RefusalEntry:
    """A refusal as the report gives it."""

    nodes: list[str]
    reason: Reason
    blocked_by: Blocker
    why: str  # its prices shown in the report's currency

    @classmethod
    def of(cls, r: Blocked, why: str) -> RefusalEntry:
        return cls(r.nodes, r.reason, r.kind, why)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "reason": self.reason, "blockedBy": self.blocked_by, "why": self.why}


@dataclass
class Report:
    dry_run: bool
    decisions: list[DecisionEntry] = field(default_factory=list)
    refused: list[RefusalEntry] = field(default_factory=list)
    terminations: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[dict[str, Any]] = field(default_factory=list)
    cleanup: dict[str, list[str]] = field(
        default_factory=lambda: {"unregisteredInstances": [], "orphanedNodes": [], "launchTemplates": []}
    )
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    gauges: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    # Nodes first seen empty this run: the clock of their pool's consolidateAfter (ttlSecondsAfterEmpty) started.
    empty_since: list[dict[str, Any]] = field(default_factory=list)
    currency: str = USD  # of every price in the report: the region's
    # A split pass: the scheduled invocation lists the slices it started; a slice, its own pools.
    slices: list[list[str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        saving = sum(d.saving_per_hour for d in self.decisions)
        return {
            "dryRun": self.dry_run,
            "decisions": [d.to_json() for d in self.decisions],
            "refused": [r.to_json() for r in self.refused],
            "terminations": self.terminations,
            "waitingForReplacement": self.waiting,
            "cleanup": self.cleanup,
            "notes": self.notes,
            "errors": self.errors,
            "pricePerHourSaved": round(saving, 6),
            "cluster": self.gauges,
            "seconds": round(time.monotonic() - self.started, 3),
            "emptySince": self.empty_since,
            "currency": self.currency,
            "slices": self.slices,
        }


class RunState:
    """One run's runtime, world, deadline and summary, and the node writes a dry run leaves out."""

    def __init__(self, rt: Runtime, world: World, dry_run: bool, deadline: float) -> None:
        self.rt = rt
        self.world = world
        self.dry_run = dry_run
        self.deadline = deadline
        self.report = Report(dry_run, currency=currency_of(rt.settings.region))
        self.log = telemetry.logger()
        # Events are stamped on the world's clock (the simulator's, in tests), advanced by real time.
        base, started = world.now.timestamp(), time.monotonic()
        self.recorder = k8s_events.EventRecorder(
            rt.api, dedupe_seconds=EVENT_WINDOW_SECONDS, on_repeat="skip",
            clock=lambda: base + time.monotonic() - started,
        )
        self.node_by_name = {n.name: n for n in world.nodes}
        self.refusal_events = 0
        self.events_skipped = 0
        self.batch = TerminationBatch(rt)
        # Steps whose instance waits for the batch to be terminated: (step, reason, node annotations).
        self.terminating: list[tuple[TerminationStep, str, Mapping[str, str]]] = []
        # NodeClaim conditions to write at the pass's end, by node: type -> True (reason, message) or removed (#30.1).
        self.claim_marks: dict[str, dict[str, Mark]] = {}

    def now(self) -> datetime:
        return clock.now()

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def event(
        self, node: str, reason: str, message: str, type_: str = k8s_events.NORMAL, claim_message: str | None = None,
    ) -> None:
        if self.dry_run:
            return
        view = self.world.node(node)
        uid = view.uid if view is not None else ""
        claim = None
        if view is not None and reason in ON_NODECLAIM_TOO:
            claim = k8s_events.claim_of_node(self.world.nodeclaims, view)
        try:
            self.recorder.node_and_claim(node, claim, reason, message, type_, uid=uid, claim_message=claim_message)
        except ApiException as exc:
            log.warning("event not recorded", extra={"node": node, "reason": reason, "status": exc.status})

    def pod_event(self, pod: Pod, reason: str, message: str, type_: str = k8s_events.NORMAL) -> None:
        if self.dry_run:
            return
        try:
            self.recorder.pod(pod.namespace, pod.name, reason, message, type_, uid=pod.uid)
        except ApiException as exc:
            log.warning("event not recorded", extra={"pod": pod.key, "reason": reason, "status": exc.status})

    def annotate(self, node: str, annotations: Mapping[str, str | None]) -> bool:
        """False when the node is gone; a dry run writes nothing and says True."""
        if self.dry_run:
            return True
        try:
            k8s_nodes.patch_metadata(self.rt.api, node, annotations=annotations)
            return True
        except k8s_nodes.NodeGoneError:
            return False


def replacement_ids(annotations: Mapping[str, str]) -> list[str]:
    """The instances a node (of these annotations) waits for before it is drained (none when it waits for none)."""
    return [i for i in annotations.get(REPLACEMENT_ANNOTATION, "").split(",") if i]
