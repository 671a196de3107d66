"""#31.3: ``vpc.amazonaws.com/pod-eni`` (security groups for pods) in the catalog, as Karpenter advertises it.

Restates aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go, Describe "InstanceTypeProvider":
It "should launch vpc.amazonaws.com/pod-eni on a compatible instance type" and It "should not launch AWS Pod
ENI on a t3"; the counts are the VPC resource controller's branch interfaces per type (Karpenter's
``awsPodENI`` in pkg/providers/instancetype/types.go reads the same table).
"""

from __future__ import annotations

import json

from nodescale.aws import pricing
from nodescale.aws.branchinterfaces import DATA_FILE, branch_interfaces
from nodescale.aws.catalog import BUNDLE_FILE, bundled_catalog
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.nodecapacity import with_kubelet
from nodescale.model.nodepool import KubeletSettings, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirements
from nodescale.scheduling.scheduler import solve

CATALOG = {it.name: it for it in bundled_catalog("us-east-1")}


def pod(selector: dict | None = None) -> Pod:
    requests = {"cpu": "500m", "memory": "512Mi", res.POD_ENI: "1"}
    spec = {"nodeSelector": selector or {}, "containers": [{"name": "c", "resources": {"requests": requests}}]}
    return Pod.from_dict({"metadata": {"name": "sg-pod", "namespace": "default"}, "spec": spec})


def plan_for(pods: list[Pod]):
    pool = NodePool(name="default", requirements=Requirements(), node_class="default")
    return solve(pods, [pool], {"default": list(CATALOG.values())})


def test_a_trunk_compatible_type_advertises_its_branch_interfaces():
    # m5.large: 9 branch interfaces, c5.18xlarge: 107 (the VPC resource controller's limits table).
    assert CATALOG["m5.large"].capacity[res.POD_ENI] == 9
    assert CATALOG["c5.18xlarge"].capacity[res.POD_ENI] == 107


def test_a_type_that_cannot_trunk_advertises_none():
    assert branch_interfaces("t3.large") == 0
    assert res.POD_ENI not in CATALOG["t3.large"].capacity


def test_should_launch_pod_eni_on_a_compatible_instance_type():
    plan = plan_for([pod()])
    [claim] = plan.node_claims
    assert not plan.unschedulable
    assert claim.instance_types and all(branch_interfaces(name) >= 1 for name in claim.instance_types)


def test_should_not_launch_pod_eni_on_a_t3():
    plan = plan_for([pod({wk.INSTANCE_TYPE: "t3.large"})])
    assert not plan.node_claims and len(plan.unschedulable) == 1


def test_a_node_class_keeps_the_branch_interfaces_but_windows_has_none():
    """Kubelet settings do not change them; EKS gives Windows nodes no branch interfaces (security groups for
    pods are Linux-only), so a Windows node class offers none rather than a node the pod never runs on."""
    [linux] = with_kubelet([CATALOG["m5.large"]], KubeletSettings(max_pods=20), None)
    assert linux.capacity[res.POD_ENI] == 9
    [windows] = with_kubelet([CATALOG["m5.large"]], None, None, "Windows2022")
    assert res.POD_ENI not in windows.capacity


def test_the_bundled_table_names_its_source_and_only_catalog_types():
    table = json.loads(pricing.read_data_file(DATA_FILE))
    assert "zz_generated.vpclimits.go" in table["source"] and "amazon-vpc-resource-controller-k8s" in table["source"]
    catalog_types = {row[0] for row in json.loads(pricing.read_data_file(BUNDLE_FILE))["types"]}
    assert set(table["types"]) <= catalog_types
