"""#32 Throughput: repack's greedy fill of one node takes shortcuts (shapes that are out for good are
dropped, and once every pod left fits it takes them all at once); the node it builds must be exactly
the one the plain dot-product greedy builds, step by step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nodescale.aws.catalog_kwok import benchmark_types
from nodescale.scheduling.repack import _Packer, _Shared
from nodescale.scheduling.templates import TypeOption, fit_count, holds

ZONES = frozenset({"zone-a"})
SPOT = frozenset({"spot"})
_TYPES = benchmark_types(8)


def plain_greedy(packer: _Packer, option: TypeOption, price: float,
                 left: list[int]) -> tuple[float, list[int], list[int]] | None:
    """The fill one pod shape at a time over every shape, with no shortcut: the reference."""
    alloc = option.alloc
    scale = [1.0 / (a * a) if a else 0.0 for a in alloc[:2]]
    room, taken, shapes = list(alloc), [0] * len(left), packer.shapes
    while True:
        best, best_score = -1, -1.0
        for s, shape in enumerate(shapes):
            if taken[s] >= left[s] or not holds(room, shape):
                continue
            score = shape[0] * room[0] * scale[0] + shape[1] * room[1] * scale[1]
            if score > best_score:
                best, best_score = s, score
        if best < 0:
            break
        shape = shapes[best]
        add = max(1, min(left[best] - taken[best], fit_count(room, (0,) * len(room), shape) // 2))
        taken[best] += add
        room = [r - v * add for r, v in zip(room, shape, strict=True)]
    value = sum(v * n for v, n in zip(packer.values, taken, strict=True))
    if value <= 0:
        return None
    used = [a - r for a, r in zip(alloc, room, strict=True)]
    if packer.least > 1 and sum(1 for t in packer.candidates if holds(t.alloc, used)) < packer.least:
        return None
    return price / value, taken, used


def _option(i: int, alloc: tuple[int, ...], price: float) -> TypeOption:
    return TypeOption(_TYPES[i], i, alloc, (0,) * len(alloc), (("zone-a", "spot", price),), ())


@st.composite
def fills(draw: st.DrawFn) -> tuple[_Packer, list[int]]:
    extended = draw(st.booleans())  # a fourth resource (e.g. GPUs), which takes the general path

    def vector(cpu: int, memory: int, pods: int, extra: int) -> tuple[int, ...]:
        return (draw(st.integers(1, cpu)), draw(st.integers(1, memory)), draw(st.integers(1, pods))) + (
            (draw(st.integers(0, extra)),) if extended else ()
        )
    shapes = list(dict.fromkeys(vector(1500, 4096, 1, 2) for _ in range(draw(st.integers(1, 12)))))
    allocs = [vector(12_000, 30_000, 60, 8) for _ in range(draw(st.integers(1, 6)))]
    options = [_option(i, alloc, 0.01 * (alloc[0] + alloc[1] / 4)) for i, alloc in enumerate(allocs)]
    options.sort(key=lambda t: (t.price(ZONES, SPOT), t.name))
    least = draw(st.integers(1, len(options)))
    left = draw(st.lists(st.integers(0, 6), min_size=len(shapes), max_size=len(shapes)))
    return _Packer(options, ZONES, SPOT, shapes, least), left


@settings(max_examples=300, deadline=None)
@given(fills())
def test_fill_builds_the_node_the_plain_greedy_builds(case: tuple[_Packer, list[int]]) -> None:
    """#32: for every candidate type, _Packer._fill returns the plain greedy's score, counts and use."""
    packer, left = case
    packer.revalue(list(left))  # the pods' values at the resource prices of covering them, as pack() sets them
    for option, price in packer.types:
        assert packer._fill(option, price, list(left)) == plain_greedy(packer, option, price, list(left))


@st.composite
def fill_sequences(draw: st.DrawFn) -> tuple[_Packer, list[list[int]]]:
    packer, left = draw(fills())
    # Pods left change between rounds (pack() and the seeds take some), and may come back to an earlier
    # state: each fill must start from the pods left at that moment, not from the last round's.
    rounds = [left] + [
        draw(st.lists(st.integers(0, 6), min_size=len(left), max_size=len(left))) for _ in range(draw(st.integers(1, 3)))
    ]
    return packer, rounds + [left]


@settings(max_examples=200, deadline=None)
@given(fill_sequences())
def test_fills_of_one_packer_start_from_the_pods_left_each_time(case: tuple[_Packer, list[list[int]]]) -> None:
    """#32 Throughput: the fills of one round share their start (shapes left and what they request);
    every fill, round after round on the same packer, is still exactly the plain greedy's."""
    packer, rounds = case
    for left in rounds:
        packer.revalue(list(left))
        for option, price in packer.types:
            assert packer._fill(option, price, left) == plain_greedy(packer, option, price, list(left))


@settings(max_examples=200, deadline=None)
@given(fill_sequences())
def test_ways_sharing_their_fills_score_them_as_each_alone(case: tuple[_Packer, list[list[int]]]) -> None:
    """#32 Throughput: the ways of packing a class share each empty node's fill (it depends on the type
    and the pods left, not on how a way values pods); each way still scores and keeps exactly what it
    would alone, whichever way filled first."""
    packer, rounds = case
    shared = _Shared(packer.candidates, ZONES, SPOT)
    args = (packer.candidates, ZONES, SPOT, packer.shapes, packer.least)
    ways = [(_Packer(*args, fitted, shared), _Packer(*args, fitted)) for fitted in (False, True, False)]
    for left in rounds:
        for together, alone in ways:
            together.revalue(list(left))
            alone.revalue(list(left))
            for option, price in alone.types:
                assert together._fill(option, price, left) == alone._fill(option, price, left)
