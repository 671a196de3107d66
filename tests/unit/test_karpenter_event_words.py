"""#30.5: nodescale's events carry Karpenter v1's reasons, types and messages (pure mappings)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodescale.disruption import event_words as words
from nodescale.interruption.actions import notice, terminating_message
from nodescale.interruption.intents import Intent, IntentAction, Kind
from nodescale.k8s.events import ObjectRef, claim_of

T = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _intent(kind: Kind, detail: str = "") -> Intent:
    return Intent("i-0a1b2c3d4e5f60718", IntentAction.INTERRUPT, kind, "e1", T, detail)


@pytest.mark.parametrize(("kind", "detail", "reason", "type_", "message"), [
    (Kind.SPOT_INTERRUPTION, "", "SpotInterrupted", "Warning", "Spot interruption warning was triggered"),
    (Kind.REBALANCE_RECOMMENDATION, "", "SpotRebalanceRecommendation", "Normal",
     "Spot rebalance recommendation was triggered"),
    (Kind.SCHEDULED_CHANGE, "", "InstanceUnhealthy", "Warning", "An unhealthy warning was triggered for the instance"),
    (Kind.CAPACITY_RESERVATION_INTERRUPTION, "", "CapacityReservationInstanceInterrupted", "Warning",
     "Capacity Reservation interruption warning was triggered"),
    (Kind.INSTANCE_STATE_CHANGE, "stopping", "InstanceStopping", "Warning", "Instance is stopping"),
    (Kind.INSTANCE_STATE_CHANGE, "stopped", "InstanceStopping", "Warning", "Instance is stopping"),
    (Kind.INSTANCE_STATE_CHANGE, "shutting-down", "InstanceTerminating", "Warning", "Instance is terminating"),
    (Kind.INSTANCE_STATE_CHANGE, "terminated", "InstanceTerminating", "Warning", "Instance is terminating"),
])
def test_each_interruption_message_is_karpenters_event(kind: Kind, detail: str, reason: str, type_: str,
                                                       message: str) -> None:
    """Restates aws/karpenter-provider-aws pkg/controllers/interruption/events/events.go (SpotInterrupted,
    RebalanceRecommendation, Unhealthy, CapacityReservationInstanceInterrupted, Stopping, Terminating) as
    utils.go notifyForMessage picks them per message kind."""
    said = notice(_intent(kind, detail))
    assert (said.reason, said.type_, said.message) == (reason, type_, message)


def test_terminating_on_interruption_names_the_object_kind() -> None:
    """Restates events.go TerminatingOnInterruption: the Node's and the NodeClaim's messages differ by kind."""
    assert terminating_message("Node") == "Interruption triggered termination for the Node"
    assert terminating_message("NodeClaim") == "Interruption triggered termination for the NodeClaim"


def test_termination_messages_are_karpenters() -> None:
    """Restates kubernetes-sigs/karpenter pkg/controllers/node/termination/terminator/events/events.go
    (EvictPod, NodeFailedToDrain, NodeTerminationGracePeriodExpiring) and disruption/events/events.go
    (Terminating, with the reason title-cased)."""
    assert words.evicted("Underutilized") == "Evicted pod: Underutilized"
    assert words.evicted("") == "Evicted pod: Forceful Termination"
    assert words.failed_draining("ns/web-0") == "Failed to drain node, evicting pod violates a PDB (Pod=ns/web-0)"
    assert words.failed_draining("ns/web-0", 2).endswith("(Pod=ns/web-0); 2 more pod(s) refused by a PodDisruptionBudget")
    assert words.grace_period_expiring(T) == "All pods will be deleted by 2026-01-02T03:04:05Z"
    assert words.disrupting("Node", "underutilized") == "Disrupting Node: Underutilized"
    assert words.disrupting("NodeClaim", "Empty") == "Disrupting NodeClaim: Empty"


def test_a_nodes_nodeclaim_is_found_by_node_name_or_provider_id() -> None:
    """#30.5: events go on the NodeClaim too (apiVersion karpenter.sh/v1) when the node has one."""
    claims = [
        {"metadata": {"name": "default-a", "uid": "u1"}, "status": {"nodeName": "ip-10-0-0-1.ec2.internal"}},
        {"metadata": {"name": "default-b", "uid": "u2"}, "status": {"providerID": "aws:///us-east-1a/i-0b"}},
        {"metadata": {"name": "default-c"}},
    ]
    assert claim_of(claims, "ip-10-0-0-1.ec2.internal") == ObjectRef("NodeClaim", "default-a", "", "u1", "karpenter.sh/v1")
    assert claim_of(claims, "ip-10-0-0-2.ec2.internal", "aws:///us-east-1a/i-0b") == ObjectRef.nodeclaim("default-b", "u2")
    assert claim_of(claims, "ip-10-0-0-3.ec2.internal", "aws:///us-east-1a/i-0c") is None
    assert claim_of(None, "ip-10-0-0-1.ec2.internal") is None
    assert ObjectRef.nodeclaim("default-a").to_dict() == {"kind": "NodeClaim", "name": "default-a",
                                                          "apiVersion": "karpenter.sh/v1"}
