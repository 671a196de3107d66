"""The environment variable names the functions read, taken from `nodescale.settings` so they cannot drift."""

from __future__ import annotations

from nodescale import settings
from nodescale.settings import (
    CLUSTER_LIMITS,
    CLUSTER_NAME,
    INSTANCE_PROFILE,
    NODE_ROLE,
    NODEPOOL_PARAMETER_PATH,
    NODEPOOL_SOURCES,
    TABLE_NAME,
    WATCH_SECONDS,
)

# Windows nodes have a role and instance profile of their own (one access entry per IAM principal).
# settings.py does not name these yet; once it does, its names are used here.
WINDOWS_NODE_ROLE: str = getattr(settings, "WINDOWS_NODE_ROLE", "NODESCALE_WINDOWS_NODE_ROLE")
WINDOWS_INSTANCE_PROFILE: str = getattr(settings, "WINDOWS_INSTANCE_PROFILE", "NODESCALE_WINDOWS_INSTANCE_PROFILE")

__all__ = [
    "CLUSTER_LIMITS",
    "CLUSTER_NAME",
    "INSTANCE_PROFILE",
    "NODE_ROLE",
    "NODEPOOL_PARAMETER_PATH",
    "NODEPOOL_SOURCES",
    "TABLE_NAME",
    "WATCH_SECONDS",
    "WINDOWS_INSTANCE_PROFILE",
    "WINDOWS_NODE_ROLE",
]
