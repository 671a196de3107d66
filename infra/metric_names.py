"""The custom metrics the dashboard charts and the alarms watch: the functions must emit exactly these.

The names that also exist in `nodescale.telemetry` have the same values there. Every metric is in NAMESPACE with the dimensions BASE_DIMENSIONS (`Cluster`, plus `service`, which
Powertools adds to every metric because POWERTOOLS_SERVICE_NAME is set); the "by X" metrics add the
one dimension named beside them. Alarms need the exact dimension set, hence the precision here.
"""

from __future__ import annotations

NAMESPACE = "nodescale"
SERVICE = "nodescale"  # POWERTOOLS_SERVICE_NAME of every function, hence the `service` dimension

DIMENSION_CLUSTER = "Cluster"
DIMENSION_SERVICE = "service"
BASE_DIMENSIONS = (DIMENSION_CLUSTER, DIMENSION_SERVICE)
DIMENSION_ERROR_CODE = "ErrorCode"  # an EC2 error code, e.g. InsufficientInstanceCapacity
DIMENSION_KIND = "Kind"  # spot-interruption | rebalance | state-change | scheduled-change
DIMENSION_NODEPOOL = "NodePool"
DIMENSION_CAPACITY_TYPE = "CapacityType"  # spot | on-demand
DIMENSION_REASON = "Reason"  # Empty | Underutilized | Drifted | Expired | Unhealthy ...
DIMENSION_RESOURCE = "Resource"  # cpu | memory | nodes

# gauges, emitted on every provisioner pass
PENDING_PODS = "PendingPods"  # Count: pods nodescale is trying to place
OLDEST_PENDING_POD_AGE = "PendingPodAgeSeconds"  # Seconds: age of the oldest of them (0 when none)
# counters
NODES_LAUNCHED = "Launches"  # Count: instances launched
LAUNCH_FAILURES = "LaunchFailures"  # Count, + ErrorCode
INTERRUPTIONS = "Interruptions"  # Count, + Kind
DISRUPTION_DECISIONS = "DisruptionDecisions"  # Count, + Reason
NODEPOOL_LIMIT_REACHED = "NodePoolLimitReached"  # Count: a launch held back by a NodePool or cluster limit
# gauges, emitted by the disruption function on every pass
NODES = "Nodes"  # Count, + NodePool + CapacityType
PRICE_PER_HOUR = "ClusterPricePerHour"  # None (US dollars per hour of all managed capacity)
MANAGED_CPU = "ManagedCpu"  # Count: vCPUs of all managed capacity
MANAGED_MEMORY_GIB = "ManagedMemoryGiB"  # Gigabytes
NODEPOOL_USAGE = "NodePoolUsage"  # Count, + NodePool + Resource
NODEPOOL_LIMIT = "NodePoolLimit"  # Count, + NodePool + Resource (only for limits that are set)

ALL = (
    PENDING_PODS,
    OLDEST_PENDING_POD_AGE,
    NODES_LAUNCHED,
    LAUNCH_FAILURES,
    INTERRUPTIONS,
    DISRUPTION_DECISIONS,
    NODEPOOL_LIMIT_REACHED,
    NODES,
    PRICE_PER_HOUR,
    MANAGED_CPU,
    MANAGED_MEMORY_GIB,
    NODEPOOL_USAGE,
    NODEPOOL_LIMIT,
)
