"""The disruption conditions the pass writes on the NodeClaims of the nodes it manages (#30.1).

The pass notes, by node, what Karpenter's controllers would say: Drifted and Consolidatable for each candidate
it planned about (``note_plan``), DisruptionReason when it starts disrupting a node, InstanceTerminating when
the node's instance termination was asked for (``note``). At the pass's end (``flush``) each NodeClaim is read
again and patched once, through the status subresource, only when its conditions change; an error is logged
and the next pass tries again, never failing the pass.
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from ... import clock
from ...disruption import claim_conditions as cc
from ...disruption import zonalshift
from ...disruption.context import Inputs
from ...disruption.drift import template_drift
from ...k8s import events as k8s_events
from ...k8s import nodeclaims as k8s_nodeclaims
from .state import RunState, log


def note(run: RunState, node: str, type_: str, mark: cc.Mark) -> None:
    """Say ``type_`` on ``node``'s NodeClaim at the pass's end (True with ``mark``, or removed when None)."""
    run.claim_marks.setdefault(node, {})[type_] = mark


def note_plan(run: RunState, inputs: Inputs) -> None:
    """Drifted and Consolidatable for each node the planner could take: nodes under way keep what they carry."""
    if run.dry_run or run.world.nodeclaims is None:
        return
    skip = inputs.in_progress | inputs.protected
    for view in inputs.views:
        pool = inputs.nodepools.get(view.nodepool)
        if pool is None or view.name in skip or (
                inputs.candidate_pools is not None and view.nodepool not in inputs.candidate_pools):
            continue
        why = (template_drift(view, pool) or inputs.cloud_drift.get(view.name)
               or zonalshift.drifted(view, pool, inputs.shifted_zones))
        note(run, view.name, cc.DRIFTED, cc.drifted_mark(why))
        note(run, view.name, cc.CONSOLIDATABLE, cc.consolidatable_mark(cc.consolidatable(view, pool, inputs.now)))


def flush(run: RunState) -> int:
    """One status patch per NodeClaim whose conditions the pass changes; returns how many were written."""
    marks, run.claim_marks = run.claim_marks, {}
    if run.dry_run or not marks or run.world.nodeclaims is None:
        return 0
    now = clock.format_timestamp(run.now())
    written = 0
    for node, wanted in marks.items():
        view = run.world.node(node)
        ref = k8s_events.claim_of_node(run.world.nodeclaims, view) if view is not None else None
        if ref is None:
            continue  # a node without a NodeClaim (launched before them, or by someone else)
        try:
            written += _write(run, ref.name, wanted, now)
        except ApiException as exc:  # the next pass says it again
            log.warning("could not write a NodeClaim's disruption conditions",
                        extra={"nodeclaim": ref.name, "node": node, "status": exc.status, "error": str(exc.reason)})
    return written


def _write(run: RunState, name: str, wanted: dict[str, cc.Mark], now: str) -> int:
    # Read again: registration may have written the conditions since the pass's snapshot.
    claim = k8s_nodeclaims.get(run.rt.api, name)
    if claim is None or (claim.get("metadata") or {}).get("deletionTimestamp"):
        return 0
    generation = int((claim.get("metadata") or {}).get("generation") or 1)
    old = (claim.get("status") or {}).get("conditions") or []
    conditions = cc.with_marks(old, wanted, now=now, generation=generation)
    if conditions is None:
        return 0
    k8s_nodeclaims.patch_status(run.rt.api, name, {"conditions": conditions})
    log.info("nodeclaim disruption conditions written",
             extra={"nodeclaim": name, "conditions": {t: ("True" if m else "removed") for t, m in wanted.items()}})
    return 1
