"""Physical names derived from the cluster name, so two clusters' stacks never collide in one account.

The rule itself is the layer's (`nodescale.names`): the CLI finds the stack's table by the same rule.
"""

from __future__ import annotations

import re

from nodescale.names import digest_of, physical_name, table_name

__all__ = ["physical_name", "stack_name", "table_name"]

_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def stack_name(cluster: str) -> str:
    """`nodescale-<cluster>`; CloudFormation forbids '_' in stack names, so such names get a hash suffix."""
    name = f"nodescale-{cluster}"
    if _STACK_NAME.match(name):
        return name
    return f"nodescale-{cluster.replace('_', '-')}-{digest_of(cluster)}"
