"""Physical names derived from the cluster name, so two clusters' stacks never collide in one account."""

from __future__ import annotations

import hashlib
import re

_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def physical_name(cluster: str, suffix: str, max_length: int = 64) -> str:
    """`nodescale-<cluster>-<suffix>`; a long cluster name is shortened and made unique by its hash."""
    name = f"nodescale-{cluster}-{suffix}"
    if len(name) <= max_length:
        return name
    digest = _digest(cluster)
    room = max_length - len(f"nodescale--{digest}-{suffix}")
    return f"nodescale-{cluster[:room]}-{digest}-{suffix}"


def stack_name(cluster: str) -> str:
    """`nodescale-<cluster>`; CloudFormation forbids '_' in stack names, so such names get a hash suffix."""
    name = f"nodescale-{cluster}"
    if _STACK_NAME.match(name):
        return name
    return f"nodescale-{cluster.replace('_', '-')}-{_digest(cluster)}"


def _digest(cluster: str) -> str:
    return hashlib.sha256(cluster.encode()).hexdigest()[:8]
