"""Pieces of the disruption use-case that need no cluster: status checks and replacement options."""

from __future__ import annotations

from typing import Any

from nodescale.aws.instances import impaired_instances
from nodescale.disruption.replacement import replacement_from_claim
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.requirements import Requirements
from nodescale.scheduling.plan import NodeClaim


class FakeEc2:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.calls: list[dict[str, Any]] = []

    def get_paginator(self, name: str) -> Any:
        assert name == "describe_instance_status"
        outer = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
                outer.calls.append(kwargs)
                return outer.pages

        return Paginator()


def status(iid: str, system: str = "ok", instance: str = "ok") -> dict[str, Any]:
    return {"InstanceId": iid, "SystemStatus": {"Status": system}, "InstanceStatus": {"Status": instance}}


def test_impaired_instances_are_those_failing_either_check_read_in_one_paginated_call() -> None:
    ec2 = FakeEc2([{"InstanceStatuses": [status("i-1"), status("i-2", system="impaired")]},
                   {"InstanceStatuses": [status("i-3", instance="impaired"), status("i-4", "initializing")]}])
    assert impaired_instances(ec2) == {"i-2", "i-3"}
    assert len(ec2.calls) == 1


def itype(name: str, prices: dict[tuple[str, str], float]) -> InstanceType:
    offerings = tuple(Offering(zone, ct, price) for (zone, ct), price in prices.items())
    return InstanceType(name, {}, {"cpu": 2000}, {}, offerings)


def test_replacement_options_keep_the_claims_zones_and_capacity_types_cheapest_first() -> None:
    types = [
        itype("a", {("z1", "spot"): 0.05, ("z2", "spot"): 0.04, ("z1", "on-demand"): 0.1}),
        itype("b", {("z1", "spot"): 0.03, ("z3", "spot"): 0.01}),
    ]
    claim = NodeClaim("default", ["a", "b"], ["spot"], ["z1", "z2"], {}, (), (), Requirements(), [], 0.03, {})
    r = replacement_from_claim(claim, types)
    assert r.options == [("b", 0.03, "spot"), ("a", 0.04, "spot")]
    assert r.price == 0.03 and r.instance_type == "b"
