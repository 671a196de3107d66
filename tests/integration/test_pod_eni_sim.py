"""#31.3 on `sim/`: a pod asking for ``vpc.amazonaws.com/pod-eni`` (security groups for pods) gets a node of a
trunk-compatible type, whose kubelet advertises the branch interfaces (as the VPC resource controller does on
EKS), and runs there.

Restates aws/karpenter-provider-aws test/suites/integration/extended_resources_test.go, Describe "Extended
Resources": It "should provision nodes for a deployment that requests vpc.amazonaws.com/pod-eni (security
groups for pods)".
"""

from __future__ import annotations

import pytest

from nodescale.aws.branchinterfaces import branch_interfaces
from nodescale.k8s.raw import request_json
from nodescale.runtime import Runtime
from nodescale.usecases.provision import provisioner as provisioning
from sim.environment import Environment
from tests.integration import helpers
from tests.integration.helpers import EXAMPLES, node_of, pods, put_pool, wait_for

pytestmark = pytest.mark.integration

env = helpers.environment_fixture("pod-eni")
sim = helpers.emptied_environment_fixture()
rt = helpers.runtime_fixture()
ns = helpers.namespace_fixture()

POD_ENI = "vpc.amazonaws.com/pod-eni"


def test_a_pod_asking_for_a_branch_interface_gets_a_node_that_runs_it(sim: Environment, rt: Runtime,
                                                                     ns: str) -> None:
    put_pool(sim, (EXAMPLES / "karpenter-v1" / "default.yaml").read_text(), "default")
    request = {"cpu": "500m", "memory": "64Mi", POD_ENI: "1"}
    request_json(sim.kube_api_client(), "POST", f"/api/v1/namespaces/{ns}/pods", body={
        "metadata": {"name": "sg-pod"},
        "spec": {"containers": [{"name": "c", "image": "pause",
                                 "resources": {"requests": request, "limits": {POD_ENI: "1"}}}]}})
    wait_for("the pod unschedulable", lambda: any(
        c.get("reason") == "Unschedulable" for p in pods(sim, ns) for c in (p.get("status") or {}).get("conditions") or []))

    summary = provisioning.provision_once(rt)

    [launch] = summary.launches
    assert branch_interfaces(launch.instance_type) >= 1, launch.instance_type
    node = node_of(sim, launch.instance_id)
    assert int(node["status"]["allocatable"][POD_ENI]) == branch_interfaces(launch.instance_type)
    wait_for("the pod running on that node", lambda: [
        p for p in pods(sim, ns)
        if p["spec"].get("nodeName") == node["metadata"]["name"] and (p.get("status") or {}).get("phase") == "Running"], 30)
