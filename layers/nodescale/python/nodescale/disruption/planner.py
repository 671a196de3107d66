"""One run's disruption decisions, in Karpenter's order: repair, expiry, drift, emptiness, consolidation.

Pure: given the nodes as :class:`NodeView` (with the cloud-side facts the use-case looked up) and the
NodePools, it returns what to do and what was refused, with the reason for each. ``plan`` only
orchestrates: each method (``disruption.methods``) is offered, in order, the candidates no earlier
method took or refused. Budgets are counted per NodePool and reason across the whole run, so a run
never takes more than they allow.
"""

from __future__ import annotations

from collections.abc import Sequence

from .consolidation import Simulator
from .context import Context, Inputs, Outcome
from .methods import Method, default_methods


def plan(inputs: Inputs, simulate: Simulator | None = None, methods: Sequence[Method] | None = None) -> Outcome:
    """Ask each method in turn; the first to decide about (or refuse) a node keeps it from the rest.

    ``methods`` defaults to Karpenter's order, with consolidation only when ``simulate`` is given.
    """
    ctx = Context(inputs)
    for method in default_methods(simulate) if methods is None else methods:
        remaining = ctx.undecided()
        method.notice(remaining, ctx)
        method.compute([v for v in remaining if method.should_disrupt(v, ctx)], ctx)
    return ctx.out

