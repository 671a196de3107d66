"""Regenerate nodescale's bundled instance-type catalog from moto's recorded EC2 answers.

Run by developers when moto's recording or the price table changes, never at run time:

    .venv/bin/python scripts/build_catalog.py [--moto-resources DIR] [--output FILE]

Inputs: moto's ``ec2/resources/instance_types.json.gz`` (a recorded DescribeInstanceTypes) and
``instance_type_offerings/availability-zone/<region>.json.gz`` (recorded
DescribeInstanceTypeOfferings per zone), plus the bundled ``ec2-on-demand-prices.json``.

Output: ``nodescale/data/instance-types.json.gz``, one row of facts per type (columns named in
"fields") and, per region, its zones and for each type offered there a bit mask of those zones.

Two gaps in the recording are filled, and the file says so:
- Regions moto did not record (China, GovCloud) but the price table covers: a type is taken as
  offered in every zone of the region when the table prices it there ("zonesEstimated": true).
  cn-northwest-1, which the table does not price, takes cn-north-1's priced types (``_TYPES_FROM``).
- The P3 (V100) family, still sold and priced but absent from the recording: its facts come from
  AWS's published specifications (``_SUPPLEMENT`` below); it is offered in every zone of each region
  whose price table lists it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers" / "nodescale" / "python"))

from nodescale.model.catalog_facts import FIELDS, TypeFacts, facts_from_describe  # noqa: E402

DATA = ROOT / "layers" / "nodescale" / "python" / "nodescale" / "data"
PRICES = DATA / "ec2-on-demand-prices.json"
OUTPUT = DATA / "instance-types.json.gz"

# Zones of priced regions moto has no offerings recording for (AWS's published zone names).
_UNRECORDED_ZONES = {
    "cn-north-1": ("cn-north-1a", "cn-north-1b", "cn-north-1d"),
    # Ningxia: three zones (Getting Started with AWS in China, "Availability Zones for the China Regions").
    "cn-northwest-1": ("cn-northwest-1a", "cn-northwest-1b", "cn-northwest-1c"),
    "us-gov-west-1": ("us-gov-west-1a", "us-gov-west-1b", "us-gov-west-1c"),
    "us-gov-east-1": ("us-gov-east-1a", "us-gov-east-1b", "us-gov-east-1c"),
}


def _p3(
    name: str, vcpu: int, memory_gib: int, gpus: int, network_mbps: int, enis: int, ipv4: int, ebs_mbps: int
) -> TypeFacts:
    return TypeFacts(
        name=name,
        vcpu=vcpu,
        memory_mib=memory_gib * 1024,
        architectures=("x86_64",),
        cpu_manufacturer="Intel",
        hypervisor="xen",
        bare_metal=False,
        current_generation=True,
        windows=True,
        gpu_count=gpus,
        gpu_manufacturer="NVIDIA",
        gpu_name="V100",
        gpu_memory_mib=16384,
        local_nvme_gib=0,
        network_mbps=network_mbps,
        max_enis=enis,
        ipv4_per_eni=ipv4,
        neuron_count=0,
        encryption_in_transit=False,
        usage_classes=("on-demand", "spot"),
        ebs_mbps=ebs_mbps,
    )


# AWS's P3 specifications (instance type page and the ENI/IP limits table); "Up to 10 Gigabit" has no baseline.
_SUPPLEMENT = (
    _p3("p3.2xlarge", 8, 61, 1, 0, 4, 15, 1750),
    _p3("p3.8xlarge", 32, 244, 4, 10000, 8, 30, 7000),
    _p3("p3.16xlarge", 64, 488, 8, 25000, 8, 30, 14000),
)


def _moto_resources() -> Path:
    import moto

    return Path(moto.__file__).resolve().parent / "ec2" / "resources"


def _read_gz(path: Path) -> object:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


# Unrecorded regions the price table does not cover either: which region's table says what is offered there
# (the other China region, same partition and currency; an estimate, named in "source").
_TYPES_FROM = {"cn-northwest-1": "cn-north-1"}


def build(moto_resources: Path) -> dict:
    recorded = _read_gz(moto_resources / "instance_types.json.gz")
    entries = recorded.values() if isinstance(recorded, dict) else recorded
    facts = {f.name: f for f in (facts_from_describe(e) for e in entries)}
    supplemented = [f.name for f in _SUPPLEMENT if f.name not in facts]
    for extra in _SUPPLEMENT:
        facts.setdefault(extra.name, extra)
    names = sorted(facts)
    index = {n: i for i, n in enumerate(names)}
    prices = json.loads(PRICES.read_text())["regions"]

    regions: dict[str, dict] = {}
    for path in sorted((moto_resources / "instance_type_offerings" / "availability-zone").glob("*.json.gz")):
        region = path.name.removesuffix(".json.gz")
        offered: dict[str, set[str]] = {}
        for item in _read_gz(path):
            if item["InstanceType"] in index:
                offered.setdefault(item["InstanceType"], set()).add(item["Location"])
        zones = sorted({z for zs in offered.values() for z in zs})
        for name in supplemented:
            if name in prices.get(region, {}):
                offered[name] = set(zones)
        regions[region] = {"zones": zones, "zonesEstimated": False, "offers": _masks(offered, zones, index)}
    for region, zones in _UNRECORDED_ZONES.items():
        priced = region if region in prices else _TYPES_FROM.get(region)
        if region in regions or priced not in prices:
            continue
        offered = {n: set(zones) for n in prices[priced] if n in index}
        regions[region] = {
            "zones": list(zones),
            "zonesEstimated": True,
            "offers": _masks(offered, list(zones), index),
        }

    import moto

    return {
        "source": (
            f"EC2 DescribeInstanceTypes and DescribeInstanceTypeOfferings as recorded by moto {moto.__version__}; "
            f"{', '.join(supplemented) or 'nothing'} added from AWS's published specifications; "
            f"zones of {', '.join(r for r in regions if regions[r]['zonesEstimated'])} estimated from the price table"
            + "".join(f"; {r}'s types from {src}'s prices" for r, src in _TYPES_FROM.items() if r in regions)
        ),
        "fields": list(FIELDS),
        "types": [facts[n].to_row() for n in names],
        "regions": regions,
    }


def _masks(offered: dict[str, set[str]], zones: list[str], index: dict[str, int]) -> list[list[int]]:
    """[type index, bit mask of zones] pairs: compact, and decoded with one loop at load time."""
    bit = {z: 1 << i for i, z in enumerate(zones)}
    out = []
    for name in sorted(offered, key=index.__getitem__):
        mask = 0
        for zone in offered[name]:
            mask |= bit[zone]
        out.append([index[name], mask])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moto-resources", type=Path, default=None, help="moto's ec2/resources folder")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    data = build(args.moto_resources or _moto_resources())
    body = json.dumps(data, separators=(",", ":"), sort_keys=False).encode()
    args.output.write_bytes(gzip.compress(body, compresslevel=9, mtime=0))
    sys.stdout.write(
        f"wrote {args.output} ({args.output.stat().st_size} bytes): {len(data['types'])} types, "
        f"{len(data['regions'])} regions\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
