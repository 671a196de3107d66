"""Karpenter's kwok instance-type files and the synthetic benchmark mix."""

from __future__ import annotations

import json

import pytest

from nodescale.aws.catalog_kwok import KwokFormatError, benchmark_types, load_kwok_instance_types
from nodescale.model import labels as wk
from nodescale.model import resources as res

GIB = 2**30
MIB = 2**20


def _offering(zone: str, ctype: str, price: float = 0.1, available: bool = True) -> dict:
    return {
        "Price": price,
        "Available": available,
        "Requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ctype]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
        ],
    }


def _type(name: str = "c-4x-amd64-linux", **overrides) -> dict:
    base = {
        "name": name,
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "20G"},
        "offerings": [
            _offering("test-zone-a", "spot", 0.07),
            _offering("test-zone-b", "on-demand", 0.1, False),
        ],
    }
    base.update(overrides)
    return base


def _write(tmp_path, data) -> str:
    path = tmp_path / "instance-types.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_good_file(tmp_path):
    path = _write(tmp_path, [_type(), _type("s-2x-arm64-linux", architecture="arm64")])
    types = load_kwok_instance_types(path)
    c4 = types[0]
    assert c4.name == "c-4x-amd64-linux"
    assert c4.capacity == {
        res.CPU: 4000,
        res.MEMORY: 8 * GIB,
        res.PODS: 110,
        res.EPHEMERAL_STORAGE: 20 * 10**9,
    }
    assert c4.allocatable[res.CPU] == 3900 and c4.allocatable[res.MEMORY] == 8 * GIB - 10 * MIB
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in c4.offerings] == [
        ("test-zone-a", "spot", 0.07, True),
        ("test-zone-b", "on-demand", 0.1, False),
    ]
    # Zones and capacity types a pod can get come from the available offerings only.
    assert c4.requirements[wk.ZONE].values == {"test-zone-a"}
    assert c4.requirements[wk.CAPACITY_TYPE].values == {"spot"}
    assert types[1].labels[wk.ARCH] == "arm64"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[{", r"not valid JSON \(line 1"),
        ({"name": "x"}, "expected a JSON list"),
        ([_type(name="")], r"\[0\]\.name: a non-empty string"),
        (
            [_type(resources={"cpu": "four", "memory": "1Gi"})],
            r"\[0\] \(c-4x-amd64-linux\)\.resources\.cpu: 'four'",
        ),
        ([_type(resources={"memory": "1Gi"})], r"resources\.cpu: required"),
        ([_type(architecture="s390x")], r"\.architecture: 's390x' is not allowed"),
        ([_type(offerings=[])], r"\.offerings: expected a non-empty list"),
        ([_type(offerings=[{**_offering("z", "spot"), "Price": "cheap"}])], r"\.offerings\[0\]\.Price"),
        (
            [_type(offerings=[{"Price": 1, "Requirements": [_offering("z", "spot")["Requirements"][0]]}])],
            r"\.offerings\[0\]\.Requirements: no requirement on topology\.kubernetes\.io/zone",
        ),
        ([_type(offerings=[_offering("z", "reserved")])], r"capacity type 'reserved' is not one of"),
        ([_type(), _type()], "defined more than once"),
    ],
)
def test_bad_file_names_file_and_field(tmp_path, data, message):
    path = _write(tmp_path, data)
    with pytest.raises(KwokFormatError, match=message) as err:
        load_kwok_instance_types(path)
    assert str(err.value).startswith(path)


def test_missing_file(tmp_path):
    with pytest.raises(KwokFormatError, match="cannot read the file"):
        load_kwok_instance_types(tmp_path / "nope.json")


def test_benchmark_mix():
    types = benchmark_types(400)
    assert len(types) == 400
    first, last = types[0], types[-1]
    assert first.capacity[res.CPU] == 1000 and first.capacity[res.MEMORY] == 2 * GIB
    assert last.capacity[res.CPU] == 400_000 and last.capacity[res.MEMORY] == 800 * GIB
    assert {(o.zone, o.capacity_type) for o in first.offerings} == {
        (z, c) for z in ("test-zone-1", "test-zone-2", "test-zone-3") for c in ("spot", "on-demand")
    }
    on_demand = [t.cheapest().price for t in types]
    assert on_demand == sorted(on_demand)
    # Price proportional to size: type i costs (i+1) times type 0.
    assert last.cheapest().price == pytest.approx(400 * first.cheapest().price)
