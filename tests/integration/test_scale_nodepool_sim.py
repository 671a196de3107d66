"""`nodescale scale nodepool NAME --replicas N` on `sim/`, run as an operator's shell runs it (a subprocess
with the environment's settings): the static pool's SSM parameter changes, and the functions' next runs
bring the pool to the new count (Karpenter v1.8+ static capacity: `kubectl scale nodepool NAME
--replicas=N`; scaling down "will drain nodes and terminate" them, designs/static-capacity.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from nodescale.model.featuregates import FeatureGates
from nodescale.runtime import Runtime
from nodescale.usecases.disrupt import run as disrupting
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.deployed_env import deployed_env
from tests.integration.helpers import ROOT, instance_ids, managed_nodes, pool_path, put_pool, wait_for
from tests.integration.test_static_capacity import STATIC_POOL

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("scale-nodepool")
sim = helpers.emptied_environment_fixture(node_timeout=60)

# The pool as an operator keeps it: a comment that must survive the edit, and room for three nodes.
POOL = STATIC_POOL.replace("  replicas: 2\n", "  replicas: 2  # the baseline\n  limits:\n    nodes: 3\n")
# A dynamic pool beside it, using the same EC2NodeClass (defined once, in the static pool's parameter).
DYNAMIC = STATIC_POOL.split("---")[0].replace("  replicas: 2\n", "").replace("name: static", "name: dynamic", 1)


def runtime_for(sim: Environment) -> Runtime:
    """#31.5: with the StaticCapacity feature gate on (off by default, as in Karpenter)."""
    return helpers.runtime_for(sim, registration_timeout_seconds=10.0**6,
                               feature_gates=FeatureGates(static_capacity=True))


def nodescale(sim: Environment, *args: str, admin: bool = True, **settings: str) -> subprocess.CompletedProcess[str]:
    """`nodescale ARGS` in a shell with the environment's settings (and `settings`), as its administrator (or as
    the functions)."""
    changes: dict[str, Any] = dict(settings)
    if admin:
        changes.update({k: sim.admin_env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "KUBECONFIG")})
    return subprocess.run([sys.executable, "-m", "nodescale.cli", *args], capture_output=True, text=True,
                          env=deployed_env(sim, **changes), timeout=120, cwd=ROOT)


def parameter(sim: Environment) -> str:
    return sim.boto3_client("ssm").get_parameter(Name=f"{pool_path(sim)}/static")["Parameter"]["Value"]


def test_scaling_a_static_pool_up_and_down(sim: Environment) -> None:
    put_pool(sim, POOL, "static")
    put_pool(sim, DYNAMIC, "dynamic")
    rt = runtime_for(sim)
    assert len(provisioning.provision_once(rt).launches) == 2
    wait_for("two nodes", lambda: len(managed_nodes(sim)) == 2, timeout=60)

    # Up to 3: one JSON document, the comment kept, and the next provisioner pass launches the one more.
    done = nodescale(sim, "scale", "nodepool", "static", "--replicas", "3", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"nodePool": "static", "source": f"ssm:{pool_path(sim)}/static#0",
                                       "replicas": 3, "previousReplicas": 2, "changed": True, "dryRun": False,
                                       "notes": []}
    assert "  replicas: 3  # the baseline\n" in parameter(sim)
    assert [x.nodepool for x in provisioning.provision_once(rt).launches] == ["static"]
    wait_for("three nodes", lambda: len(managed_nodes(sim)) == 3, timeout=60)

    # What is refused, and why; nothing changes.
    over = nodescale(sim, "scale", "nodepool", "static", "--replicas", "4")
    assert over.returncode == 2 and "more than NodePool static's limits.nodes (3)" in over.stderr
    dynamic = nodescale(sim, "scale", "nodepool", "dynamic", "--replicas", "1")
    assert dynamic.returncode == 2 and "NodePool dynamic" in dynamic.stderr and "is not static" in dynamic.stderr
    as_functions = nodescale(sim, "scale", "nodepool", "static", "--replicas", "1", admin=False)
    assert as_functions.returncode == 1 and "AccessDenied" in as_functions.stderr, \
        "the functions' roles may read NodePool parameters, never write them"
    dry = nodescale(sim, "scale", "nodepool", "static", "--replicas", "1", "--dry-run")
    assert dry.returncode == 0 and dry.stdout == (f"nodepool.karpenter.sh/static would be scaled from 3 to 1 "
                                                  f"replicas (ssm:{pool_path(sim)}/static#0)\n")
    assert "  replicas: 3  # the baseline\n" in parameter(sim)

    # Down to 1: the next disruption run drains and terminates two of the three, whatever the budget.
    assert nodescale(sim, "scale", "nodepool", "static", "--replicas", "1").returncode == 0
    run = disrupting.disrupt_once(rt)
    assert [(d["reason"], d["action"]) for d in run["decisions"]] == [("ScaledDown", "delete")] * 2
    wait_for("one instance left", lambda: len(instance_ids(sim)) == 1, timeout=60)
    assert provisioning.provision_once(rt).launches == [], "one node is what the pool now asks for"


def test_scaling_a_static_pool_kept_in_the_cluster_patches_its_object(sim: Environment) -> None:
    """The NodePool as a karpenter.sh/v1 custom resource: `spec.replicas` is patched, the rest untouched, and
    the provisioner (reading the cluster) launches the new count."""
    import yaml

    from nodescale.k8s.raw import request_json

    helpers.install_karpenter_crds(sim)
    api = sim.kube_api_client()
    pool, node_class = yaml.safe_load_all(STATIC_POOL.replace("replicas: 2", "replicas: 0"))
    request_json(api, "POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", body=node_class)
    request_json(api, "POST", "/apis/karpenter.sh/v1/nodepools", body=pool)

    done = nodescale(sim, "scale", "nodepool", "static", "--replicas", "1", NODESCALE_NODEPOOL_SOURCES="cluster")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "nodepool.karpenter.sh/static scaled from 0 to 1 replicas (cluster:NodePool/static)\n"
    stored = request_json(api, "GET", "/apis/karpenter.sh/v1/nodepools/static")
    assert stored["spec"]["replicas"] == 1 and stored["spec"]["template"] == pool["spec"]["template"]
    rt = helpers.runtime_for(sim, nodepool_sources=("cluster",), registration_timeout_seconds=10.0**6,
                             feature_gates=FeatureGates(static_capacity=True))
    assert [x.nodepool for x in provisioning.provision_once(rt).launches] == ["static"]
