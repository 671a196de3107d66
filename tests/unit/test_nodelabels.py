"""Issue 14: the labels a node is planned with are the labels it carries, for every type of the catalog.

Karpenter behaviour restated: a node's labels are its NodeClaim's, i.e. the instance type's
requirements pinned to the launched type and offering, plus the pool's template labels and name
(kubernetes-sigs/karpenter NodeClaim registration; aws/karpenter-provider-aws instance type labels).
"""

from __future__ import annotations

import pytest

from nodescale.aws import catalog, userdata
from nodescale.model import labels as wk
from nodescale.model import nodelabels
from nodescale.model.nodepool import NodePool
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.templates import PoolTemplate, labels_satisfy, type_satisfies

V1 = NodePool("default", Requirements([Requirement.exactly(wk.CAPACITY_TYPE, "spot", "on-demand")]), "default",
              labels={"team": "platform"})
V1ALPHA5 = NodePool("legacy", Requirements([Requirement.exactly(wk.CAPACITY_TYPE, "spot")]), "legacy",
                    api_version=nodelabels.V1ALPHA5, node_class_kind="AWSNodeTemplate")


def _checks(pool: NodePool) -> None:
    template = PoolTemplate(0, pool, {})
    capacity = template.requirements.get(wk.CAPACITY_TYPE)
    checked = 0
    for it in catalog.bundled_catalog("us-east-1"):
        offering = next((o for o in it.offerings if o.available and capacity.has(o.capacity_type)), None)
        if offering is None:
            continue  # the solver never plans it for this pool (no price, or no such capacity type)
        checked += 1
        labels = nodelabels.node_labels(pool, it.labels, zone=offering.zone, capacity_type=offering.capacity_type,
                                        zone_id="use1-az9")
        # What the solver matched the type against is what the node carries, label by label.
        assert type_satisfies(labels, it.operating_systems, it.requirements), it.name
        for key, req in it.requirements.items():
            value = labels.get(key)
            if req.operator == "DoesNotExist":
                assert value is None, (it.name, key)
            else:
                assert value is not None and req.has(value), (it.name, key, value)
        assert labels_satisfy(labels, template.requirements), it.name
        assert labels[wk.ZONE_ID] == "use1-az9" and labels[pool.label_key] == pool.name
        for key in (wk.INSTANCE_CATEGORY, wk.INSTANCE_FAMILY, wk.INSTANCE_SIZE, wk.INSTANCE_CPU, wk.INSTANCE_MEMORY,
                    wk.INSTANCE_HYPERVISOR, wk.INSTANCE_ENCRYPTION_IN_TRANSIT, wk.REGION, wk.ARCH, wk.OS,
                    wk.INSTANCE_TYPE, wk.CAPACITY_TYPE, wk.ZONE):
            assert key in labels, (it.name, key)
        # The kubelet registers with the part it may set; the functions add the rest on registration.
        assert userdata.node_labels(pool).items() <= labels.items()
    assert checked > 500


def test_every_catalog_type_on_a_v1_pool_carries_what_it_was_planned_with() -> None:
    _checks(V1)
    assert nodelabels.pool_labels(V1) == {"team": "platform", wk.NODEPOOL: "default", wk.NODECLASS: "default"}


def test_every_catalog_type_on_a_v1alpha5_pool_carries_what_it_was_planned_with() -> None:
    _checks(V1ALPHA5)
    # Karpenter v0.31 named the Provisioner and labelled nothing with the AWSNodeTemplate; not
    # karpenter.sh/nodepool, which names a NodePool's nodes (issue #14: both kinds may share a name).
    assert nodelabels.pool_labels(V1ALPHA5) == {wk.LEGACY_PROVISIONER: "legacy"}


@pytest.mark.parametrize("name, present", [
    ("inf2.xlarge", {wk.INSTANCE_ACCELERATOR_NAME: "inferentia2", wk.INSTANCE_ACCELERATOR_MANUFACTURER: "aws",
                     wk.INSTANCE_ACCELERATOR_COUNT: "1"}),
    ("g4dn.xlarge", {wk.INSTANCE_GPU_MANUFACTURER: "nvidia", wk.INSTANCE_GPU_COUNT: "1"}),
    ("m5.large", {wk.INSTANCE_EBS_BANDWIDTH: "650", wk.INSTANCE_CPU_MANUFACTURER: "intel"}),
])
def test_device_and_bandwidth_labels_where_the_type_has_them(name: str, present: dict[str, str]) -> None:
    [it] = [t for t in catalog.bundled_catalog("us-east-1") if t.name == name]
    assert present.items() <= it.labels.items()
