"""Physical names the stack gives what it creates, derived from the cluster name.

The rule lives here, in the layer, because the CLI needs it too: without NODESCALE_TABLE it finds the
stack's table by the name the stack gave it. `infra/` imports these functions (the layer never imports
`infra/`), so the stack and the CLI cannot disagree on a name.
"""

from __future__ import annotations

import hashlib

# DynamoDB allows 255 characters in a table name.
TABLE_NAME_MAX = 255
TABLE_SUFFIX = "state"
# The table's key and TTL attributes: leases, unavailable offerings and idempotency records all use them.
TABLE_KEY = "pk"
TABLE_TTL = "expiresAt"


def physical_name(cluster: str, suffix: str, max_length: int = 64) -> str:
    """`nodescale-<cluster>-<suffix>`; a long cluster name is shortened and made unique by its hash."""
    name = f"nodescale-{cluster}-{suffix}"
    if len(name) <= max_length:
        return name
    digest = digest_of(cluster)
    room = max_length - len(f"nodescale--{digest}-{suffix}")
    return f"nodescale-{cluster[:room]}-{digest}-{suffix}"


def table_name(cluster: str) -> str:
    """The name of the stack's DynamoDB table (leases, unavailable offerings, idempotency records)."""
    return physical_name(cluster, TABLE_SUFFIX, TABLE_NAME_MAX)


# SQS allows 80 characters in a queue name.
QUEUE_NAME_MAX = 80


def interruption_queue_name(cluster: str) -> str:
    """The queue every interruption rule targets and the interruption function reads (``interruption/queue``)."""
    return physical_name(cluster, "interruption", QUEUE_NAME_MAX)


def dead_letter_queue_name(cluster: str) -> str:
    """Where undeliverable or repeatedly failing interruption events end up."""
    return physical_name(cluster, "dead-letters", QUEUE_NAME_MAX)


def digest_of(cluster: str) -> str:
    return hashlib.sha256(cluster.encode()).hexdigest()[:8]
