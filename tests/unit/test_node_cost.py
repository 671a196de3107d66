"""What a node costs (issue #14 item 6): its EBS volumes count in its price, burstable types are used only
where a pool names them, and planning and consolidation read the same per-node price."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodescale.aws import pricing
from nodescale.aws.catalog import bundled_catalog
from nodescale.commands.plan import plan_paths
from nodescale.config.documents import parse_documents
from nodescale.config.loader import load
from nodescale.disruption.replacement import replacement_from_claim
from nodescale.model import nodecost
from nodescale.model.instance import ManagedInstance
from nodescale.model.requirements import Requirement, Requirements
from nodescale.usecases.disrupt.read import node_views
from nodescale.usecases.world import World, _prepare_types
from tests.builders import cluster_nodes

CATALOG = {it.name: it for it in bundled_catalog("us-east-1")}
NOW = datetime(2025, 1, 1, tzinfo=UTC)


def pool_yaml(requirements: str = "", limit: int = 1000, mappings: str = "") -> str:
    """An unconstrained v1beta1 NodePool (like Karpenter's default) and its EC2NodeClass."""
    return f"""
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      nodeClassRef: {{name: default}}
      requirements: [{requirements}]
  limits: {{cpu: {limit}}}
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  amiFamily: AL2
  role: NodeRole
  subnetSelectorTerms: [{{tags: {{a: b}}}}]
  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]
  {mappings}
"""


def deployment(replicas: int) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: inflate, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: inflate}}}}
  template:
    metadata: {{labels: {{app: inflate}}}}
    spec:
      containers: [{{name: inflate, image: pause, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def plan_of(tmp_path: Path, pools: str, replicas: int) -> dict:
    (tmp_path / "pool.yaml").write_text(pools)
    (tmp_path / "work.yaml").write_text(deployment(replicas))
    return plan_paths([str(tmp_path)])


ARCH_OS = ('{key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}, '
           '{key: kubernetes.io/os, operator: In, values: [linux]}')
SPOT = '{key: karpenter.sh/capacity-type, operator: In, values: [spot]}'
ON_DEMAND = '{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}'


@pytest.mark.parametrize("requirements", ["", ARCH_OS, f"{ARCH_OS}, {SPOT}", ON_DEMAND, SPOT])
def test_five_one_cpu_pods_on_an_unconstrained_pool_take_one_node(tmp_path, requirements):
    plan = plan_of(tmp_path, pool_yaml(requirements), 5)
    assert not plan.unschedulable
    assert len(plan.node_claims) == 1
    assert len(plan.node_claims[0].pods) == 5


def test_no_node_of_an_unconstrained_pool_is_burstable(tmp_path):
    plan = plan_of(tmp_path, pool_yaml(), 5)
    assert not any(CATALOG[name].labels.get("karpenter.k8s.aws/instance-category") == "t"
                   for claim in plan.node_claims for name in claim.instance_types)


def test_a_pool_that_names_burstable_types_gets_them(tmp_path):
    named = '{key: karpenter.k8s.aws/instance-category, operator: In, values: [t]}'
    plan = plan_of(tmp_path, pool_yaml(named), 5)
    assert not plan.unschedulable
    assert all(name.startswith("t") for claim in plan.node_claims for name in claim.instance_types)


def test_only_in_names_a_burstable_type():
    t4g = CATALOG["t4g.nano"]

    def names(key: str, operator: str, *values: str) -> bool:
        return nodecost.names_burstable(Requirements([Requirement.create(key, operator, values)]), t4g)

    assert names("node.kubernetes.io/instance-type", "In", "t4g.nano", "m5.large")
    assert names("karpenter.k8s.aws/instance-family", "In", "t4g")
    assert names("karpenter.k8s.aws/instance-category", "In", "c", "m", "t")
    assert not names("karpenter.k8s.aws/instance-category", "In", "c", "m", "r")
    assert not names("karpenter.k8s.aws/instance-category", "NotIn", "c")
    assert not names("karpenter.k8s.aws/instance-family", "Exists")
    assert nodecost.is_burstable(t4g) and not nodecost.is_burstable(CATALOG["m5.large"])


def test_twelve_hundred_pods_fill_the_limit_instead_of_stopping_at_half(tmp_path):
    # 1,000 CPUs hold at most ~980 one-CPU pods (each node reserves some CPU): far more than the 500
    # one-pod nodes the list price chose; with room for them all, all 1,200 schedule.
    plan = plan_of(tmp_path, pool_yaml(limit=1000), 1200)
    assert sum(len(c.pods) for c in plan.node_claims) >= 900
    plan = plan_of(tmp_path, pool_yaml(limit=1300), 1200)
    assert not plan.unschedulable
    assert sum(len(c.pods) for c in plan.node_claims) == 1200


def _claim_price(tmp_path: Path, mappings: str) -> tuple[str, float]:
    only = '{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}, ' + ON_DEMAND
    claim = plan_of(tmp_path, pool_yaml(only, mappings=mappings), 1).node_claims[0]
    return claim.instance_types[0], claim.price


def test_the_root_volume_size_and_type_change_a_nodes_price(tmp_path):
    name, default = _claim_price(tmp_path, "")
    list_price = next(o.price for o in CATALOG[name].offerings if o.capacity_type == "on-demand")
    assert default == pytest.approx(list_price + 20 * 0.08 / 730)  # AL2: 20 GiB gp3
    big = "blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi, volumeType: gp3}}]"
    assert _claim_price(tmp_path, big)[1] == pytest.approx(list_price + 100 * 0.08 / 730)
    io1 = "blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi, volumeType: io1}}]"
    assert _claim_price(tmp_path, io1)[1] == pytest.approx(list_price + 100 * 0.125 / 730)


def test_a_region_without_ebs_prices_borrows_us_east_1s():
    mappings = [{"Ebs": {"VolumeSize": 10, "VolumeType": "gp2"}}]

    def volumes(region: str) -> float:
        return nodecost.volumes_per_hour(mappings, pricing.ebs_prices(region))

    assert volumes("eu-west-9") == volumes("us-east-1")
    assert volumes("us-gov-west-1") > volumes("us-east-1")


def test_consolidation_reads_the_price_planning_compares(tmp_path):
    only = '{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}, ' + ON_DEMAND
    documents = pool_yaml(only) + "---\n" + deployment(1)
    (tmp_path / "all.yaml").write_text(documents)
    claim = plan_paths([str(tmp_path / "all.yaml")]).node_claims[0]
    config = load(parse_documents(pool_yaml(only), "test"))
    node = {
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {"capacity": {"cpu": "2"}, "allocatable": {"cpu": "1930m"}},
    }
    world = World(now=NOW, cluster="demo", nodepools=dict(config.nodepools), nodeclasses=dict(config.nodeclasses),
                  nodes=cluster_nodes(node), catalog=list(CATALOG.values()),
                  instances=[ManagedInstance("i-1", "m5.large", "us-east-1a", "on-demand", "default", "running", NOW,
                                             private_dns_name="n1")])
    world = _prepare_types(world)
    views, _ = node_views(world)
    list_price = next(o.price for o in CATALOG["m5.large"].offerings if o.capacity_type == "on-demand")
    # The node's price is the plan's, volumes included, and so is its replacement's.
    assert views[0].price == pytest.approx(claim.price) != pytest.approx(list_price)
    replacement = replacement_from_claim(claim, world.types_by_pool()["default"])
    assert replacement.options[0][1] == pytest.approx(views[0].price)


def test_the_volume_price_keeps_every_other_field_of_an_offering() -> None:
    # A pod selecting topology.k8s.aws/zone-id matches the offering's zone id: adding the volume's price
    # must not lose it (it did, and such pods were never launched for).
    from nodescale.model.instancetype import InstanceType, Offering
    from nodescale.model.nodecost import with_node_cost

    it = InstanceType("m5.large", {}, {"cpu": 2000}, {}, (Offering("us-east-1a", "on-demand", 0.096, True, "use1-az6"),))
    (priced,) = with_node_cost([it], 0.002)
    (offering,) = priced.offerings
    assert offering.zone_id == "use1-az6" and offering.available
    assert abs(offering.price - 0.098) < 1e-9
