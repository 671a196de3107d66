"""Broken configuration never stops healthy configuration (issue #12's acceptance, on sim/).

One SSM parameter of 1,000 nested brackets (2 KB) used to raise RecursionError in every function: the
provisioner, the disruption function and `nodescale status` failed, and the interruption function cordoned a
spot node and then raised before replacing or draining it. Now it is an error of that parameter alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.interrupt import entry
from nodescale.usecases.interrupt import handle as interrupting
from nodescale.usecases.interrupt.summary import EventSummary
from nodescale.usecases.provision import provisioner as provisioning
from nodescale.usecases.world import read_world
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env
from tests.integration.helpers import ROOT, put_pool
from tests.integration.test_interruption import (
    ACCOUNT,
    deploy,
    event,
    instance_of,
    node,
    nodes_of,
    one_size_spot_pool,
    pods,
    provision,
    wait_running,
)
from tests.unit.test_config_bounded_yaml import alias_bomb

pytestmark = pytest.mark.integration

DEEP = "[" * 1000 + "]" * 1000
# #27.1: an expireAfter past Go's int64 of nanoseconds (3.6e20 s), which used to load and make every
# disruption pass raise OverflowError. Its own EC2NodeClass, so nothing but the duration is wrong.
HUGE_EXPIRY = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: forever}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: forever}
      expireAfter: 99999999999999999h
      requirements: []
  disruption: {consolidateAfter: 0s}
""" + helpers.DEMO_NODECLASS.replace("name: default", "name: forever")


def good_and_broken_pools(environment: Environment) -> None:
    one_size_spot_pool(environment)
    put_pool(environment, DEEP, "deep")
    put_pool(environment, HUGE_EXPIRY, "forever")
    put_pool(environment, alias_bomb(), "bomb")
    put_pool(environment, "apiVersion: karpenter.sh/v1alpha5\nkind: Provisoner\nmetadata: {name: typo}\nspec: {}\n",
             "typo")


env = helpers.environment_fixture("broken-config", sim_clock=False, prepare=good_and_broken_pools)
sim = helpers.emptied_environment_fixture(keep_pools=True)
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()


def deep_parameter(sim: Environment) -> str:
    return f"{helpers.pool_path(sim)}/deep"


def test_the_good_pool_provisions_and_the_broken_parameter_is_named(sim: Environment, rt: Runtime, ns: str) -> None:
    deploy(sim, ns, "inflate.yaml", inflate={"replicas": 2})
    helpers.wait_for("2 pending pods", lambda: len(pods(sim, ns)) >= 2)
    summary = provisioning.provision_once(rt)
    assert summary.launches and {launch.nodepool for launch in summary.launches} == {"default"}, summary
    errors = "\n".join(summary.config_errors)
    assert f"ssm:{deep_parameter(sim)}: nests 1000 levels deep" in errors
    assert '"Provisoner"' in errors
    wait_running(sim, ns, 2)


def test_an_expire_after_past_the_duration_range_refuses_its_pool_alone(sim: Environment, rt: Runtime, ns: str) -> None:
    """#27.1: the pool with expireAfter 99999999999999999h is an error naming the field and the range; the
    good pool still provisions (the broken one weighs more, so it would have taken the pods) and a
    disruption pass completes with only the configuration errors."""
    deploy(sim, ns, "inflate.yaml", inflate={"replicas": 1})
    helpers.wait_for("a pending pod", lambda: len(pods(sim, ns)) >= 1)
    summary = provisioning.provision_once(rt)
    assert {launch.nodepool for launch in summary.launches} == {"default"}, summary
    [error] = [e for e in summary.config_errors if f"{helpers.pool_path(sim)}/forever" in e]
    assert "spec.template.spec.expireAfter" in error and "out of range" in error, error
    assert "2562047h47m16.854775807s" in error
    wait_running(sim, ns, 1)
    passed = disrupting.disrupt_once(rt)
    assert [e for e in passed["errors"] if not e.startswith("configuration: ")] == [], passed["errors"]
    assert any("expireAfter" in e for e in passed["errors"])


def test_an_alias_bomb_parameter_is_refused_at_once_and_the_good_pool_launches(
    sim: Environment, rt: Runtime, ns: str
) -> None:
    """#27.2: nine levels of nine aliases in one parameter kept every function busy for minutes."""
    deploy(sim, ns, "inflate.yaml", inflate={"replicas": 2})
    helpers.wait_for("2 pending pods", lambda: len(pods(sim, ns)) >= 2)
    start = time.monotonic()
    summary = provisioning.provision_once(rt)
    assert time.monotonic() - start < 30, "the provisioner took too long"
    assert {launch.nodepool for launch in summary.launches} == {"default"}, summary
    bomb = [e for e in summary.config_errors if e.startswith(f"ssm:{helpers.pool_path(sim)}/bomb: line ")]
    assert len(bomb) == 1 and "document contains excessive aliasing" in bomb[0], summary.config_errors
    wait_running(sim, ns, 2)


def test_status_exits_0_and_names_the_broken_parameter(sim: Environment) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nodescale.cli", "status", "-o", "json"],
        capture_output=True, text=True, env=deployed_env(sim), cwd=ROOT, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert any(deep_parameter(sim) in line and "levels deep" in line for line in report["configErrors"])
    assert any(f"{helpers.pool_path(sim)}/bomb: line " in line and "excessive aliasing" in line
               for line in report["configErrors"]), report["configErrors"]  # #27.2
    text = subprocess.run(
        [sys.executable, "-m", "nodescale.cli", "status"],
        capture_output=True, text=True, env=deployed_env(sim), cwd=ROOT, timeout=120, check=False,
    )
    assert text.returncode == 0 and deep_parameter(sim) in text.stdout, text.stderr


def test_an_interruption_of_a_good_pools_node_is_handled_in_full(sim: Environment, rt: Runtime, ns: str) -> None:
    deploy(sim, ns, "inflate.yaml", inflate={"replicas": 2, "terminationGracePeriodSeconds": 1})
    running = provision(sim, rt, ns, 2)
    (victim,) = nodes_of(running)
    instance_id = instance_of(node(sim, victim))
    summary = entry.process(event("spot-interruption-warning.json", instance_id, sim), rt.settings,
                                   lambda: rt, account=ACCOUNT, deadline_monotonic=time.monotonic() + 60)
    assert isinstance(summary, EventSummary), summary
    (report,) = summary.instances
    assert report.action == interrupting.DRAINED and len(report.evicted) == 2, report
    assert report.replacement.launched and report.instance_terminated and report.node_deleted, report
    moved = wait_running(sim, ns, 2)
    assert victim not in nodes_of(moved)


def test_a_broken_custom_resource_gets_a_warning_event(sim: Environment) -> None:
    helpers.install_karpenter_crds(sim)
    api = sim.kube_api_client()
    broken = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "broken"},
              "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                "name": "missing"}}}}}
    request_json(api, "POST", "/apis/karpenter.sh/v1/nodepools", body=broken)
    try:
        world = read_world(helpers.runtime_for(sim, nodepool_sources=("ssm", "cluster")))
        assert "default" in world.nodepools
        assert any(str(e).startswith("cluster:NodePool/broken") for e in world.config_errors)
        events = request_json(api, "GET", "/api/v1/namespaces/default/events").get("items") or []
        warnings = [e for e in events if e["involvedObject"].get("kind") == "NodePool"
                    and e["involvedObject"].get("name") == "broken"]
        assert [(e["type"], e["reason"]) for e in warnings] == [("Warning", "InvalidConfiguration")]
        assert warnings[0]["message"].startswith("cluster:NodePool/broken: ")
    finally:
        request_json(api, "DELETE", "/apis/karpenter.sh/v1/nodepools/broken")
