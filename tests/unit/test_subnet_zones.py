"""Offerings only where the node class has a subnet (found by the issue 18 scale run: a zone spread sent
pods to us-east-1e, where the cluster has no subnet, and every launch failed with NoSubnetInAllowedZones).

Karpenter's AWS provider builds a node class's offerings over the zones of its subnets
(aws/karpenter-provider-aws pkg/providers/instancetype: offerings outside the subnets' zones are not
available), so neither a launch nor a topology domain lands in a zone without a subnet."""

from __future__ import annotations

from nodescale.aws.catalog import bundled_catalog, only_zones
from nodescale.model import labels as wk


def test_offerings_outside_the_subnet_zones_become_unavailable_and_leave_the_types_zone_requirement() -> None:
    catalog = [it for it in bundled_catalog() if it.name in ("m5.large", "c5.xlarge")]
    assert {o.zone for it in catalog for o in it.offerings} > {"us-east-1a", "us-east-1b", "us-east-1c"}
    narrowed = only_zones(catalog, frozenset({"us-east-1a", "us-east-1b", "us-east-1c"}))
    for before, after in zip(catalog, narrowed, strict=True):
        assert [o.zone for o in before.offerings] == [o.zone for o in after.offerings]  # kept, marked
        assert {o.zone for o in after.offerings if o.available} <= {"us-east-1a", "us-east-1b", "us-east-1c"}
        zones = after.requirements.get(wk.ZONE)
        assert zones is not None and set(zones.values) <= {"us-east-1a", "us-east-1b", "us-east-1c"}
