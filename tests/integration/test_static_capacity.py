"""Static capacity (karpenter.sh/v1 ``spec.replicas``, Karpenter v1.8+): the pool keeps that many nodes
with no pod pending, and neither emptiness nor consolidation takes them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import instance_ids, managed_nodes, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("static")
sim = helpers.emptied_environment_fixture()

STATIC_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
spec:
  replicas: 2
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets:
      - nodes: "100%"
""" + helpers.DEMO_NODECLASS


def runtime_for(sim: Environment, **changes: Any) -> Runtime:
    """#31.5: with the StaticCapacity feature gate on (off by default, as in Karpenter)."""
    changes.setdefault("registration_timeout_seconds", 10.0**6)
    changes.setdefault("feature_gates", FeatureGates(static_capacity=True))
    return helpers.runtime_for(sim, **changes)


def test_a_static_pool_with_no_pods_keeps_its_two_nodes_through_provisioning_and_disruption(sim: Environment) -> None:
    put_pool(sim, STATIC_POOL)
    rt = runtime_for(sim)
    # #31.5: without the StaticCapacity gate (off by default: Karpenter registers no static provisioning then)
    # the static pool launches nothing, and pending pods launch none of its nodes either.
    assert provisioning.provision_once(runtime_for(sim, feature_gates=FeatureGates())).launches == []
    assert instance_ids(sim) == []
    first = provisioning.provision_once(rt)
    assert [x.nodepool for x in first.launches] == ["static", "static"]
    assert all(x.instance_type == "m5.large" for x in first.launches), "the cheapest allowed type"
    second = provisioning.provision_once(rt)
    assert second.launches == [], "the two in flight count"
    assert len(instance_ids(sim)) == 2
    wait_for("the nodes to register", lambda: len(managed_nodes(sim)) == 2, timeout=60)
    assert provisioning.provision_once(rt).launches == []

    nodes = {n["metadata"]["name"] for n in managed_nodes(sim)}
    for _ in range(3):
        run = disrupting.disrupt_once(rt)
        assert run["decisions"] == []
        sim.advance(60)  # past consolidateAfter
        time.sleep(0.3)
    assert {n["metadata"]["name"] for n in managed_nodes(sim)} == nodes
    assert len(instance_ids(sim)) == 2
