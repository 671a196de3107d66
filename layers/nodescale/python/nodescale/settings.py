"""Every setting nodescale reads from its environment, in one place, with defaults and validation.

The CDK stack sets these on the functions; `sim/` writes them to its env file; the CLI reads the
same names, so a shell, a test and a Lambda run the same configuration.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .model.featuregates import FeatureGateError, FeatureGates, parse_feature_gates


class SettingsError(ValueError):
    """A setting has a value nodescale cannot use; the message names the variable and what is allowed."""


# Names of the environment variables (the CDK stack and sim/ import these, so they cannot drift).
CLUSTER_NAME = "CLUSTER_NAME"
TABLE_NAME = "NODESCALE_TABLE"
NODEPOOL_PARAMETER_PATH = "NODESCALE_NODEPOOL_PARAMETER_PATH"
NODEPOOL_SOURCES = "NODESCALE_NODEPOOL_SOURCES"
PROVISIONER_MODE = "NODESCALE_PROVISIONER_MODE"
WATCH_SECONDS = "NODESCALE_WATCH_SECONDS"
NODE_ROLE = "NODESCALE_NODE_ROLE"
INSTANCE_PROFILE = "NODESCALE_INSTANCE_PROFILE"
# Windows nodes need a role of their own: EKS allows one access entry (EC2_LINUX or EC2_WINDOWS) per role.
WINDOWS_NODE_ROLE = "NODESCALE_WINDOWS_NODE_ROLE"
WINDOWS_INSTANCE_PROFILE = "NODESCALE_WINDOWS_INSTANCE_PROFILE"
CLUSTER_LIMITS = "NODESCALE_CLUSTER_LIMITS"
REGISTRATION_TIMEOUT = "NODESCALE_REGISTRATION_TIMEOUT_SECONDS"
REPAIR_THRESHOLD = "NODESCALE_REPAIR_THRESHOLD_SECONDS"
UNAVAILABLE_OFFERING_TTL = "NODESCALE_UNAVAILABLE_OFFERING_TTL_SECONDS"
# Above this many nodes (and with two NodePools or more) a disruption pass is split into slices of
# NodePools run by parallel invocations (usecases/disrupt/slices.py); 0 never splits.
DISRUPTION_SLICE_NODES = "NODESCALE_DISRUPTION_SLICE_NODES"
DEFAULT_DISRUPTION_SLICE_NODES = 2000
# Karpenter's own variable and format (Name=bool,...): model/featuregates.py.
FEATURE_GATES = "FEATURE_GATES"
KUBECONFIG = "KUBECONFIG"
# Karpenter's name and default: pods with Dynamic Resource Allocation claims are not launched for.
IGNORE_DRA_REQUESTS = "IGNORE_DRA_REQUESTS"
REGION = "AWS_REGION"
DEFAULT_REGION = "AWS_DEFAULT_REGION"

_SOURCES = ("ssm", "cluster")
_MODES = ("watch", "poll")
_LIMIT_KEYS = ("cpu", "memory", "nodes", "pricePerHour")


@dataclass(frozen=True)
class Settings:
    cluster_name: str
    region: str
    table_name: str | None = None
    nodepool_parameter_path: str = ""
    nodepool_sources: tuple[str, ...] = ("ssm",)
    provisioner_mode: str = "watch"
    watch_seconds: float = 50.0
    node_role: str | None = None
    instance_profile: str | None = None
    windows_node_role: str | None = None
    windows_instance_profile: str | None = None
    cluster_limits: Mapping[str, str] = field(default_factory=dict)
    registration_timeout_seconds: float = 900.0
    repair_threshold_seconds: float = 600.0
    unavailable_offering_ttl_seconds: float = 180.0
    disruption_slice_nodes: int = DEFAULT_DISRUPTION_SLICE_NODES
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    kubeconfig: str | None = None
    ignore_dra_requests: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        cluster = env.get(CLUSTER_NAME, "").strip()
        if not cluster:
            raise SettingsError(f"{CLUSTER_NAME} is not set: name the EKS cluster nodescale manages")
        region = (env.get(REGION) or env.get(DEFAULT_REGION) or "").strip()
        if not region:
            raise SettingsError(f"neither {REGION} nor {DEFAULT_REGION} is set: name the cluster's AWS region")
        sources = tuple(s.strip() for s in env.get(NODEPOOL_SOURCES, "ssm").split(",") if s.strip())
        bad = [s for s in sources if s not in _SOURCES]
        if bad or not sources:
            raise SettingsError(
                f"{NODEPOOL_SOURCES}={env.get(NODEPOOL_SOURCES)!r}: allowed are a comma-separated list of {_SOURCES}"
            )
        mode = env.get(PROVISIONER_MODE, "watch").strip()
        if mode not in _MODES:
            raise SettingsError(f"{PROVISIONER_MODE}={mode!r}: allowed are {_MODES}")
        return cls(
            cluster_name=cluster,
            region=region,
            table_name=env.get(TABLE_NAME) or None,
            nodepool_parameter_path=env.get(NODEPOOL_PARAMETER_PATH) or f"/nodescale/{cluster}/nodepools/",
            nodepool_sources=sources,
            provisioner_mode=mode,
            watch_seconds=_seconds(env, WATCH_SECONDS, 50.0),
            node_role=env.get(NODE_ROLE) or None,
            instance_profile=env.get(INSTANCE_PROFILE) or None,
            windows_node_role=env.get(WINDOWS_NODE_ROLE) or None,
            windows_instance_profile=env.get(WINDOWS_INSTANCE_PROFILE) or None,
            cluster_limits=_limits(env.get(CLUSTER_LIMITS, "")),
            registration_timeout_seconds=_seconds(env, REGISTRATION_TIMEOUT, 900.0),
            repair_threshold_seconds=_seconds(env, REPAIR_THRESHOLD, 600.0),
            unavailable_offering_ttl_seconds=_seconds(env, UNAVAILABLE_OFFERING_TTL, 180.0),
            disruption_slice_nodes=_count(env, DISRUPTION_SLICE_NODES, DEFAULT_DISRUPTION_SLICE_NODES),
            feature_gates=_gates(env.get(FEATURE_GATES, "")),
            kubeconfig=env.get(KUBECONFIG) or None,
            ignore_dra_requests=_ignore_dra(env.get(IGNORE_DRA_REQUESTS, "")),
        )


def _ignore_dra(raw: str) -> bool:
    """Only Karpenter's default is supported: planning for resource claims (false) is not built yet."""
    value = raw.strip().lower()
    if value in ("", "true"):
        return True
    if value == "false":
        raise SettingsError(
            f"{IGNORE_DRA_REQUESTS}=false: nodescale cannot plan for Dynamic Resource Allocation yet; "
            "allowed is true (Karpenter's default: pods with resource claims are not launched for)"
        )
    raise SettingsError(f"{IGNORE_DRA_REQUESTS}={raw!r}: allowed is true")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r}: allowed is a number of seconds") from None
    if value < 0:
        raise SettingsError(f"{name}={raw!r}: allowed is a number of seconds, 0 or more")
    return value


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not raw.isdigit():
        raise SettingsError(f"{name}={raw!r}: allowed is a whole number, 0 or more")
    return int(raw)


def _limits(raw: str) -> dict[str, str]:
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{CLUSTER_LIMITS} is not JSON ({exc.msg}): expected e.g. {{\"cpu\": \"2000\"}}") from None
    if not isinstance(parsed, dict) or any(k not in _LIMIT_KEYS for k in parsed):
        raise SettingsError(f"{CLUSTER_LIMITS}={raw!r}: allowed keys are {_LIMIT_KEYS}")
    return {k: str(v) for k, v in parsed.items()}


def _gates(raw: str) -> FeatureGates:
    try:
        return parse_feature_gates(raw, FEATURE_GATES)
    except FeatureGateError as exc:
        raise SettingsError(str(exc)) from None
