"""Kubernetes quantities and resource lists: exact units, rounding up, and clear messages for bad input."""

from __future__ import annotations

from decimal import Decimal

import pytest

from nodescale.model import resources as res
from nodescale.model.quantity import QuantityError, format_bytes, format_cpu, parse_quantity, to_int, to_milli


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("2e3", Decimal(2000)),
        ("1E2", Decimal(100)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("100Gi", Decimal(100 * 2**30)),
        ("1Ti", Decimal(2**40)),
        ("250u", Decimal("0.00025")),
        ("3n", Decimal("3e-9")),
        ("+4", Decimal(4)),
        ("-1", Decimal(-1)),
        (7, Decimal(7)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1Gb", "1 Gi", "1.2.3", "Gi", "1e", "1ki", "1iB", "--1"])
def test_bad_quantity_strings_say_what_is_allowed(bad):
    with pytest.raises(QuantityError) as exc:
        parse_quantity(bad)
    assert repr(bad) in str(exc.value)
    assert "suffix" in str(exc.value)


@pytest.mark.parametrize("bad", [None, True, [1], {"a": 1}, float("nan"), float("inf")])
def test_non_quantities_are_rejected(bad):
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(bad)


def test_cpu_in_millicores_rounds_up():
    assert to_milli("1") == 1000
    assert to_milli("250m") == 250
    assert to_milli("0.1") == 100
    assert to_milli("1.0005") == 1001  # a request is never rounded down
    assert to_milli(2) == 2000


def test_bytes_round_up():
    assert to_int("1Gi") == 2**30
    assert to_int("1.5") == 2
    assert to_int("100Mi") == 100 * 2**20


def test_formatting():
    assert format_cpu(2000) == "2"
    assert format_cpu(1500) == "1500m"
    assert format_bytes(4 * 2**30) == "4Gi"
    assert format_bytes(3 * 2**20) == "3Mi"
    assert format_bytes(1000) == "1000"
    assert format_bytes(0) == "0"


class TestResourceLists:
    def test_canonical_units(self):
        parsed = res.parse_resource_list(
            {"cpu": "1500m", "memory": "2Gi", "ephemeral-storage": "10G", "pods": 110, "nvidia.com/gpu": "1"}
        )
        assert parsed == {
            "cpu": 1500,
            "memory": 2 * 2**30,
            "ephemeral-storage": 10 * 10**9,
            "pods": 110,
            "nvidia.com/gpu": 1,
        }

    def test_bad_value_names_the_field(self):
        with pytest.raises(QuantityError, match=r"^spec.limits.memory: '1 GB' is not a quantity"):
            res.parse_resource_list({"memory": "1 GB"}, "spec.limits")

    def test_negative_amounts_are_rejected(self):
        with pytest.raises(QuantityError, match=r"resources.cpu: '-1' is negative"):
            res.parse_resource_list({"cpu": "-1"})

    def test_arithmetic(self):
        a = {"cpu": 1000, "memory": 10}
        b = {"cpu": 500, "pods": 1}
        assert res.add(a, b) == {"cpu": 1500, "memory": 10, "pods": 1}
        assert res.subtract(a, b) == {"cpu": 500, "memory": 10, "pods": -1}
        assert res.merge_max(a, {"cpu": 2000, "memory": 5}) == {"cpu": 2000, "memory": 10}
        assert res.total([a, b, b]) == {"cpu": 2000, "memory": 10, "pods": 2}

    def test_fits_and_exceeded(self):
        avail = {"cpu": 2000, "memory": 4 * 2**30}
        assert res.fits({"cpu": 2000, "memory": 2**30}, avail)
        assert not res.fits({"cpu": 2001}, avail)
        assert not res.fits({"nvidia.com/gpu": 1}, avail)  # a resource the node lacks counts as 0
        assert res.fits({"nvidia.com/gpu": 0}, avail)
        assert res.exceeded({"cpu": 3000, "memory": 1, "nvidia.com/gpu": 1}, avail) == ["cpu", "nvidia.com/gpu"]

    def test_format_resources(self):
        assert res.format_resources({"memory": 2**31, "cpu": 500, "pods": 3}) == {
            "cpu": "500m",
            "memory": "2Gi",
            "pods": "3",
        }


@pytest.mark.parametrize("huge", ["1e999999999", "1e31", "9Ei", "10Ei", 2**63, "99999999999999999999"])
def test_absurd_quantities_are_out_of_range_not_a_crash(huge):
    with pytest.raises(QuantityError, match="out of range"):
        to_int(huge)
