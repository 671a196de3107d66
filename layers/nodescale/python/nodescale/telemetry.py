"""Powertools Logger and Metrics, set up once per process, and every metric name in one place.

The CDK dashboard and alarms chart these names (namespace ``nodescale``, dimension ``Cluster``),
so a rename here is a rename there.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

NAMESPACE = "nodescale"
SERVICE = "nodescale"  # POWERTOOLS_SERVICE_NAME of every function; Powertools adds it as the `service` dimension

# Every metric carries Cluster and service; the "by X" metrics add the one dimension named beside them.
CLUSTER_DIMENSION = "Cluster"
SERVICE_DIMENSION = "service"
ERROR_CODE_DIMENSION = "ErrorCode"  # an EC2 error code, e.g. InsufficientInstanceCapacity
KIND_DIMENSION = "Kind"  # SpotInterruption | RebalanceRecommendation | InstanceStateChange | ScheduledChange | ZonalShift
NODEPOOL_DIMENSION = "NodePool"
CAPACITY_TYPE_DIMENSION = "CapacityType"  # spot | on-demand | reserved
REASON_DIMENSION = "Reason"  # Empty | Underutilized | Drifted | Expired | Unhealthy ...
RESOURCE_DIMENSION = "Resource"  # cpu | memory | nodes

# Provisioner
PENDING_PODS = "PendingPods"
PENDING_POD_AGE = "PendingPodAgeSeconds"
LAUNCHES = "Launches"
LAUNCH_FAILURES = "LaunchFailures"
# A launch that failed for a reason other than a capacity shortage (AccessDenied on iam:PassRole, no AMI...):
# one per NodePool per pass, without the ErrorCode dimension so that one alarm watches every code.
LAUNCH_FAILING = "LaunchFailing"
PENDING_TO_LAUNCH = "PendingToLaunchSeconds"
SOLVE_SECONDS = "SolveSeconds"
PRICE_LAUNCHED = "PricePerHourLaunched"
UNSCHEDULABLE_PODS = "UnschedulablePods"
LIMIT_REACHED = "NodePoolLimitReached"
UNMET_BY_LAUNCH = "PodsUnmetByLaunchedNode"  # pods the node launched for them cannot take: not launched for again
CONFIG_ERRORS = "ConfigurationErrors"  # NodePool / node class documents refused in one read of the configuration
# Interruption
INTERRUPTIONS = "Interruptions"
INTERRUPTION_ACTIONS = "InterruptionActions"
EVENT_TO_CORDON = "EventToCordonSeconds"
EVENT_TO_REPLACEMENT = "EventToReplacementSeconds"
EVENT_TO_EMPTY = "EventToEmptySeconds"
EVICTIONS_BLOCKED = "EvictionsBlockedByPDB"
IGNORED_EVENTS = "IgnoredEvents"
# Disruption
DECISIONS = "DisruptionDecisions"
NODES_TERMINATED = "NodesTerminated"
PRICE_SAVED = "PricePerHourSaved"
CONSOLIDATION_SCORE = "ConsolidationScore"  # a Balanced move's score when approved (Karpenter: karpenter_consolidation_score)
DRAIN_SECONDS = "DrainSeconds"
BUDGET_BLOCKED = "BudgetBlocked"
DO_NOT_DISRUPT_BLOCKED = "DoNotDisruptBlocked"
# Cluster state, reported by the disruption run each minute
NODES = "Nodes"  # + NodePool + CapacityType
PRICE_PER_HOUR = "ClusterPricePerHour"  # US dollars (CNY in China regions) per hour of managed capacity
MANAGED_CPU = "ManagedCpu"  # vCPUs of all managed capacity
MANAGED_MEMORY_GIB = "ManagedMemoryGiB"
NODEPOOL_USAGE = "NodePoolUsage"  # + NodePool + Resource
NODEPOOL_LIMIT = "NodePoolLimit"  # + NodePool + Resource, only for limits that are set

Unit = MetricUnit

_logger: Logger | None = None
_metrics: Metrics | None = None
_command_line = False
# The CLI's log level unless POWERTOOLS_LOG_LEVEL (or Powertools' legacy LOG_LEVEL) names another: its
# output already says what it did, so only what went wrong is logged.
COMMAND_LINE_LOG_LEVEL = "WARNING"


class _CurrentStream:
    """``sys.stdout`` or ``sys.stderr`` as it is when a line is written, not when the logger was built: a
    command run inside another program (a test capturing output) must not keep writing to a stream that was
    swapped out and closed since."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        return int(getattr(sys, self.name).write(text) or 0)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


def logger() -> Logger:
    global _logger
    if _logger is None:
        # In Lambda, stdout is the log stream; in the CLI, stdout is the command's output.
        _logger = Logger(service=_service(), stream=_CurrentStream("stderr" if _command_line else "stdout"))
    return _logger


def for_command_line() -> None:
    """Set up this process as the `nodescale` command: stdout carries the command's output and nothing else.

    Metrics stay off (Powertools prints EMF documents to stdout; nothing collects them from a shell) and
    logs go to stderr, at WARNING unless POWERTOOLS_LOG_LEVEL or LOG_LEVEL says otherwise. Call before
    anything logs.
    """
    global _command_line
    _command_line = True
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"  # Powertools' own flushes check it too
    if not os.environ.get("POWERTOOLS_LOG_LEVEL") and not os.environ.get("LOG_LEVEL"):
        os.environ["POWERTOOLS_LOG_LEVEL"] = COMMAND_LINE_LOG_LEVEL
    # Built now, so every `nodescale.*` module logger reaches its handler at its level from the start. The
    # stream is set after: Powertools reuses the handler of a Logger already built for this service.
    handler = logger().logger_handler
    if isinstance(handler, logging.StreamHandler):
        handler.stream = _CurrentStream("stderr")  # type: ignore[assignment]


def metrics() -> Metrics:
    global _metrics
    if _metrics is None:
        # An invocation that had nothing to report (no pending pods, no event) is normal here, not a
        # mistake worth a warning in every log stream.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        _metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE), service=_service())
        cluster = os.environ.get("CLUSTER_NAME")
        if cluster:
            _metrics.set_default_dimensions(**{CLUSTER_DIMENSION: cluster})
    return _metrics


def count(name: str, value: float = 1, **dimensions: str) -> None:
    """Add a metric; with dimensions it goes out as its own EMF document so dimensions don't mix."""
    _emit(name, MetricUnit.Count, value, dimensions)


def seconds(name: str, value: float, **dimensions: str) -> None:
    _emit(name, MetricUnit.Seconds, value, dimensions)


def gauge(name: str, value: float, unit: MetricUnit = MetricUnit.NoUnit, **dimensions: str) -> None:
    _emit(name, unit, value, dimensions)


def _emit(name: str, unit: MetricUnit, value: float, dimensions: dict[str, str]) -> None:
    m = metrics()
    if _disabled():
        return
    if not dimensions:
        m.add_metric(name=name, unit=unit, value=value)
        return
    defaults = {SERVICE_DIMENSION: _service()}
    if os.environ.get("CLUSTER_NAME"):
        defaults[CLUSTER_DIMENSION] = os.environ["CLUSTER_NAME"]
    with single_metric(name=name, unit=unit, value=value, namespace=m.namespace, default_dimensions=defaults) as single:
        for k, v in dimensions.items():
            single.add_dimension(name=k, value=str(v))


def _disabled() -> bool:
    # The CLI turns metrics off so EMF lines never mix with its own output.
    return _command_line or os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() in ("1", "true")


def _service() -> str:
    return os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE)
