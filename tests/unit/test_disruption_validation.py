"""#29.2: a disruption command carries the NodeClaims it launches, and is validated before it is acted on.

The validation (``disruption/validation.py``, after Karpenter's ``validation.go``) re-checks a command
against the world read just before acting: each reason it gives for dropping one, and what it lets through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nodescale.disruption import planner
from nodescale.disruption.decisions import Action, Decision, Reason
from nodescale.disruption.nodes import NodeView
from nodescale.disruption.replacement import Replacement, Simulation, Simulator
from nodescale.disruption.simulator import bin_packing_simulator
from nodescale.disruption.validation import ActTime, Invalidation, Validator, same_or_cheaper
from nodescale.model.currency import USD, render
from nodescale.model.nodepool import Budget, Disruption, NodePool
from nodescale.model.pdb import PodDisruptionBudget
from nodescale.scheduling.plan import NodeClaim
from nodescale.scheduling.templates import pool_usage
from tests.builders import (
    LARGE,
    MEDIUM,
    NOW,
    SMALL,
    existing_node,
    fits_elsewhere,
    inputs,
    node,
    nowhere,
    pod,
    pods,
    pool,
    replacement,
    scheduling_pool,
)

M5 = replacement("default", 0.096, [("m5.large", 0.096, "on-demand"), ("m5.xlarge", 0.192, "on-demand")],
                 ["on-demand"])


def giving(*new: Replacement) -> Simulator:
    def simulate(nodes: Sequence[NodeView]) -> Simulation:
        return Simulation(replacements=list(new))

    return simulate


def at(views: list[NodeView], simulate: Simulator = fits_elsewhere, pools: list[NodePool] | None = None,
       **kw: object) -> Validator:
    pools = pools or [pool()]
    return Validator(ActTime(now=NOW, nodepools={p.name: p for p in pools}, views=views, simulate=simulate,
                             **kw))  # type: ignore[arg-type]


def consolidation(*nodes: str, new: list[Replacement] | None = None) -> Decision:
    action = Action.REPLACE if new else Action.DELETE
    return Decision(list(nodes), Reason.UNDERUTILIZED, "underutilized", action, replacements=list(new or []),
                    pods=["default/p"])


# -- the command carries its claims ---------------------------------------------------------------------


def test_an_expiry_command_carries_the_claim_the_bin_packer_made_for_its_pods_with_its_options_cheapest_first():
    """#29.2: the planner gives a replacing decision no simulation decided the scheduling NodeClaim for its
    pods: its pool, zones, capacity types, the pods planned onto it and its instance types by price."""
    expiring = replace(scheduling_pool(), disruption=Disruption(expire_after_seconds=3600.0,
                                                                budgets=(Budget(nodes="100%"),)))
    workload = pods(2, cpu="1500m")
    view = node("old", workload, age_h=2.0)
    simulate = bin_packing_simulator([], [expiring], {"default": [LARGE, SMALL, MEDIUM]})
    [d] = planner.plan(inputs([view], [expiring]), simulate).decisions
    assert d.reason == Reason.EXPIRED and d.action == Action.REPLACE
    [r] = d.replacements
    assert isinstance(r.claim, NodeClaim) and r.nodepool == "default"
    assert r.pods == [p.key for p in workload] == [p.key for p in r.claim.pods]
    assert r.instance_type == "medium" and r.instance_types == ["medium", "large"]
    assert r.capacity_types == ["on-demand"] and set(r.claim.zones) == {"zone-a", "zone-b", "zone-c"}
    launched = r.launch_claim()
    assert launched.instance_types == ["medium", "large"] and launched.price == r.price == 0.20
    assert launched.pods == r.claim.pods and launched.zones == r.claim.zones


def test_the_claim_launched_for_a_multi_node_consolidation_keeps_only_the_options_decided_on():
    """#29.2: without_same_type narrows the options; what is launched is narrowed the same way."""
    from nodescale.disruption.repacking import without_same_type

    nodes = [node("a", [pod("x")], price=0.192), node("b", [pod("y")], price=0.192)]
    nodes[0].instance_type = nodes[1].instance_type = "m5.xlarge"
    wide = replacement("default", 0.096, [("m5.large", 0.096, "on-demand"), ("m5.xlarge", 0.192, "on-demand"),
                                          ("m5.2xlarge", 0.384, "on-demand")], ["on-demand"])
    narrowed = without_same_type(nodes, wide)
    assert narrowed is not None and narrowed.launch_claim().instance_types == ["m5.large"]
    assert wide.launch_claim().instance_types == ["m5.large", "m5.xlarge", "m5.2xlarge"]


# -- what the validation lets through -------------------------------------------------------------------


def test_a_command_whose_world_has_not_changed_is_valid():
    """#29.2"""
    views = [node("a", [pod("p")])]
    assert at(views, giving(M5)).validate(consolidation("a", new=[M5])) is None
    assert at(views).validate(consolidation("a")) is None


def test_a_simulation_that_now_allows_more_types_keeps_the_command_valid_karpenters_subset_rule():
    """#29.2: the decided types are a subset of what the simulation now allows: valid (nothing dearer)."""
    more = replacement("default", 0.09, [("m6i.large", 0.09, "on-demand"), *M5.options], ["on-demand"])
    assert same_or_cheaper([M5], [more]) is None


def test_a_forceful_expiry_is_not_held_by_do_not_disrupt_at_act_time():
    """#29.2: v1 expiry is forceful: the guards its method skipped are not applied by the validation either."""
    views = [node("a", [pod("p", annotations={"karpenter.sh/do-not-disrupt": "true"})])]
    d = Decision(["a"], Reason.EXPIRED, "old", Action.REPLACE, replacements=[M5], pods=["default/p"])
    assert at(views, giving(M5)).validate(d) is None


# -- each reason to drop a command ------------------------------------------------------------------------


def test_a_candidate_gone_since_the_decision_invalidates_the_command():
    """#29.2"""
    out = at([node("b")]).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.GONE and "node a is gone" in out.message


def test_a_candidate_another_invocation_started_disrupting_invalidates_the_command():
    """#29.2"""
    views = [node("a", [pod("p")])]
    out = at(views, in_progress=frozenset({"a"})).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.IN_PROGRESS


def test_a_do_not_disrupt_pod_landed_on_the_candidate_invalidates_a_consolidation():
    """#29.2"""
    views = [node("a", [pod("p", annotations={"karpenter.sh/do-not-disrupt": "true"})])]
    out = at(views).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.DO_NOT_DISRUPT and "default/p" in out.why


def test_a_pdb_at_zero_now_invalidates_a_consolidation():
    """#29.2"""
    views = [node("a", [pod("p", labels={"app": "web"})])]
    pdb = PodDisruptionBudget.from_dict({"metadata": {"name": "web", "namespace": "default"},
                                         "spec": {"selector": {"matchLabels": {"app": "web"}}},
                                         "status": {"disruptionsAllowed": 0}})
    out = at(views, pdbs=[pdb]).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.PDB and "default/web" in out.why


def test_the_budget_counts_each_valid_command_and_drops_the_one_past_it():
    """#29.2: two one-node commands under a budget of one: the first is valid and takes the budget."""
    one = pool(budgets=(Budget(nodes="1"),))
    views = [node("a", [pod("p")]), node("b", [pod("q")])]
    validator = at(views, pools=[one])
    assert validator.validate(consolidation("a")) is None
    out = validator.validate(consolidation("b"))
    assert out is not None and out.kind == Invalidation.BUDGET and "allows 1" in out.why


def test_a_node_disrupting_since_the_decision_uses_the_budget_up():
    """#29.2"""
    one = pool(budgets=(Budget(nodes="1"),))
    views = [node("a", [pod("p")]), node("c")]
    out = at(views, pools=[one], in_progress=frozenset({"c"})).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.BUDGET


def test_pods_with_nowhere_to_go_now_invalidate_the_command():
    """#29.2"""
    out = at([node("a", [pod("p")])], nowhere).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.UNSCHEDULABLE and "default/p" in out.why


def test_a_simulation_that_now_needs_a_dearer_type_invalidates_the_replacement():
    """#29.2: decided m5.large; the simulation now needs an m5.2xlarge: not the same or cheaper."""
    dearer = replacement("default", 0.384, [("m5.2xlarge", 0.384, "on-demand")], ["on-demand"])
    out = at([node("a", [pod("p")])], giving(dearer)).validate(consolidation("a", new=[M5]))
    assert out is not None and out.kind == Invalidation.CHANGED and "m5.2xlarge" in render(out.why, USD)


def test_a_simulation_that_now_needs_no_new_node_or_a_new_node_invalidates_the_command():
    """#29.2: the pods fit elsewhere now (a better command is likely), or need a node a deletion did not plan."""
    views = [node("a", [pod("p")])]
    out = at(views).validate(consolidation("a", new=[M5]))
    assert out is not None and out.kind == Invalidation.CHANGED and "no new node" in out.why
    out = at(views, giving(M5)).validate(consolidation("a"))
    assert out is not None and out.kind == Invalidation.CHANGED and "1 new node(s), not 0" in out.why


def test_an_empty_node_that_got_a_pod_invalidates_its_emptiness_command():
    """#29.2"""
    d = Decision(["a"], Reason.EMPTY, "empty", Action.DELETE)
    out = at([node("a", [pod("p")])]).validate(d)
    assert out is not None and out.kind == Invalidation.CHANGED and "no longer empty" in out.why


# -- the NodePool's limits, the replaced nodes counted ---------------------------------------------------


def _expiring(limits: dict[str, int]) -> NodePool:
    return replace(scheduling_pool(), limits=limits,
                   disruption=Disruption(expire_after_seconds=3600.0, budgets=(Budget(nodes="100%"),)))


def _expiry(limits: dict[str, int]) -> tuple[Decision, Validator]:
    """An expired 4-cpu node whose two 1.5-cpu pods need a new "medium" (4 cpu): the simulation leaves the node
    out, so its decision is made within the limits; the validation counts it, as the running node it is."""
    expiring = _expiring(limits)
    types = {"default": [LARGE, SMALL, MEDIUM]}
    view = node("old", pods(2, cpu="1500m"), age_h=2.0)
    [d] = planner.plan(inputs([view], [expiring]), bin_packing_simulator([], [expiring], types)).decisions
    assert d.action == Action.REPLACE and [r.instance_type for r in d.replacements] == ["medium"]
    usage = pool_usage([existing_node("old", cpu=4, pool="default")], {})
    return d, at([view], bin_packing_simulator([], [expiring], types), pools=[expiring], usage=usage, types=types)


def test_a_replacement_past_its_pools_cpu_limit_with_the_replaced_node_still_running_is_dropped():
    """#29.2: the replaced node runs until its replacement is up, so it counts against its NodePool's limits
    (Karpenter refuses to create a NodeClaim past them: kubernetes-sigs/karpenter
    pkg/controllers/disruption/staticdrift_test.go "should not drift nodes when we cannot acquire limits").
    Before the commands carried their claims, the act's re-plan refused it; the validation now does."""
    d, validator = _expiry({"cpu": 6000})
    out = validator.validate(d)
    assert out is not None and out.kind == Invalidation.LIMITS
    assert out.nodepool == "default" and out.why == (
        "the new node would take NodePool default past its limits.cpu (6): its nodes, those being replaced "
        "included, count 4 and the new node up to 4 more")

    d, validator = _expiry({"cpu": 8000})
    assert validator.validate(d) is None


def test_a_replacement_past_its_pools_node_limit_is_dropped():
    """#29.2: limits.nodes: one node may run, the one being replaced is it."""
    d, validator = _expiry({"nodes": 1})
    out = validator.validate(d)
    assert out is not None and out.kind == Invalidation.LIMITS and "limits.nodes (1)" in out.why


def test_each_valid_commands_new_nodes_count_against_the_limits_the_next_command_sees():
    """#29.2: two one-node replacements, room for one more node: the first is valid, the second is dropped."""
    capped = replace(pool(), limits={"nodes": 3})
    views = [node("a", [pod("p")]), node("b", [pod("q")])]
    usage = pool_usage([existing_node(n, pool="default") for n in ("a", "b")], {})
    medium = replacement("default", 0.2, [("medium", 0.2, "on-demand")], ["on-demand"])
    validator = at(views, giving(medium), pools=[capped], usage=usage, types={"default": [MEDIUM]})
    assert validator.validate(consolidation("a", new=[medium])) is None
    out = validator.validate(consolidation("b", new=[medium]))
    assert out is not None and out.kind == Invalidation.LIMITS and "count 3" in out.why
