"""The environment variable names the functions read, taken from `nodescale.settings` so they cannot drift."""

from __future__ import annotations

from nodescale.settings import (
    CLUSTER_LIMITS,
    CLUSTER_NAME,
    FEATURE_GATES,
    INSTANCE_PROFILE,
    NODE_ROLE,
    NODEPOOL_PARAMETER_PATH,
    NODEPOOL_SOURCES,
    TABLE_NAME,
    WATCH_SECONDS,
    WINDOWS_INSTANCE_PROFILE,
    WINDOWS_NODE_ROLE,
)

__all__ = [
    "CLUSTER_LIMITS",
    "CLUSTER_NAME",
    "FEATURE_GATES",
    "INSTANCE_PROFILE",
    "NODE_ROLE",
    "NODEPOOL_PARAMETER_PATH",
    "NODEPOOL_SOURCES",
    "TABLE_NAME",
    "WATCH_SECONDS",
    "WINDOWS_INSTANCE_PROFILE",
    "WINDOWS_NODE_ROLE",
]
