"""bench/bound.py's LP lower bound and Karpenter-like FFD model, and bench/cost.py's arithmetic, on cases
worked by hand."""

from __future__ import annotations

import pytest

from bench.bound import FfdPod, TypeRow, ffd, lp_bound, undominated
from bench.cost import FunctionUsage, Prices, Usage, monthly_cost
from bench.scheduling import HOST_ANTI

GIB = 2**30


def _row(name: str, cpu: float, mem_gib: float, price: float, pods: int = 100) -> TypeRow:
    return TypeRow(name, (int(cpu * 1000), int(mem_gib * GIB), pods), price, frozenset({"z1"}))


def test_lp_mixes_types_below_any_single_type_cover() -> None:
    # A: 4 cpu, 4 GiB; B: 2 cpu, 8 GiB; both $1. 4 pods of (1 cpu, 0) and 8 of (0, 1 GiB).
    # Any one type needs 2 nodes ($2). The LP: min a + b with 4a + 2b >= 4 (cpu), 4a + 8b >= 8 (memory)
    # -> a = b = 2/3, $4/3 (the dual y_cpu = 1/6, y_mem = 1/12 proves it: 4/6 + 8/12 = 4/3).
    rows = [_row("A", 4, 4, 1.0), _row("B", 2, 8, 1.0)]
    groups = [((1000, 0, 1), 4), ((0, GIB, 1), 8)]
    assert lp_bound(groups, rows) == pytest.approx(4 / 3, rel=1e-6)


def test_lp_puts_a_group_only_on_types_one_of_its_pods_fits() -> None:
    # One 3-cpu pod: B (2 cpu, $0.40) is cheaper per cpu, but the pod fits only A (4 cpu, $1): 3/4 of A.
    rows = [_row("A", 4, 16, 1.0), _row("B", 2, 16, 0.4)]
    assert lp_bound([((3000, GIB, 1), 1)], rows) == pytest.approx(0.75, rel=1e-6)


def test_lp_counts_pod_slots() -> None:
    # 30 tiny pods, 10 slots a node at $1: 3 nodes, whatever cpu and memory say.
    rows = [_row("A", 64, 256, 1.0, pods=10)]
    assert lp_bound([((10, 1024, 1), 30)], rows) == pytest.approx(3.0, rel=1e-6)


def test_dominated_types_are_dropped_and_the_optimum_kept() -> None:
    big = _row("big", 8, 32, 1.9, pods=40)
    small = _row("small", 4, 16, 1.0, pods=20)  # half of big, for more than half its price
    assert [r.name for r in undominated([small, big])] == ["big"]
    assert lp_bound([((1000, GIB, 1), 8)], [small, big]) == pytest.approx(1.9, rel=1e-6)


def test_ffd_grows_claims_and_launches_the_cheapest_type_that_holds_them() -> None:
    # small: 2 cpu at $1; large: 4 cpu at $1.80 (rows cheapest first). Pods 1.5, 1.5, 1.5, 0.4 cpu.
    # 1.5 -> new claim C1 {small, large}; 1.5 -> C1 (3.0: large only); 1.5 -> C1 full (4.5), new C2;
    # 0.4 -> claims tried fewest pods first: C2 (1.9: small still fits). C1 launches large, C2 small.
    # (First fit in creation order would put it on C1: large with 3 pods and small with 1.)
    rows = [_row("small", 2, 8, 1.0), _row("large", 4, 16, 1.8)]
    pods = [FfdPod((1500, GIB, 1)) for _ in range(3)] + [FfdPod((400, GIB, 1))]
    result = ffd(pods, rows)
    assert sorted(result.claims) == [("large", 2), ("small", 2)]
    assert result.price == pytest.approx(2.8)
    assert result.unplaced == 0


def test_ffd_keeps_hostname_anti_affinity_one_pod_a_node() -> None:
    rows = [_row("small", 2, 8, 1.0)]
    pods = [FfdPod((100, GIB, 1), HOST_ANTI, "a"), FfdPod((100, GIB, 1), HOST_ANTI, "a"),
            FfdPod((100, GIB, 1), HOST_ANTI, "b")]
    result = ffd(pods, rows)
    assert sorted(result.claims) == [("small", 1), ("small", 2)]


def test_monthly_cost_on_hand_computed_inputs() -> None:
    # One function: 43,800 invocations of 50 s at 1024 MB = 2,190,000 GB-s x $0.0000133334 = $29.200146;
    # requests 43,800 x $0.20/M = $0.00876; 1 read + 2 writes each: 43,800 x 0.125e-6 + 87,600 x 0.625e-6
    # = $0.005475 + $0.05475; logs 10,000 B each = 0.438 GB x $0.50 = $0.219; 10 metrics $3; 7 alarms $0.70;
    # one dashboard $3.
    usage = Usage({"f": FunctionUsage(43_800, 50.0, 1024, 10_000, 1, 2)}, metrics=10, alarms=7, dashboards=1)
    cost = monthly_cost(usage, Prices())
    assert cost["lambda compute"] == pytest.approx(29.200146, rel=1e-9)
    assert cost["lambda requests"] == pytest.approx(0.00876, rel=1e-9)
    assert cost["dynamodb"] == pytest.approx(0.005475 + 0.05475, rel=1e-9)
    assert cost["logs ingestion"] == pytest.approx(0.219, rel=1e-9)
    assert cost["custom metrics"] == pytest.approx(3.0)
    assert cost["alarms"] == pytest.approx(0.7)
    assert cost["dashboard"] == pytest.approx(3.0)
    assert cost["total"] == pytest.approx(29.200146 + 0.00876 + 0.060225 + 0.219 + 3.0 + 0.7 + 3.0, rel=1e-9)


def test_half_a_gigabyte_function_costs_half() -> None:
    one = Usage({"f": FunctionUsage(1000, 2.0, 1024, 0, 0, 0)}, metrics=0, alarms=0, dashboards=0)
    half = Usage({"f": FunctionUsage(1000, 2.0, 512, 0, 0, 0)}, metrics=0, alarms=0, dashboards=0)
    assert monthly_cost(half)["lambda compute"] == pytest.approx(monthly_cost(one)["lambda compute"] / 2)
    assert monthly_cost(one)["lambda compute"] == pytest.approx(2000 * 0.0000133334)


def test_lp_puts_one_pod_of_a_hostname_bound_group_on_a_node() -> None:
    """#32.1: three 1-cpu pods of a hostname spread (maxSkew 1) on 4-cpu $1 nodes: 3/4 of a node when they
    may share, three nodes when the bound knows each takes a node of its own (at most as many pods as nodes
    on each type); a plain group beside them rides on those nodes for free."""
    rows = [_row("A", 4, 16, 1.0)]
    assert lp_bound([((1000, GIB, 1), 3)], rows) == pytest.approx(0.75, rel=1e-6)
    assert lp_bound([((1000, GIB, 1), 3)], rows, [True]) == pytest.approx(3.0, rel=1e-6)
    both = [((1000, GIB, 1), 3), ((3000, GIB, 1), 3)]
    assert lp_bound(both, rows, [True, False]) == pytest.approx(3.0, rel=1e-6)
