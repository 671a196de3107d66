"""Drift a node shows against its NodePool's template: requirements, labels and taints.

What the cloud side changes (image, subnets, security groups, user data, tags) is the launcher's
business (``Launcher.drift``); this module compares the Node with what the pool would make today.
Weight, limits and disruption settings are not looked at: changing them changes no node.
"""

from __future__ import annotations

from ..model import labels as wk
from ..model.nodepool import NodePool
from .nodes import NodeView

# Labels the node gets from its hardware and place, not from the pool template: a pool requirement on
# them is checked against the value the node has.
_PLACEMENT = frozenset({wk.HOSTNAME, wk.REGION})


def template_drift(node: NodeView, pool: NodePool) -> str | None:
    """Why the node no longer matches ``pool``'s template, or None."""
    for key, req in pool.requirements.items():
        if key in _PLACEMENT:
            continue
        value = node.labels.get(key)
        # A label the node lacks is left alone: older nodes may not carry every well-known label.
        if value is not None and not req.has(value):
            return f"label {key}={value} no longer meets the NodePool requirement {req}"
    for key, value in sorted(pool.labels.items()):
        have = node.labels.get(key)
        if have != value:
            shown = "missing" if have is None else f"{have!r}"
            return f"NodePool label {key}={value!r} is {shown} on the node"
    present = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in node.taints}
    for taint in pool.taints:
        if (taint.key, taint.value, taint.effect) not in present:
            return f"NodePool taint {taint} is missing on the node"
    return None
