"""Where a plan put each CapacityBuffer's virtual pods: on existing or in-flight nodes (room kept), on
new NodeClaims (room launched), or nowhere (why), for `plan`, `explain` and the provisioner's summary."""

from __future__ import annotations

from collections.abc import Iterable

from ..model.buffers import ResolvedBuffer
from .plan import Plan


def buffer_report(resolved: Iterable[ResolvedBuffer], plan: Plan) -> list[dict]:
    """One entry per buffer: its pods and where the plan put them."""
    existing = {p.uid for e in plan.existing for p in e.pods if p.buffer}
    claimed = {p.uid for c in plan.node_claims for p in c.pods if p.buffer}
    unplaced = {u.pod.uid: u.reason for u in plan.unschedulable if u.pod.buffer}
    out = []
    for r in resolved:
        uids = [p.uid for p in r.pods]
        entry = {
            **r.to_dict(),
            "onExistingNodes": sum(u in existing for u in uids),
            "onNewNodeClaims": sum(u in claimed for u in uids),
        }
        reasons = [unplaced[u] for u in uids if u in unplaced]
        if reasons:
            entry["unschedulable"] = len(reasons)
            entry["reason"] = reasons[0]
        out.append(entry)
    return out
