"""#30.2: the status nodescale writes on NodePools and EC2NodeClasses, in Karpenter's shape.

Restates kubernetes-sigs/karpenter pkg/controllers/nodepool/counter/suite_test.go "Counter" / "should set the
counter from the nodeclaim and then to the node when it initializes" (resources sum the nodes' capacity, with
the node count under ``nodes``), pkg/controllers/nodepool/readiness/suite_test.go "Readiness" / "should have
status condition on nodePool as not ready when nodeClass is not ready" and "... as ready if nodeClass is
ready", and aws/karpenter-provider-aws pkg/controllers/nodeclass/subnet_test.go / ami_test.go "NodeClass
Subnet Status Provider" / "should resolve a valid selectors for Subnet by tags" and "should update
SubnetsReady status condition to false when no subnets are found" (the resolved parts and their conditions).
"""

from __future__ import annotations

from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling import pool_status as ps

NOW, LATER = "2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z"


def _conds(status: dict) -> dict[str, dict]:
    return {c["type"]: c for c in status["conditions"]}


def test_nodepool_resources_sum_its_nodes_and_count_them() -> None:
    status = ps.nodepool_status([{"cpu": 2000, "memory": 4 << 30}, {"cpu": 4000, "memory": 8 << 30}],
                                validation_error="", nodeclass_ready=("True", ""), old={}, now=NOW, generation=3)
    assert status["resources"]["cpu"] == "6" and status["resources"]["memory"] == "12Gi"
    assert status["resources"]["nodes"] == "2"
    conds = _conds(status)
    assert {t: c["status"] for t, c in conds.items()} == {
        "Ready": "True", "ValidationSucceeded": "True", "NodeClassReady": "True"}
    assert conds["Ready"]["observedGeneration"] == 3


def test_a_refused_nodepool_is_not_ready_with_the_error() -> None:
    status = ps.nodepool_status([], validation_error="cluster:NodePool/x: spec.limits.cpu: bad quantity",
                                nodeclass_ready=("False", "SubnetsReady is not True"), old={}, now=NOW, generation=1)
    conds = _conds(status)
    assert conds["ValidationSucceeded"]["status"] == "False"
    assert conds["ValidationSucceeded"]["message"] == "cluster:NodePool/x: spec.limits.cpu: bad quantity"
    assert conds["NodeClassReady"]["status"] == "False" and conds["NodeClassReady"]["reason"] == "NodeClassNotReady"
    assert conds["Ready"]["status"] == "False" and status["resources"] == {"nodes": "0"}


def test_the_same_facts_give_the_same_status_so_nothing_is_written_again() -> None:
    first = ps.nodepool_status([{"cpu": 1000}], validation_error="", nodeclass_ready=("True", ""), old={},
                               now=NOW, generation=1)
    again = ps.nodepool_status([{"cpu": 1000}], validation_error="", nodeclass_ready=("True", ""), old=first,
                               now=LATER, generation=1)
    assert again == first


def test_nodeclass_status_lists_what_resolved_and_names_what_did_not() -> None:
    reqs = Requirements([Requirement.exactly("kubernetes.io/arch", "amd64")])
    status = ps.nodeclass_status(
        subnets=ps.Part(ps.subnet_entries([("subnet-b", "us-east-1b", ""), ("subnet-a", "us-east-1a", "use1-az1")])),
        security_groups=ps.Part(error="no security group matches the selector terms"),
        amis=ps.Part(ps.ami_entries([("ami-1", "al2023", reqs)])),
        instance_profile=ps.Part("nodes-profile"), validation_error="", old={}, now=NOW, generation=1)
    assert status["subnets"] == [{"id": "subnet-a", "zone": "us-east-1a", "zoneID": "use1-az1"},
                                 {"id": "subnet-b", "zone": "us-east-1b"}]
    assert status["amis"] == [{"id": "ami-1", "name": "al2023", "requirements": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
    assert status["instanceProfile"] == "nodes-profile" and "securityGroups" not in status
    conds = _conds(status)
    assert conds["SecurityGroupsReady"]["status"] == "False"
    assert conds["SecurityGroupsReady"]["reason"] == "SecurityGroupsNotFound"
    assert "no security group" in conds["SecurityGroupsReady"]["message"]
    assert all(conds[t]["status"] == "True" for t in ("SubnetsReady", "AMIsReady", "InstanceProfileReady",
                                                      "ValidationSucceeded"))
    assert conds["Ready"]["status"] == "False" and "SecurityGroupsReady" in conds["Ready"]["message"]
    assert ps.ready_of(status)[0] == "False"
