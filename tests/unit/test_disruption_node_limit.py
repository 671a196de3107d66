"""limits.nodes: a NodePool's node count bounds the replacements disruption launches (provisioning already
held to it: tests/unit/test_scheduling_reasons.py).

Restates Karpenter v1 (docs "NodePools", spec.limits: `nodes` counts the pool's nodes; "Disruption",
Terminate-First: a NodePool at its `limits.nodes` "can't launch a replacement without exceeding the
limit"): a node being replaced still counts until its instance is gone.
"""

from __future__ import annotations

from nodescale.model.instance import ManagedInstance
from nodescale.usecases.provision import capacity
from tests.unit.test_provisioning import (  # noqa: F401 - fixtures
    NOW,
    FakeLauncher,
    FakeRecorder,
    _instances_as_given,
    _pod,
    _rt,
    _world,
    recorder,
)


def test_a_replacement_is_not_launched_past_the_pools_node_limit(recorder: FakeRecorder) -> None:  # noqa: F811
    going = ManagedInstance("i-going", "m5.large", "us-east-1a", "spot", "default", "running", NOW)
    launcher = FakeLauncher()
    pods = [_pod("moved", "1")]
    at_limit = _world(limit='1000", nodes: "1', instances=[going])
    held = capacity.launch_capacity(_rt(launcher), at_limit, pods, exclude_nodes=["i-going"])
    assert launcher.calls == [] and [x.nodepool for x in held.limits] == ["default"]

    room = _world(limit='1000", nodes: "2', instances=[going])
    launched = capacity.launch_capacity(_rt(launcher), room, pods, exclude_nodes=["i-going"])
    assert len(launcher.calls) == 1 and [x.pods for x in launched.launches] == [["default/moved"]]

