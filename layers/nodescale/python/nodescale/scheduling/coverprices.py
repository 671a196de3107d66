"""Prices per unit of cpu and memory the repack pass values pods at (#32): the dual prices of the cheapest
fractional cover of what is left to place, over the types no other beats in both resources per dollar;
or (the pass's older way) one price per resource fitted to the types' prices by least squares. Also the
types no cheaper one beats in every resource, the only ones a pattern needs."""

from __future__ import annotations

from collections.abc import Sequence

from .templates import TypeOption, holds


def efficient(types: list[tuple[TypeOption, float]]) -> list[tuple[TypeOption, float]]:
    """The types no other beats in both cpu and memory per dollar: the only ones a fractional cover of
    cpu and memory needs (fewer types, far fewer pairs to try)."""
    per_dollar = [(t.alloc[0] / price, t.alloc[1] / price, t, price) for t, price in types if price > 0]
    per_dollar.sort(key=lambda e: (-e[0], -e[1]))
    out = []
    most_memory = -1.0
    for _cpu, memory, option, price in per_dollar:
        if memory > most_memory:
            out.append((option, price))
            most_memory = memory
    return out


def resource_prices(types: list[tuple[TypeOption, float]], demand: Sequence[int]) -> list[float]:
    """A price per unit of cpu and of memory: the dual prices of the cheapest fractional cover of
    ``demand`` by the types (at most two of them in two resources, so every one and every pair is
    tried); each at least a hundredth of the average so no pod is worth nothing."""
    if not types or demand[0] <= 0 and demand[1] <= 0:
        return [1.0, 0.0]
    dc, dm = max(demand[0], 0), max(demand[1], 0)
    rows = [(t.alloc[0], t.alloc[1], price) for t, price in types if t.alloc[0] > 0 and t.alloc[1] > 0]
    best_cost = float("inf")
    duals = [0.0, 0.0]
    for c, m, p in rows:
        nodes = max(dc / c, dm / m)
        if p * nodes < best_cost:
            best_cost = p * nodes
            duals = [p / c, 0.0] if dc / c >= dm / m else [0.0, p / m]
    for i, (c1, m1, p1) in enumerate(rows):
        for c2, m2, p2 in rows[i + 1:]:
            det = c1 * m2 - c2 * m1
            if not det:
                continue
            n1 = (dc * m2 - c2 * dm) / det
            n2 = (c1 * dm - dc * m1) / det
            cost = p1 * n1 + p2 * n2
            if n1 < 0 or n2 < 0 or cost >= best_cost:
                continue
            yc = (p1 * m2 - p2 * m1) / det
            ym = (c1 * p2 - c2 * p1) / det
            if yc >= 0 and ym >= 0:
                best_cost, duals = cost, [yc, ym]
    total = sum(p for _, _, p in rows)
    floor_cpu = 0.01 * total / max(1, sum(c for c, _, _ in rows))
    floor_mem = 0.01 * total / max(1, sum(m for _, m, _ in rows))
    return [max(duals[0], floor_cpu), max(duals[1], floor_mem)]


def fitted_prices(types: list[tuple[TypeOption, float]]) -> list[float]:
    """(The fitted way.) A price per unit of cpu and of memory fitted (least squares, through the origin) to the types'
    prices; each at least a tenth of its share when the fit fails."""
    if not types:
        return [1.0, 0.0]
    rows = [(t.alloc[0], t.alloc[1], price) for t, price in types]
    sxx = sum(c * c for c, _, _ in rows)
    syy = sum(m * m for _, m, _ in rows)
    sxy = sum(c * m for c, m, _ in rows)
    sxp = sum(c * p for c, _, p in rows)
    syp = sum(m * p for _, m, p in rows)
    det = sxx * syy - sxy * sxy
    cpu = mem = 0.0
    if det > 0:
        cpu = (sxp * syy - syp * sxy) / det
        mem = (syp * sxx - sxp * sxy) / det
    total = sum(p for _, _, p in rows)
    floor_cpu = 0.1 * total / max(1, sum(c for c, _, _ in rows))
    floor_mem = 0.1 * total / max(1, sum(m for _, m, _ in rows))
    return [max(cpu, floor_cpu), max(mem, floor_mem)]


def undominated(candidates: list[TypeOption], zones: frozenset[str],
                 capacity_types: frozenset[str]) -> list[tuple[TypeOption, float]]:
    """Candidates (cheapest first) no cheaper-or-equal type beats in every resource."""
    kept: list[tuple[TypeOption, float]] = []
    for option in candidates:
        price = option.price(zones, capacity_types) or 0.0
        alloc = option.alloc
        cpu, memory, pods = alloc[0], alloc[1], alloc[2]
        beaten = False
        for other, p in kept:
            # cpu, memory and pods first: most candidates fail there, before the full (slower) test.
            held = other.alloc
            if held[0] >= cpu and held[1] >= memory and held[2] >= pods and p <= price and holds(held, alloc):
                beaten = True
                break
        if not beaten:
            kept.append((option, price))
    return kept
