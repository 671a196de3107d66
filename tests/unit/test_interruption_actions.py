"""action_for, the interruption policy: intent x Node x NodePool setting -> what happens to the instance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from nodescale.interruption.actions import (
    REBALANCE_ANNOTATION,
    REBALANCE_INTERRUPT,
    Action,
    Outcome,
    Reason,
    Step,
    action_for,
    nodepool_name,
)
from nodescale.interruption.intents import Intent, IntentAction, Kind
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import NodePool
from nodescale.model.requirements import Requirements

T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)
IID = "i-0a1b2c3d4e5f60718"
OPT_IN = {REBALANCE_ANNOTATION: REBALANCE_INTERRUPT}


def intent(action: IntentAction, kind: Kind, detail: str = "") -> Intent:
    return Intent(IID, action, kind, "e1", T0, detail)


def node(annotations: dict[str, str] | None = None) -> ClusterNode:
    return ClusterNode.from_dict({"metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "spot"},
                                               "annotations": annotations or {}}})


def pool(annotations: dict[str, str] | None = None) -> NodePool:
    return NodePool("spot", Requirements(), "default", annotations=annotations or {})


SPOT = intent(IntentAction.INTERRUPT, Kind.SPOT_INTERRUPTION, "terminate")
SCHEDULED = intent(IntentAction.INTERRUPT, Kind.SCHEDULED_CHANGE, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED")
STOPPING = intent(IntentAction.INTERRUPT, Kind.INSTANCE_STATE_CHANGE, "stopping")
RUNNING = intent(IntentAction.NO_ACTION, Kind.INSTANCE_STATE_CHANGE, "running")
REBALANCE = intent(IntentAction.REBALANCE_RISK, Kind.REBALANCE_RECOMMENDATION)
RUNNING_REASON = "instance running: no disruption, its node is expected to register"

CASES = [
    # a spot warning drains and marks the offering, even with no Node (nothing should launch into it)
    ("spot warning, node", SPOT, node(), None, Action(Step.DRAIN, True)),
    ("spot warning, no node", SPOT, None, None, Action(Step.NOTHING, True, Reason.NO_NODE)),
    ("spot warning, pool says record", SPOT, node(), pool({REBALANCE_ANNOTATION: "record"}), Action(Step.DRAIN, True)),
    # other going-away events drain without touching the offerings
    ("scheduled change, node", SCHEDULED, node(), None, Action(Step.DRAIN)),
    ("stopping, node", STOPPING, node(), pool(), Action(Step.DRAIN)),
    ("stopping, no node", STOPPING, None, None, Action(Step.NOTHING, False, Reason.NO_NODE)),
    # running/pending: nothing, whatever the Node
    ("running, node", RUNNING, node(), pool(OPT_IN), Action(Step.NOTHING, reason=RUNNING_REASON)),
    ("running, no node", RUNNING, None, None, Action(Step.NOTHING, reason=RUNNING_REASON)),
    # rebalance: recorded unless the NodePool or the Node opts in
    ("rebalance, pool opted in", REBALANCE, node(), pool(OPT_IN), Action(Step.DRAIN, False, Reason.REBALANCE_OPTED_IN)),
    ("rebalance, node opted in", REBALANCE, node(OPT_IN), pool(), Action(Step.DRAIN, False, Reason.REBALANCE_OPTED_IN)),
    ("rebalance, node opted in, no pool", REBALANCE, node(OPT_IN), None,
     Action(Step.DRAIN, False, Reason.REBALANCE_OPTED_IN)),
    ("rebalance, pool silent", REBALANCE, node(), pool(), Action(Step.RECORD)),
    ("rebalance, pool says record", REBALANCE, node(), pool({REBALANCE_ANNOTATION: "record"}), Action(Step.RECORD)),
    ("rebalance, pool unknown", REBALANCE, node(), None, Action(Step.RECORD)),
    ("rebalance, no node", REBALANCE, None, pool(OPT_IN), Action(Step.NOTHING, False, Reason.NO_NODE)),
]


@pytest.mark.parametrize(("intent_", "node_", "pool_", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_action_for(intent_: Intent, node_: ClusterNode | None, pool_: NodePool | None, expected: Action) -> None:
    assert action_for(intent_, node_, pool_) == expected


def test_the_words_are_the_summaries_strings() -> None:
    assert [o.value for o in Outcome] == ["drained", "draining", "recorded", "none", "ignored"]
    assert Reason.REBALANCE_OPTED_IN == "NodePool opted in (nodescale.io/rebalance: interrupt)"
    assert f"{Outcome.DRAINED}" == "drained" and IntentAction.REBALANCE_RISK == "rebalance"


def test_the_instance_tag_names_the_pool_before_the_node_labels() -> None:
    assert nodepool_name(node(), "tagged") == "tagged"
    assert nodepool_name(node(), "") == "spot"
    assert nodepool_name(ClusterNode.from_dict({"metadata": {"labels": {"karpenter.sh/provisioner-name": "old"}}}),
                         "") == "old"
    assert nodepool_name(ClusterNode.from_dict({}), "") == ""
