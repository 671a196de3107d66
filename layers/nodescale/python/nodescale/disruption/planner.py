"""One run's disruption decisions, in Karpenter's order: repair, expiry, drift, emptiness, consolidation.

Pure: given the nodes as :class:`NodeView` (with the cloud-side facts the use-case looked up) and the
NodePools, it returns what to do and what was refused, with the reason for each. ``plan`` only
orchestrates: each method (``disruption.methods``) is offered, in order, the candidates no earlier
method took or refused. Budgets are counted per NodePool and reason across the whole run, so a run
never takes more than they allow.
"""

from __future__ import annotations

from collections.abc import Sequence

from .context import Context, Inputs, Outcome
from .decisions import Action, Decision
from .methods import Method, default_methods
from .nodes import NodeView
from .replacement import Simulator


def plan(inputs: Inputs, simulate: Simulator | None = None, methods: Sequence[Method] | None = None) -> Outcome:
    """Ask each method in turn; the first to decide about (or refuse) a node keeps it from the rest.

    ``methods`` defaults to Karpenter's order, with consolidation only when ``simulate`` is given.
    """
    ctx = Context(inputs)
    for method in default_methods(simulate, inputs.gates) if methods is None else methods:
        remaining = ctx.undecided()
        method.notice(remaining, ctx)
        method.compute([v for v in remaining if method.should_disrupt(v, ctx)], ctx)
    if simulate is not None:
        with_replacements(ctx.out.decisions, inputs.views, simulate)
    return ctx.out


def with_replacements(decisions: Sequence[Decision], views: Sequence[NodeView], simulate: Simulator) -> None:
    """A replacing decision that no simulation decided (drift, expiry, repair, capacity-block expiry) gets
    the new nodes the bin-packer asks for its pods, so the command carries what it launches, as Karpenter's
    do. Pods with nowhere to go leave it without: the validation before acting refuses it, saying why."""
    by_name = {v.name: v for v in views}
    for d in decisions:
        if d.action != Action.REPLACE or d.replacements:
            continue
        sim = simulate([by_name[n] for n in d.nodes if n in by_name])
        if not sim.unschedulable:
            d.replacements = list(sim.replacements)

