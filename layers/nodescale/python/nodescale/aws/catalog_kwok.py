"""Instance types from a file in Karpenter's kwok format, and Karpenter's synthetic benchmark mix.

The kwok format is a JSON list of
``{name, architecture, operatingSystems, resources{cpu, memory, pods, ...},
offerings[{Price, Available, Requirements[{key, operator, values}]}]}``; each offering's zone and
capacity type come from its requirements (``topology.kubernetes.io/zone``, ``karpenter.sh/capacity-type``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..model import labels as wk
from ..model import resources as res
from ..model.instancetype import InstanceType, Offering
from ..model.quantity import QuantityError

MIB = 2**20
GIB = 2**30
# What Karpenter's kwok and fake providers reserve on every node: a token kubelet overhead.
KWOK_OVERHEAD: res.Resources = {res.CPU: 100, res.MEMORY: 10 * MIB}
DEFAULT_PODS = 110
DEFAULT_EPHEMERAL_STORAGE = 20 * GIB
BENCHMARK_ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
# The fake provider's price: 0.1 per vCPU plus 0.1 per GB (1e9 bytes) of memory, spot 30 % cheaper.
BENCHMARK_PRICE_PER_CPU = 0.1
BENCHMARK_PRICE_PER_GB = 0.1
BENCHMARK_SPOT_FRACTION = 0.7
_CAPACITY_TYPES = (wk.CAPACITY_SPOT, wk.CAPACITY_ON_DEMAND)


class KwokFormatError(ValueError):
    """A kwok instance-types file that cannot be used; the message names the file and the field."""


def _field(obj: Mapping, *names: str) -> object:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _offering(raw: object, where: str) -> Offering:
    if not isinstance(raw, Mapping):
        raise KwokFormatError(f"{where}: expected an object with Price, Available and Requirements")
    price = _field(raw, "Price", "price")
    if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
        raise KwokFormatError(
            f"{where}.Price: expected a number of dollars per hour (0 or more), got {price!r}"
        )
    available = _field(raw, "Available", "available")
    if available is None:
        available = True
    if not isinstance(available, bool):
        raise KwokFormatError(f"{where}.Available: expected true or false, got {available!r}")
    reqs = _field(raw, "Requirements", "requirements")
    if not isinstance(reqs, list):
        raise KwokFormatError(
            f"{where}.Requirements: expected a list of {{key, operator, values}}, got {reqs!r}"
        )
    found: dict[str, str] = {}
    for j, req in enumerate(reqs):
        at = f"{where}.Requirements[{j}]"
        if not isinstance(req, Mapping):
            raise KwokFormatError(f"{at}: expected an object with key, operator and values")
        key = wk.canonical(str(req.get("key") or ""))
        if key not in (wk.ZONE, wk.CAPACITY_TYPE):
            continue  # other keys (zone-id, ...) do not change where or how the offering is bought
        values = req.get("values")
        if req.get("operator") != "In" or not isinstance(values, list) or len(values) != 1:
            raise KwokFormatError(
                f"{at}: {key} must be operator In with exactly one value, got {dict(req)!r}"
            )
        found[key] = str(values[0])
    for key in (wk.ZONE, wk.CAPACITY_TYPE):
        if key not in found:
            raise KwokFormatError(f"{where}.Requirements: no requirement on {key}; each offering needs one")
    if found[wk.CAPACITY_TYPE] not in _CAPACITY_TYPES:
        raise KwokFormatError(
            f"{where}.Requirements: capacity type {found[wk.CAPACITY_TYPE]!r} is not one of {', '.join(_CAPACITY_TYPES)}"
        )
    return Offering(found[wk.ZONE], found[wk.CAPACITY_TYPE], float(price), available)


def _instance_type(raw: object, where: str) -> InstanceType:
    if not isinstance(raw, Mapping):
        raise KwokFormatError(f"{where}: expected an object with name, architecture, resources and offerings")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise KwokFormatError(f"{where}.name: a non-empty string is required")
    where = f"{where} ({name})"
    arch = raw.get("architecture") or "amd64"
    if arch not in ("amd64", "arm64"):
        raise KwokFormatError(f"{where}.architecture: {arch!r} is not allowed; use amd64 or arm64")
    systems = raw.get("operatingSystems") or ["linux"]
    if not isinstance(systems, list) or not all(s in ("linux", "windows") for s in systems):
        raise KwokFormatError(f"{where}.operatingSystems: expected a list of linux/windows, got {systems!r}")
    resources = raw.get("resources")
    if not isinstance(resources, Mapping):
        raise KwokFormatError(f"{where}.resources: expected an object like {{cpu: '4', memory: '16Gi'}}")
    try:
        capacity = res.parse_resource_list(resources, f"{where}.resources")
    except QuantityError as exc:
        raise KwokFormatError(str(exc)) from None
    for needed in (res.CPU, res.MEMORY):
        if not capacity.get(needed):
            raise KwokFormatError(f"{where}.resources.{needed}: required and more than 0")
    capacity.setdefault(res.PODS, DEFAULT_PODS)
    capacity.setdefault(res.EPHEMERAL_STORAGE, DEFAULT_EPHEMERAL_STORAGE)
    offerings = raw.get("offerings")
    if not isinstance(offerings, list) or not offerings:
        raise KwokFormatError(f"{where}.offerings: expected a non-empty list of offerings")
    return InstanceType(
        name=name,
        labels={
            wk.INSTANCE_TYPE: name,
            wk.ARCH: arch,
            wk.OS: systems[0],
            wk.INSTANCE_CPU: str(capacity[res.CPU] // 1000),
            wk.INSTANCE_MEMORY: str(capacity[res.MEMORY] // MIB),
        },
        capacity=capacity,
        overhead=dict(KWOK_OVERHEAD),
        offerings=tuple(_offering(o, f"{where}.offerings[{i}]") for i, o in enumerate(offerings)),
        operating_systems=frozenset(systems),
    )


def parse_kwok_instance_types(data: object, source: str = "<kwok instance types>") -> list[InstanceType]:
    if not isinstance(data, list):
        raise KwokFormatError(f"{source}: expected a JSON list of instance types, got {type(data).__name__}")
    types = [_instance_type(item, f"{source}: [{i}]") for i, item in enumerate(data)]
    seen: set[str] = set()
    for it in types:
        if it.name in seen:
            raise KwokFormatError(f"{source}: instance type {it.name!r} is defined more than once")
        seen.add(it.name)
    return types


def load_kwok_instance_types(path: str | Path) -> list[InstanceType]:
    """Read a kwok instance-types file; KwokFormatError names the file and field for bad input."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise KwokFormatError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KwokFormatError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    return parse_kwok_instance_types(data, str(path))


def benchmark_types(n: int = 400) -> list[InstanceType]:
    """Karpenter's scheduling benchmark mix: type i has i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, offered
    spot and on-demand in three zones at a price proportional to its size."""
    out = []
    for i in range(n):
        cpu, memory = i + 1, 2 * (i + 1) * GIB
        price = BENCHMARK_PRICE_PER_CPU * cpu + BENCHMARK_PRICE_PER_GB * memory / 1e9
        offerings = tuple(
            Offering(
                zone, ctype, round(price * (BENCHMARK_SPOT_FRACTION if ctype == wk.CAPACITY_SPOT else 1), 6)
            )
            for zone in BENCHMARK_ZONES
            for ctype in _CAPACITY_TYPES
        )
        name = f"fake-it-{i}"
        out.append(
            InstanceType(
                name=name,
                labels={
                    wk.INSTANCE_TYPE: name,
                    wk.ARCH: "amd64",
                    wk.OS: "linux",
                    wk.INSTANCE_CPU: str(cpu),
                    wk.INSTANCE_MEMORY: str(memory // MIB),
                },
                capacity={
                    res.CPU: cpu * 1000,
                    res.MEMORY: memory,
                    res.PODS: 10 * (i + 1),
                    res.EPHEMERAL_STORAGE: DEFAULT_EPHEMERAL_STORAGE,
                },
                overhead=dict(KWOK_OVERHEAD),
                offerings=offerings,
            )
        )
    return out
