"""Branch network interfaces per instance type: what the VPC resource controller advertises as
``vpc.amazonaws.com/pod-eni`` on a trunk-compatible node (security groups for pods).

EC2 does not report these through DescribeInstanceTypes, so, like Karpenter, nodescale bundles the
controller's limits table (``data/pod-eni-branch-interfaces.json``; its "source" names where it comes from).
"""

from __future__ import annotations

import functools
import json

from . import pricing

DATA_FILE = "pod-eni-branch-interfaces.json"


class BranchInterfaceDataError(ValueError):
    """The bundled branch-interface table is malformed."""


@functools.cache
def _table() -> dict[str, int]:
    data = json.loads(pricing.read_data_file(DATA_FILE))
    types = data.get("types") if isinstance(data, dict) else None
    if not isinstance(types, dict):
        raise BranchInterfaceDataError(
            f"nodescale/data/{DATA_FILE}: 'types' must be an object of type -> count"
        )
    bad = sorted(name for name, count in types.items() if type(count) is not int or count <= 0)
    if bad:
        raise BranchInterfaceDataError(
            f"nodescale/data/{DATA_FILE}: counts must be positive integers; not so for {', '.join(bad[:5])}"
        )
    return dict(types)


def branch_interfaces(instance_type: str) -> int:
    """Branch interfaces a node of this type offers pods; 0 when it cannot trunk (or is not in the table)."""
    return _table().get(instance_type, 0)
