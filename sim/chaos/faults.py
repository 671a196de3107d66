"""The fault plan of a chaos run: which share of AWS and Kubernetes calls fail, and how.

AWS calls go through the sim's fault proxy (throttling, 5xx, service unavailable); Kubernetes calls
through the sim API server's fault switch (500, 429, 409 conflicts on writes, timeouts). Watches are
left alone so the checkers' streams stay whole; the product's own lists, reads and writes are not.
"""

from __future__ import annotations

import json
import random
import urllib.request
from dataclasses import dataclass
from typing import Any

from sim.environment import Environment

KUBE_READS = ["get", "list"]
KUBE_WRITES = ["create", "update", "patch", "delete", "deletecollection"]
CAPACITY_CODES = ("InsufficientInstanceCapacity", "UnfulfillableCapacity", "MaxSpotInstanceCountExceeded")


@dataclass(frozen=True)
class FaultPlan:
    aws_fraction: float = 0.10
    kube_fraction: float = 0.10
    kube_timeout_seconds: float = 0.5
    capacity_rule_uses: int = 3

    def aws_rules(self, seed: int) -> list[dict[str, Any]]:
        """Three kinds sharing the fraction; each rule rolls on what the ones before let through."""
        share = _share(self.aws_fraction, 3)
        return [
            {"kind": "chaos", "fraction": share, "code": "throttling", "seed": seed},
            {"kind": "chaos", "fraction": share, "code": "internal", "seed": seed + 1},
            {"kind": "chaos", "fraction": share, "code": "ServiceUnavailable", "status": 503, "seed": seed + 2},
        ]

    def kube_rules(self, seed: int) -> list[dict[str, Any]]:
        share = _share(self.kube_fraction, 4)
        every = KUBE_READS + KUBE_WRITES
        return [
            {"status": 500, "fraction": share, "verbs": every, "seed": seed},
            {"status": 429, "fraction": share, "verbs": every, "seed": seed + 1},
            # Conflicts are what writes get; spread over writes only, they keep their share of all calls.
            {"status": 409, "fraction": min(1.0, share * 3), "verbs": KUBE_WRITES, "seed": seed + 2},
            {"status": "timeout", "fraction": share, "verbs": every, "delaySeconds": self.kube_timeout_seconds,
             "seed": seed + 3},
        ]

    def apply(self, env: Environment, seed: int) -> None:
        env.add_aws_fault(rules=self.aws_rules(seed))
        for rule in self.kube_rules(seed + 10):
            env.add_kube_fault(**rule)

    def capacity_rule(self, rng: random.Random, instance_type: str, zone: str, capacity_type: str) -> dict[str, Any]:
        """Capacity errors for one offering, for the next few launches that try it."""
        return {
            "kind": "capacity", "instanceType": instance_type, "zone": zone, "capacityType": capacity_type,
            "errorCode": rng.choice(CAPACITY_CODES), "count": self.capacity_rule_uses,
        }


def _share(total: float, parts: int) -> float:
    """The per-rule fraction so that `parts` rules rolled one after another fail `total` of all calls."""
    return 1 - (1 - total) ** (1 / parts)


def injected(env: Environment) -> dict[str, int]:
    """What the sim's control APIs say they injected so far (read before the rules are cleared)."""
    aws_rules = env.aws_faults()
    with urllib.request.urlopen(f"{env.control_url}/faults", timeout=30) as response:  # noqa: S310 - loopback
        kube = json.loads(response.read())
    return {
        "aws_errors": sum(int(r.get("fired") or 0) for r in aws_rules if r.get("kind") == "chaos"),
        "aws_capacity_errors": sum(int(r.get("fired") or 0) for r in aws_rules if r.get("kind") == "capacity"),
        "kube_errors": int(kube.get("injected") or 0),
    }
