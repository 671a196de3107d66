"""#31.3 and #31.4: Karpenter v1.15's well-known labels and resources, and pods with DRA claims.

Restates:
- aws/karpenter-provider-aws pkg/apis/v1/labels.go (WellKnownLabels) with kubernetes-sigs/karpenter
  pkg/apis/v1/nodepool_validation (a well-known label is not restricted) and scheduling suite_test.go,
  Context "Well Known Labels", It "should use well known labels" / "should not schedule pods that have node
  selectors with In operator and undefined key";
- aws/karpenter-provider-aws pkg/providers/instancetype/suite_test.go: "should launch pod in flex instance
  type", "should not launch pod when flex instances are disallowed", "should launch trn1 instances for
  aws.amazon.com/neuron resource requests", "should launch inf2 instances for aws.amazon.com/neuroncore
  resource requests", "should launch instances for vpc.amazonaws.com/efa resource requests";
- kubernetes-sigs/karpenter scheduling suite_test.go, Describe "Dynamic Resource Allocation (DRA)":
  "should handle DRA pods correctly" and "should handle DaemonSet pods with DRA requirements based on
  IgnoreDRARequests flag value" (the default, true).
"""

from __future__ import annotations

import pytest

from nodescale.aws.catalog import bundled_catalog
from nodescale.config.requirement_rules import parse_requirements
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.plan import UnschedulableKind
from nodescale.scheduling.scheduler import solve
from nodescale.settings import Settings, SettingsError

CATALOG = {it.name: it for it in bundled_catalog("us-east-1")}
NEW_KEYS = (
    wk.CAPACITY_RESERVATION_ID, wk.CAPACITY_RESERVATION_TYPE, wk.CAPACITY_RESERVATION_INTERRUPTIBLE,
    wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, wk.INSTANCE_NITRO_ENCLAVES, wk.INSTANCE_CAPABILITY_FLEX,
    wk.INSTANCE_TENANCY, wk.PLACEMENT_GROUP_ID, wk.PLACEMENT_GROUP_PARTITION,
)


def pod(name: str = "p", requests: dict | None = None, selector: dict | None = None, **spec: object) -> Pod:
    body = {"nodeSelector": selector or {}, **spec,
            "containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "500m", "memory": "512Mi"}}}]}
    return Pod.from_dict({"metadata": {"name": name, "namespace": "default"}, "spec": body})


def plan_for(pods: list[Pod], reqs: Requirements | None = None, types: list[InstanceType] | None = None,
             daemons: list[Pod] = ()):
    pool = NodePool(name="default", requirements=reqs or Requirements(), node_class="default")
    return solve(pods, [pool], {"default": types if types is not None else list(CATALOG.values())},
                 daemonset_pods=daemons)


@pytest.mark.parametrize("key", NEW_KEYS)
def test_every_v115_well_known_label_is_accepted_in_a_nodepool_requirement(key):
    reqs = parse_requirements([{"key": key, "operator": "Exists"}], "spec.template.spec.requirements")
    assert key in reqs


def test_the_catalog_gives_each_type_karpenters_values_for_the_new_labels():
    m5 = CATALOG["m5.large"].labels
    assert m5[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] == "3100"
    assert m5[wk.INSTANCE_NITRO_ENCLAVES] == "false" and m5[wk.INSTANCE_CAPABILITY_FLEX] == "false"
    assert m5[wk.INSTANCE_TENANCY] == "default"
    assert CATALOG["c7i-flex.large"].labels[wk.INSTANCE_CAPABILITY_FLEX] == "true"
    assert CATALOG["c5n.18xlarge"].labels[wk.INSTANCE_NITRO_ENCLAVES] == "true"


def test_a_label_the_catalog_does_not_know_for_a_type_does_not_exist_on_it():
    """A type without the label (p3: EC2's recording gives no sustained clock) has DoesNotExist on it, as
    Karpenter's provider does, so an In never matches it and a NotIn does."""
    p3 = CATALOG["p3.2xlarge"]
    assert wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ not in p3.labels
    req = p3.requirements.get(wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ)
    assert req is not None and req.operator == "DoesNotExist"
    pinned = Requirements([Requirement.create(wk.INSTANCE_TYPE, "In", ["p3.2xlarge"])])
    asks = pod(selector={wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: "2300"})
    plan = plan_for([asks], pinned)
    assert not plan.node_claims and len(plan.unschedulable) == 1


def test_pods_selecting_the_new_labels_get_types_with_those_values():
    """should launch pod in flex instance type / should not launch pod when flex instances are disallowed."""
    flex = plan_for([pod(selector={wk.INSTANCE_CAPABILITY_FLEX: "true"})])
    [claim] = flex.node_claims
    assert claim.instance_types and all("-flex." in name for name in claim.instance_types)
    fast = Requirements([Requirement.create(wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, "Gt", ["3500"])])
    [claim] = plan_for([pod(selector={wk.INSTANCE_NITRO_ENCLAVES: "true"})], fast).node_claims
    for name in claim.instance_types:
        labels = CATALOG[name].labels
        assert int(labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ]) > 3500 and labels[wk.INSTANCE_NITRO_ENCLAVES] == "true"
    no_flex = Requirements([Requirement.create(wk.INSTANCE_CAPABILITY_FLEX, "In", ["false"])])
    refused = plan_for([pod(selector={wk.INSTANCE_CAPABILITY_FLEX: "true"})], no_flex)
    assert not refused.node_claims and len(refused.unschedulable) == 1


def test_dedicated_tenancy_and_placement_groups_find_no_type():
    """nodescale launches default tenancy and no placement group: a pod asking for either gets no node,
    rather than a node that is not what it asked for."""
    for selector in ({wk.INSTANCE_TENANCY: "dedicated"}, {wk.PLACEMENT_GROUP_ID: "pg-0123"}):
        plan = plan_for([pod(selector=selector)])
        assert not plan.node_claims and len(plan.unschedulable) == 1, selector


def _reserved_type(kind: str) -> InstanceType:
    base = CATALOG["m5.large"]
    offerings = (Offering("us-east-1a", wk.CAPACITY_ON_DEMAND, 0.096),
                 Offering("us-east-1a", wk.CAPACITY_RESERVED, 1e-8, reservation_id="cr-1", reservation_type=kind,
                          reservation_capacity=3))
    return base.copy(offerings=offerings)


def test_a_capacity_reservation_type_requirement_picks_offerings_of_that_type():
    """A NodePool may require karpenter.k8s.aws/capacity-reservation-type; offerings outside a reservation
    lack the label (Karpenter's DoesNotExist), so only a reservation of that type takes the pod."""
    block = Requirements([Requirement.create(wk.CAPACITY_RESERVATION_TYPE, "In", ["capacity-block"])])
    plan = plan_for([pod()], block, [_reserved_type("capacity-block")])
    [claim] = plan.node_claims
    assert claim.capacity_types == [wk.CAPACITY_RESERVED] and claim.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    other = plan_for([pod()], block, [_reserved_type("default")])
    assert not other.node_claims and len(other.unschedulable) == 1
    by_pod = plan_for([pod(selector={wk.CAPACITY_RESERVATION_TYPE: "default"})], None, [_reserved_type("default")])
    [claim] = by_pod.node_claims
    assert claim.capacity_types == [wk.CAPACITY_RESERVED] and claim.labels[wk.CAPACITY_RESERVATION_ID] == "cr-1"


@pytest.mark.parametrize("resource, count, family", [
    (res.NEURON, 16, "trn1.32xlarge"),
    (res.NEURON_CORE, 32, "trn1.32xlarge"),
    (res.EFA, 4, "p4d.24xlarge"),
])
def test_special_resources_are_in_the_types_capacity_and_get_a_node(resource, count, family):
    assert CATALOG[family].capacity.get(resource) == count
    plan = plan_for([pod(requests={"cpu": "1", resource: "1"})])
    [claim] = plan.node_claims
    assert claim.instance_types and all(CATALOG[n].capacity.get(resource, 0) >= 1 for n in claim.instance_types)


def test_a_pod_with_resource_claims_is_not_launched_for_and_says_why():
    claims = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    container_claim = Pod.from_dict({"metadata": {"name": "c", "namespace": "default"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}})
    plan = plan_for([pod("dra", **claims), container_claim, pod("plain")])
    assert [p.name for c in plan.node_claims for p in c.pods] == ["plain"]
    refused = {u.pod.name: u for u in plan.unschedulable}
    assert set(refused) == {"dra", "c"}
    assert all(u.kind == UnschedulableKind.DRA and "IGNORE_DRA_REQUESTS" in u.reason for u in refused.values())


def test_a_daemonset_pod_with_resource_claims_adds_no_overhead():
    daemon = pod("ds", requests={"cpu": "3"}, resourceClaims=[{"name": "x", "resourceClaimName": "x"}])
    daemon.owner_kind = "DaemonSet"
    small = [CATALOG[n] for n in ("m5.large", "m5.xlarge")]
    [claim] = plan_for([pod(requests={"cpu": "1"})], None, small, [daemon]).node_claims
    assert claim.instance_types[0] == "m5.large"


def test_ignore_dra_requests_takes_karpenters_name_and_default():
    base = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}
    assert Settings.from_env(base).ignore_dra_requests is True
    assert Settings.from_env({**base, "IGNORE_DRA_REQUESTS": "true"}).ignore_dra_requests is True
    for bad in ("false", "maybe"):
        with pytest.raises(SettingsError, match="IGNORE_DRA_REQUESTS"):
            Settings.from_env({**base, "IGNORE_DRA_REQUESTS": bad})
