"""On-demand capacity reservations: the selector terms, the reserved offerings, the solver's preference and
counts, the launch's template target, and the capacity-block drain window. Each test names the Karpenter
test or documented behaviour it restates."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from nodescale.aws import capacityreservations, fleet
from nodescale.aws.instances import capacity_type_of
from nodescale.aws.launchtemplates import LaunchTemplateSpec
from nodescale.aws.subnets import Subnet
from nodescale.config.capacityreservations import parse_terms
from nodescale.config.fields import FieldError
from nodescale.k8s import nodeclaims
from nodescale.model import capacityreservation as cr
from nodescale.model import labels as wk
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.node import ClusterNode
from nodescale.model.nodepool import CapacityReservationTerm, NodePool
from nodescale.model.pod import Pod
from nodescale.model.requirements import Requirement, Requirements
from nodescale.scheduling.scheduler import solve

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
GIB = 2**30
ZONES = ("us-east-1a", "us-east-1b")


def itype(name: str, cpu: int, od: float, spot: float) -> InstanceType:
    offerings = tuple(Offering(z, c, p) for z in ZONES for c, p in (("on-demand", od), ("spot", spot)))
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: "amd64", wk.OS: "linux"}
    return InstanceType(name, labels, {"cpu": cpu * 1000, "memory": cpu * 4 * GIB, "pods": 110}, {}, offerings)


SMALL = itype("m5.large", 2, 0.096, 0.04)
LARGE = itype("m5.xlarge", 4, 0.192, 0.07)


def reservation(rid: str = "cr-0aaa", itype_name: str = "m5.large", zone: str = "us-east-1a", available: int = 2,
                kind: str = cr.TYPE_DEFAULT, end: datetime | None = None) -> cr.CapacityReservation:
    return cr.CapacityReservation(rid, itype_name, zone, available, available, "123456789012", "targeted", kind, end)


def pool(*capacity_types: str, name: str = "default") -> NodePool:
    reqs = Requirements([Requirement.create(wk.CAPACITY_TYPE, "In", list(capacity_types))])
    return NodePool(name=name, requirements=reqs, node_class="default")


def pods(n: int, cpu: str = "1500m") -> list[Pod]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    first = Pod.from_dict({"metadata": {"name": "app-0", "namespace": "default", "labels": {"app": "a"}}, "spec": body})
    return [first] + [replace(first, name=f"app-{i}") for i in range(1, n)]


def plan(workload: list[Pod], pools: list[NodePool], reservations: list[cr.CapacityReservation]):
    types = cr.with_reservations([SMALL, LARGE], reservations, NOW)
    return solve(workload, pools, {p.name: types for p in pools})


# -- configuration: Karpenter's ec2nodeclass_validation_cel_test.go, Context "CapacityReservationSelectorTerms" --


def test_terms_by_id_and_by_tags_with_owner_and_match_criteria_are_read():
    # "should succeed with a valid capacity reservation selector on id" / "...ownerID" / "...instanceMatchCriteria
    # combined with ownerID and tags"
    terms = parse_terms([{"id": "cr-12345749"},
                         {"tags": {"team": "ml"}, "ownerID": "012345678901", "instanceMatchCriteria": "targeted"}],
                        "spec.capacityReservationSelectorTerms")
    assert terms == (CapacityReservationTerm(id="cr-12345749"),
                     CapacityReservationTerm(tags={"team": "ml"}, owner_id="012345678901",
                                             instance_match_criteria="targeted"))


@pytest.mark.parametrize(
    ("term", "path", "words"),
    [
        ({"id": "r-12345749"}, "[0].id", "not a capacity reservation id"),  # "...on a malformed id"
        ({}, "[0]", "expected at least one of tags, id, instanceMatchCriteria"),  # "...has no values"
        ({"tags": {}}, "[0].tags", "may not be empty"),  # "...has no tag map values"
        ({"tags": {"": "x"}}, "[0].tags", "empty tag keys or values"),  # "...tag map key that is empty"
        ({"tags": {"k": ""}}, "[0].tags", "empty tag keys or values"),  # "...tag map value that is empty"
        ({"id": "cr-12345749", "tags": {"k": "v"}}, "[0]", "'id' is mutually exclusive"),  # "...id with tags"
        ({"id": "cr-12345749", "ownerID": "012345678901"}, "[0]", "'id' is mutually exclusive"),  # "...id with ownerID"
        ({"ownerID": "01234567890", "tags": {"k": "v"}}, "[0].ownerID", "expected 12 digits"),  # "...ownerID is malformed"
        ({"ownerID": "012345678901"}, "[0]", "ownerID alone selects nothing"),  # "...ownerID is set by itself"
        ({"instanceMatchCriteria": "sometimes"}, "[0].instanceMatchCriteria", "open, targeted"),
    ],
)
def test_terms_karpenter_refuses_are_refused_naming_the_field(term, path, words):
    with pytest.raises(FieldError) as exc:
        parse_terms([term], "spec.capacityReservationSelectorTerms")
    assert exc.value.path == f"spec.capacityReservationSelectorTerms{path}"
    assert words in str(exc.value)


def test_more_than_30_terms_are_refused():
    with pytest.raises(FieldError, match="at most 30"):
        parse_terms([{"id": f"cr-{i}"} for i in range(31)], "terms")


def test_each_term_is_one_describe_query_with_state_active():
    # types.go DescribeCapacityReservationsInput: id alone; else owner-id, tag:<k> (tag-key for "*"), criteria.
    assert capacityreservations.query(CapacityReservationTerm(id="cr-1")) == {
        "CapacityReservationIds": ["cr-1"], "Filters": [{"Name": "state", "Values": ["active"]}]}
    q = capacityreservations.query(CapacityReservationTerm(tags={"team": "ml", "any": "*"}, owner_id="012345678901",
                                                           instance_match_criteria="open"))
    assert q["Filters"] == [
        {"Name": "state", "Values": ["active"]},
        {"Name": "owner-id", "Values": ["012345678901"]},
        {"Name": "tag-key", "Values": ["any"]},
        {"Name": "tag:team", "Values": ["ml"]},
        {"Name": "instance-match-criteria", "Values": ["open"]},
    ]


# -- offerings: offering/reserved_capacity_resolver.go and ec2nodeclass_status.go CapacityReservationFromEC2 --


def test_a_reservation_is_a_reserved_offering_priced_at_on_demand_over_ten_million():
    (small, large) = cr.with_reservations([SMALL, LARGE], [reservation(available=3)], NOW)
    reserved = [o for o in small.offerings if o.capacity_type == wk.CAPACITY_RESERVED]
    assert reserved == [Offering("us-east-1a", "reserved", 0.096 / 10_000_000, True, "", "cr-0aaa", "default", 3)]
    assert all(o.capacity_type != wk.CAPACITY_RESERVED for o in large.offerings)
    assert wk.CAPACITY_RESERVED in small.requirements[wk.CAPACITY_TYPE].values


def test_a_full_reservation_is_offered_but_not_available():
    # reserved_capacity_resolver.go: Available requires reservationCapacity != 0.
    (small, _) = cr.with_reservations([SMALL, LARGE], [reservation(available=0)], NOW)
    (o,) = [o for o in small.offerings if o.capacity_type == wk.CAPACITY_RESERVED]
    assert not o.available and o.reservation_capacity == 0


def test_a_capacity_block_expires_40_minutes_before_its_end():
    # ec2nodeclass_status.go: capacityReservationExpirationPeriod = 40m, capacity-block reservations only;
    # expiration/suite_test.go "should not delete nodeclaims associated with standard capacity reservations
    # within the capacity block expiration window".
    end = NOW + timedelta(minutes=45)
    block = reservation(kind=cr.TYPE_CAPACITY_BLOCK, end=end)
    assert not block.expiring(NOW)
    assert block.expiring(NOW + timedelta(minutes=5))
    assert not reservation(end=end).expiring(NOW + timedelta(minutes=5))
    (small, _) = cr.with_reservations([SMALL, LARGE], [block], NOW + timedelta(minutes=5))
    assert not next(o for o in small.offerings if o.capacity_type == wk.CAPACITY_RESERVED).available


def test_an_ended_reservation_is_dropped_when_read():
    # provider.go filterReservations: EndDate after now only.
    old = {"CapacityReservationId": "cr-old", "InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
           "AvailableInstanceCount": 1, "InstanceMatchCriteria": "targeted", "EndDate": NOW - timedelta(seconds=1)}
    new = {**old, "CapacityReservationId": "cr-new", "EndDate": NOW + timedelta(hours=1)}

    class Ec2:
        def get_paginator(self, _name):
            return self

        def paginate(self, **_params):
            return [{"CapacityReservations": [old, new]}]

    found = capacityreservations.discover(Ec2(), [CapacityReservationTerm(tags={"a": "b"})], NOW)
    assert [r.id for r in found] == ["cr-new"]


# -- the solver: kubernetes-sigs/karpenter scheduling/suite_test.go, Context "Reserved Capacity" --


def test_reserved_is_chosen_before_spot_and_on_demand():
    # "shouldn't fallback to on-demand or spot when compatible reserved offerings are available"
    p = plan(pods(1), [pool("reserved", "spot", "on-demand")], [reservation()])
    (claim,) = p.node_claims
    assert claim.capacity_types == ["reserved"]
    assert claim.instance_types == ["m5.large"] and claim.zones == ["us-east-1a"]
    assert claim.labels[wk.CAPACITY_TYPE] == "reserved"
    assert claim.labels[wk.CAPACITY_RESERVATION_ID] == "cr-0aaa"
    assert claim.labels[wk.CAPACITY_RESERVATION_TYPE] == "default"


def test_a_pool_that_does_not_allow_reserved_never_uses_a_reservation():
    # Karpenter: a NodePool must allow karpenter.sh/capacity-type reserved to launch reserved capacity.
    p = plan(pods(1), [pool("spot", "on-demand")], [reservation()])
    assert p.node_claims[0].capacity_types == ["on-demand", "spot"]  # the launch tries spot first
    assert wk.CAPACITY_RESERVATION_ID not in p.node_claims[0].labels


def test_a_plan_takes_no_more_instances_of_a_reservation_than_it_has_free():
    # "should correctly track multiple reservations for the same instance pool": 5 nodes, 2 reserved left.
    p = plan(pods(5), [pool("reserved", "spot")], [reservation(available=2)])
    reserved = [c for c in p.node_claims if c.capacity_types == ["reserved"]]
    spot = [c for c in p.node_claims if c.capacity_types == ["spot"]]
    assert len(reserved) == 2 and len(reserved) + len(spot) == len(p.node_claims)
    assert sum(len(c.pods) for c in p.node_claims) == 5 and not p.unschedulable
    # The pods that found the reservation full are packed again for spot: m5.xlarge holds two of them.
    assert sorted(len(c.pods) for c in spot) == [1, 2] and spot[0].instance_types[0] == "m5.xlarge"
    assert all(c.labels[wk.CAPACITY_TYPE] == "spot" and wk.CAPACITY_RESERVATION_ID not in c.labels for c in spot)
    assert all(c.price > 0.01 for c in spot)  # priced again as spot, not at the reserved price


def test_pods_that_lost_a_reservation_are_planned_again_into_reservations_still_free():
    # Packing chose m5.xlarge (its reservation priced near zero, 2 pods a node); one is free there, three on
    # m5.large: the pods past the first xlarge go to the m5.large reservation, not to spot.
    p = plan(pods(5), [pool("reserved", "spot")],
             [reservation("cr-x", "m5.xlarge", available=1), reservation("cr-l", "m5.large", available=3)])
    reserved = sorted((c.labels[wk.CAPACITY_RESERVATION_ID], len(c.pods)) for c in p.node_claims
                      if c.capacity_types == ["reserved"])
    assert reserved == [("cr-l", 1), ("cr-l", 1), ("cr-l", 1), ("cr-x", 2)]
    assert len(p.node_claims) == 4 and not p.unschedulable


def test_a_reservation_shared_by_two_pools_is_counted_once():
    # "should correctly track reservations shared across nodepools"
    workload = pods(2)
    pools = [pool("reserved", "spot", name="np-1"), pool("reserved", "spot", name="np-2")]
    p = plan(workload, pools, [reservation(available=1)])
    assert sorted(c.capacity_types[0] for c in p.node_claims) == ["reserved", "spot"]


def test_a_reserved_only_pool_leaves_pods_pending_when_its_reservations_are_full():
    p = plan(pods(3), [pool("reserved")], [reservation(available=1)])
    assert [c.capacity_types for c in p.node_claims] == [["reserved"]]
    assert len(p.unschedulable) == 2
    assert "capacity reservation" in p.unschedulable[0].reason


def test_a_launch_into_a_reservation_leaves_one_instance_fewer_for_the_rest_of_the_run():
    # capacityreservation/suite_test.go "should decrement availability when reservation is marked as launched"
    types = cr.with_reservations([SMALL], [reservation(available=1)], NOW)
    (after,) = cr.consume(types, "cr-0aaa")
    (o,) = [o for o in after.offerings if o.capacity_type == wk.CAPACITY_RESERVED]
    assert o.reservation_capacity == 0 and not o.available


# -- launching: launchtemplate/types.go (targeted launch mode) and instance.go (reserved CreateFleet) --


def test_a_reserved_template_targets_its_reservation_and_others_opt_out_of_open_ones():
    spec = LaunchTemplateSpec(cluster="c", image_id="ami-1", user_data="", security_group_ids=("sg-1",),
                              instance_profile="p", reservations_targeted=True)
    assert spec.data()["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}
    target = replace(spec, capacity_reservation_id="cr-1", capacity_reservation_type="default")
    assert target.data()["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-1"}}
    assert "InstanceMarketOptions" not in target.data()
    block = replace(target, capacity_reservation_type="capacity-block")
    assert block.data()["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    # Which reservation a node runs in is not drift: the settings hash stays.
    assert target.settings_hash == spec.settings_hash == block.settings_hash
    assert target.name != spec.name


def test_a_reserved_fleet_request_uses_only_the_reservation_templates():
    (small,) = cr.with_reservations([SMALL], [reservation(available=1)], NOW)
    subnets = {"us-east-1a": Subnet("subnet-a", "us-east-1a", "use1-az1", "vpc-1", 200)}
    request = fleet.LaunchRequest(
        cluster="c", nodepool="default", nodeclass="default", key="k",
        templates=(fleet.TemplateChoice("lt-plain", (small,)),
                   fleet.TemplateChoice("lt-cr", (small,), reservation_id="cr-0aaa")),
        subnets=subnets, capacity_types=("reserved", "spot"),
    )
    assert fleet.capacity_order(request.capacity_types) == ("reserved", "spot")
    reserved = fleet.plan_overrides(request, "reserved")
    assert [(o.launch_template, o.instance_type, o.reservation_id) for o in reserved] == [("lt-cr", "m5.large", "cr-0aaa")]
    params = fleet.fleet_request(request, "reserved", reserved, 1)
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    spot = fleet.plan_overrides(request, "spot")
    assert {o.launch_template for o in spot} == {"lt-plain"}
    response = {"Instances": [{"InstanceIds": ["i-1"], "InstanceType": "m5.large", "Lifecycle": "on-demand",
                               "LaunchTemplateAndOverrides": {
                                   "LaunchTemplateSpecification": {"LaunchTemplateName": "lt-cr"},
                                   "Overrides": {"InstanceType": "m5.large", "SubnetId": "subnet-a"}}}],
                "Errors": [{"ErrorCode": "ReservationCapacityExceeded", "Lifecycle": "on-demand",
                            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.large",
                                                                         "SubnetId": "subnet-a"}}}]}
    instances, errors, _ = fleet.parse_response(response, reserved)
    assert instances[0].capacity_type == "reserved" and instances[0].reservation_id == "cr-0aaa"
    assert errors[0].capacity_type == "reserved" and errors[0].is_capacity_error


def test_an_instance_in_a_reservation_is_reserved_capacity():
    assert capacity_type_of({"CapacityReservationId": "cr-1"}) == ("reserved", "cr-1", "default")
    assert capacity_type_of({"CapacityReservationId": "cr-1", "InstanceLifecycle": "capacity-block"}) == (
        "reserved", "cr-1", "capacity-block")
    assert capacity_type_of({"InstanceLifecycle": "spot"}) == ("spot", "", "")


# -- consolidation: a reserved node is paid for already (Karpenter prices reserved offerings near zero) --

RESERVED_POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: web}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [reserved, spot, on-demand]}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: NodeRole
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  capacityReservationSelectorTerms: [{id: cr-0aaa}]
"""


def _reserved_world(available: int = 0):
    from nodescale.aws.catalog import bundled_catalog
    from nodescale.config.documents import parse_documents
    from nodescale.config.loader import load
    from nodescale.model.instance import ManagedInstance
    from nodescale.usecases import world as world_module

    config = load(parse_documents(RESERVED_POOL, "test"))
    assert config.ok, config.errors
    assert config.nodeclasses["default"].capacity_reservation_selector_terms == (CapacityReservationTerm(id="cr-0aaa"),)
    catalog = [t for t in bundled_catalog("us-east-1") if t.name in ("m5.large", "m5.xlarge")]
    instances = [
        ManagedInstance("i-res", "m5.large", "us-east-1a", "reserved", "web", "running", NOW,
                        capacity_reservation_id="cr-0aaa", capacity_reservation_type="default"),
        ManagedInstance("i-od", "m5.large", "us-east-1a", "on-demand", "web", "running", NOW),
    ]
    w = world_module.World(now=NOW, cluster="demo", nodepools=dict(config.nodepools),
                           nodeclasses=dict(config.nodeclasses), instances=instances, catalog=catalog,
                           reservations={"default": [reservation(available=available)]})
    return world_module._prepare_types(w)


def test_a_node_in_a_reservation_costs_next_to_nothing_and_keeps_its_labels():
    w = _reserved_world()
    reserved, on_demand = w.instance("i-res"), w.instance("i-od")
    assert 0 < w.price_of(reserved) < 1e-6  # the reservation is full: its offering still prices the node
    assert w.price_of(on_demand) > 0.05
    labels = w.expected_labels(reserved, w.nodepools["web"], w.instance_type("m5.large", "web"))
    assert labels[wk.CAPACITY_TYPE] == "reserved"
    assert labels[wk.CAPACITY_RESERVATION_ID] == "cr-0aaa"
    assert labels[wk.CAPACITY_RESERVATION_TYPE] == "default"


class _ReservedLauncher:
    """Launches into the reservation, as EC2 Fleet does for a reserved offering."""

    def launch(self, pool, node_class, types, key, count=1, requirements=None, fence=None) -> fleet.LaunchResult:
        if fence is not None:
            fence()
        result = fleet.LaunchResult(requested=count)
        result.instances.extend(fleet.LaunchedInstance(f"i-r{n}", "m5.large", "us-east-1a", "subnet-a", "reserved",
                                                       0.0, "lt", "launch", reservation_id="cr-0aaa")
                                for n in range(count))
        return result


class _Events:
    dropped: dict[str, int] = {}

    def pod(self, *args, **kwargs) -> str:
        return "created"


def test_a_reserved_launch_gives_a_new_snapshot_with_one_fewer_free_and_leaves_the_read_one_alone(monkeypatch):
    """#29.1: the world is read-only; launch_capacity's outcome carries the snapshot the pass goes on with, in
    which the reservation it launched into has one instance fewer free (Karpenter's MarkLaunched)."""
    from types import SimpleNamespace

    from nodescale.settings import Settings
    from nodescale.usecases.provision import capacity

    monkeypatch.setattr(capacity, "refresh_instances", lambda world, ec2: world)
    monkeypatch.setattr(capacity, "event_recorder", lambda rt, world: _Events())
    rt = SimpleNamespace(settings=Settings(cluster_name="demo", region="us-east-1"), launcher=_ReservedLauncher(),
                         api=None, cluster="demo", aws=SimpleNamespace(dynamodb=None, ec2=None),
                         nodeclaims=nodeclaims.State(missing=True))  # no cluster: no NodeClaims (#30.1)
    w = _reserved_world(available=1).with_instances([])  # no in-flight node to take the pod

    def free(world) -> list[int]:
        return [o.reservation_capacity for it in world.instance_types("web") for o in it.offerings
                if o.reservation_id == "cr-0aaa"]

    outcome = capacity.launch_capacity(rt, w, pods(1, cpu="500m"))
    assert [launch.capacity_type for launch in outcome.launches] == ["reserved"]
    assert free(w) == [1]
    assert outcome.world is not None and free(outcome.world) == [0]


def test_consolidation_does_not_replace_a_reserved_node_with_a_cheaper_spot_node():
    # consolidation_test.go, Context "Reserved Capacity": a reserved node moves only to another reserved offering.
    from nodescale.disruption import consolidation as c
    from nodescale.disruption.decisions import Refusal
    from nodescale.disruption.nodes import NodeView
    from nodescale.disruption.replacement import Simulation
    from tests.builders import replacement

    w = _reserved_world()
    spot = replacement("web", 0.03, [("m5.large", 0.03, "spot")], ["spot"])
    for iid, replaced in (("i-res", False), ("i-od", True)):
        raw = {"metadata": {"name": iid, "labels": {wk.CAPACITY_TYPE: w.instance(iid).capacity_type}}}
        view = NodeView.from_node(ClusterNode.from_dict(raw), pods(1), w.price_of(w.instance(iid)))
        out = c.evaluate([view], Simulation(replacements=[spot]))
        assert isinstance(out, Refusal) != replaced, out


# -- capacity blocks: controllers/capacityreservation/expiration (suite_test.go) --


def test_the_nodes_of_a_capacity_block_are_drained_40_minutes_before_it_ends():
    # "should delete nodeclaims associated with expiring capacity-block reservations"
    from nodescale.disruption import planner
    from tests.builders import NOW as PLAN_NOW
    from tests.builders import inputs, node, pod

    end = PLAN_NOW + timedelta(minutes=30)
    block = reservation("cr-block", kind=cr.TYPE_CAPACITY_BLOCK, end=end)
    assert block.expiring(PLAN_NOW)
    views = [node("in-block", [pod("p")], capacity_type="reserved", labels={wk.CAPACITY_RESERVATION_ID: "cr-block"}),
             node("empty-in-block", capacity_type="reserved", labels={wk.CAPACITY_RESERVATION_ID: "cr-block"}),
             node("elsewhere", [pod("q")], capacity_type="reserved", labels={wk.CAPACITY_RESERVATION_ID: "cr-other"})]
    out = planner.plan(inputs(views, expiring_reservations={"cr-block": end}))
    decided = {d.nodes[0]: d for d in out.decisions if d.reason == "CapacityBlockExpiring"}
    assert set(decided) == {"in-block", "empty-in-block"}
    assert decided["in-block"].reason == "CapacityBlockExpiring" and decided["in-block"].action == "replace"
    assert decided["empty-in-block"].action == "delete"
    assert "cr-block" in decided["in-block"].detail and "in 30 min" in decided["in-block"].detail


def test_a_capacity_block_outside_its_last_40_minutes_drains_nothing():
    # "should not delete nodeclaims associated with standard capacity reservations within the capacity block
    # expiration window": only what the disruption run computes as expiring is drained.
    from nodescale.disruption import planner
    from tests.builders import inputs, node, pod

    views = [node("in-block", [pod("p")], capacity_type="reserved", labels={wk.CAPACITY_RESERVATION_ID: "cr-block"})]
    assert [d for d in planner.plan(inputs(views)).decisions if d.reason == "CapacityBlockExpiring"] == []


def test_a_bad_term_in_a_manifest_is_refused_naming_the_document_and_field():
    from nodescale.config.documents import parse_documents
    from nodescale.config.loader import load

    bad = RESERVED_POOL.replace("[{id: cr-0aaa}]", "[{id: cr-0aaa, tags: {team: ml}}]")
    config = load(parse_documents(bad, "nodeclass.yaml"))
    message = " ".join(str(e) for e in config.errors)
    assert "default" not in config.nodeclasses
    assert "nodeclass.yaml" in message
    assert "spec.capacityReservationSelectorTerms[0]" in message and "'id' is mutually exclusive" in message
    # v1beta1 EC2NodeClasses had no such field: refused by name, as the v1beta1 CRD would.
    v1beta1 = RESERVED_POOL.replace("karpenter.k8s.aws/v1", "karpenter.k8s.aws/v1beta1").replace(
        "amiSelectorTerms: [{alias: al2023@latest}]", "amiFamily: AL2023")
    errors = " ".join(str(e) for e in load(parse_documents(v1beta1, "old.yaml")).errors)
    assert "capacityReservationSelectorTerms" in errors
