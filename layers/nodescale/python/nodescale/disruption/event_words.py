"""The reasons and messages of Karpenter v1's disruption and termination events (#30.5), pure.

Karpenter words them in kubernetes-sigs/karpenter pkg/events/reason.go,
pkg/controllers/disruption/events/events.go and pkg/controllers/node/termination/terminator/events/events.go;
nodescale publishes the same reasons on the same objects, so `kubectl get events` reads as it did.
"""

from __future__ import annotations

from datetime import datetime

DISRUPTION_BLOCKED = "DisruptionBlocked"
DISRUPTION_TERMINATING = "DisruptionTerminating"
UNCONSOLIDATABLE = "Unconsolidatable"
EVICTED = "Evicted"
FAILED_DRAINING = "FailedDraining"
TERMINATION_GRACE_PERIOD_EXPIRING = "TerminationGracePeriodExpiring"
# What an eviction names as its reason when the NodeClaim gives none (an interruption, a kubectl delete).
FORCEFUL_TERMINATION = "Forceful Termination"


def title(reason: str) -> str:
    """A disruption reason as Karpenter's messages show it: first letter of each word raised, none lowered."""
    return " ".join(word[:1].upper() + word[1:] for word in reason.split(" "))


def disrupting(kind: str, reason: str) -> str:
    """DisruptionTerminating's message for an object of ``kind`` (Node or NodeClaim)."""
    return f"Disrupting {kind}: {title(reason)}"


def evicted(reason: str) -> str:
    return f"Evicted pod: {reason or FORCEFUL_TERMINATION}"


def failed_draining(pod_key: str, more: int = 0) -> str:
    """FailedDraining's message for a PodDisruptionBudget refusal of ``pod_key`` (namespace/name); ``more``
    other pods refused in the same round are counted after it (Karpenter folds them into one event too)."""
    tail = f"; {more} more pod(s) refused by a PodDisruptionBudget" if more else ""
    return f"Failed to drain node, evicting pod violates a PDB (Pod={pod_key}){tail}"


def grace_period_expiring(deadline: datetime) -> str:
    return f"All pods will be deleted by {deadline.strftime('%Y-%m-%dT%H:%M:%SZ')}"
