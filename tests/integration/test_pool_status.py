"""#30.2 on sim/: nodescale writes NodePool and EC2NodeClass status as Karpenter does, through the status
subresource, and the pinned kubectl's `get nodepools` shows it.

Karpenter behaviours restated:
- kubernetes-sigs/karpenter pkg/controllers/nodepool/counter/suite_test.go "Counter" / "should set the counter
  from the nodeclaim and then to the node when it initializes": status.resources is the pool's nodes' capacity
  with their count under ``nodes``;
- pkg/controllers/nodepool/readiness/suite_test.go "Readiness" / "should have status condition on nodePool as
  ready if nodeClass is ready"; pkg/controllers/nodepool/validation/suite_test.go "Validation" / "should set
  the NodePoolValidationSucceeded condition to false when the NodePool is invalid";
- aws/karpenter-provider-aws pkg/controllers/nodeclass/subnet_test.go "NodeClass Subnet Status Provider" /
  "should resolve a valid selectors for Subnet by tags" and ami_test.go "NodeClass AMI Status Controller" /
  "should resolve amiSelector AMIs and requirements into status" (the EC2NodeClass status suite).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from nodescale.k8s.raw import request_json
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, runtime_for, wait_for
from tests.integration.test_nodeclaims import kubectl

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("poolstatus")
sim = helpers.emptied_environment_fixture(node_timeout=20)
ns = helpers.namespace_fixture()

PLURAL = {"NodePool": "karpenter.sh/v1/nodepools", "EC2NodeClass": "karpenter.k8s.aws/v1/ec2nodeclasses"}


def _conds(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _get(sim: Environment, kind: str, name: str) -> dict[str, Any]:
    return request_json(sim.kube_api_client(), "GET", f"/apis/{PLURAL[kind]}/{name}")


def _apply_example(sim: Environment, broken_pool: bool = False) -> None:
    api = sim.kube_api_client()
    for doc in yaml.safe_load_all((EXAMPLES / "karpenter-v1/default.yaml").read_text()):
        request_json(api, "POST", f"/apis/{PLURAL[doc['kind']]}", body=doc)
        if broken_pool and doc["kind"] == "NodePool":
            bad = copy.deepcopy(doc)
            bad["metadata"]["name"] = "broken"
            bad["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "missing"
            request_json(api, "POST", f"/apis/{PLURAL['NodePool']}", body=bad)


def _pending_pod(sim: Environment, ns: str) -> None:
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m"}}}]}})
    wait_for("the pod unschedulable", lambda: any(
        c.get("reason") == "Unschedulable"
        for p in helpers.pods(sim, ns) for c in (p.get("status") or {}).get("conditions") or []))


def test_nodepool_and_ec2nodeclass_status_after_a_pass(sim: Environment, ns: str) -> None:
    """#30.2: resources and node count, Ready/ValidationSucceeded/NodeClassReady on the NodePool (False with
    the error on a pool nodescale refused), resolved subnets, security groups, AMIs and instance profile with
    their conditions on the EC2NodeClass; `kubectl get nodepools` shows Nodes and Ready."""
    helpers.install_karpenter_crds(sim)
    _apply_example(sim, broken_pool=True)
    _pending_pod(sim, ns)
    rt = runtime_for(sim, nodepool_sources=("cluster",))

    [launch] = provisioning.provision_once(rt).launches

    nc = _get(sim, "EC2NodeClass", "default")
    status = nc["status"]
    ec2 = sim.boto3_client("ec2")
    subnets = {s["SubnetId"]: s for s in ec2.describe_subnets(SubnetIds=[s["id"] for s in status["subnets"]])["Subnets"]}
    assert subnets and all(subnets[s["id"]]["AvailabilityZone"] == s["zone"] for s in status["subnets"])
    assert launch.zone in {s["zone"] for s in status["subnets"]}
    assert status["securityGroups"] and all(g["id"].startswith("sg-") for g in status["securityGroups"])
    assert status["amis"] and all(a["id"].startswith("ami-") and a["requirements"] for a in status["amis"])
    assert status["instanceProfile"]
    conds = _conds(nc)
    for type_ in ("Ready", "SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady",
                  "ValidationSucceeded"):
        assert conds[type_]["status"] == "True", conds[type_]

    pool = _get(sim, "NodePool", "default")
    assert pool["status"]["resources"]["nodes"] == "1"
    assert pool["status"]["resources"]["cpu"]
    assert {t: c["status"] for t, c in _conds(pool).items()} == {
        "Ready": "True", "ValidationSucceeded": "True", "NodeClassReady": "True"}

    broken = _conds(_get(sim, "NodePool", "broken"))
    assert broken["ValidationSucceeded"]["status"] == "False" and broken["ValidationSucceeded"]["message"]
    assert broken["NodeClassReady"]["status"] == "False" and broken["Ready"]["status"] == "False"

    # Once the node has registered and initialized, a pass that finds nothing changed writes no status.
    def settled() -> bool:
        provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",)))
        return any((n["metadata"].get("labels") or {}).get("karpenter.sh/initialized") == "true"
                   for n in helpers.managed_nodes(sim))

    wait_for("the node to register and initialize", settled, timeout=60)
    version = _get(sim, "NodePool", "default")["metadata"]["resourceVersion"]
    provisioning.provision_once(runtime_for(sim, nodepool_sources=("cluster",)))
    assert _get(sim, "NodePool", "default")["metadata"]["resourceVersion"] == version

    table = kubectl(sim, "get", "nodepools").splitlines()
    assert table[0].split()[:4] == ["NAME", "NODECLASS", "NODES", "READY"]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["default"][1:4] == ["default", "1", "True"]
    assert rows["broken"][3] == "False"
