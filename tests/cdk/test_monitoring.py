"""The dashboard, the alarms and where they notify."""

from __future__ import annotations

import json
from typing import Any

from infra import metric_names as m
from tests.cdk.conftest import Synth


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    prefix = f"nodescale-{synth.stack.config.cluster_name}-"
    return {a["Properties"]["AlarmName"].removeprefix(prefix): a["Properties"]
            for a in synth.resources("AWS::CloudWatch::Alarm").values()}


def _dashboard_body(synth: Synth) -> str:
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    return json.dumps(dashboard["Properties"]["DashboardBody"])


def test_alarms_for_errors_dead_letters_pending_pods_and_limits(default: Synth) -> None:
    alarms = _alarms(default)
    assert sorted(alarms) == sorted(["provisioner-errors", "interruption-errors", "disruption-errors",
                                     "dead-letters", "interruption-queue-age", "pods-pending", "limit-reached",
                                     "configuration-errors", "launch-failing"])
    pending = alarms["pods-pending"]
    assert (pending["MetricName"], pending["Namespace"], pending["Threshold"]) == (m.OLDEST_PENDING_POD_AGE, "nodescale", 600)
    assert {d["Name"]: d["Value"] for d in pending["Dimensions"]} == {"Cluster": "demo-cluster", "service": "nodescale"}
    assert alarms["limit-reached"]["MetricName"] == m.NODEPOOL_LIMIT_REACHED
    # A refused NodePool or node class document (the others keep working): the functions emit the count.
    refused = alarms["configuration-errors"]
    assert (refused["MetricName"], refused["Threshold"], refused["ComparisonOperator"]) == \
        (m.CONFIGURATION_ERRORS, 1, "GreaterThanOrEqualToThreshold")
    assert alarms["dead-letters"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    # Interruption events waiting in their queue: a spot notice is two minutes, so a minute of waiting pages.
    age = alarms["interruption-queue-age"]
    assert (age["MetricName"], age["Threshold"], age["Namespace"]) == ("ApproximateAgeOfOldestMessage", 60, "AWS/SQS")
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": {
        "Fn::GetAtt": [default.logical_id(default.stack.interruption_queue), "QueueName"]}}]
    assert alarms["provisioner-errors"]["MetricName"] == "Errors"
    assert all("AlarmActions" not in a for a in alarms.values())  # no topic asked for


def test_a_failing_launch_pages(default: Synth) -> None:
    """#28.1: a launch that fails for a reason other than capacity (AccessDenied on iam:PassRole...) is an alarm
    on the one metric the functions emit for it without the ErrorCode dimension, so every code is watched."""
    failing = _alarms(default)["launch-failing"]
    assert (failing["MetricName"], failing["Namespace"], failing["Statistic"], failing["Period"]) == \
        (m.LAUNCH_FAILING, "nodescale", "Sum", 300)
    assert (failing["Threshold"], failing["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert {d["Name"]: d["Value"] for d in failing["Dimensions"]} == {"Cluster": "demo-cluster", "service": "nodescale"}
    assert "nodescale status" in failing["AlarmDescription"]


def test_price_alarm_from_context_and_notifications(full: Synth) -> None:
    alarms = _alarms(full)
    price = alarms["price-per-hour"]
    assert (price["MetricName"], price["Threshold"], price["ComparisonOperator"]) == (
        m.PRICE_PER_HOUR, 40, "GreaterThanThreshold")
    topic_id, _ = full.one("AWS::SNS::Topic")
    full.template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "platform@example.com"})
    assert all(a["AlarmActions"] == [{"Ref": topic_id}] for a in alarms.values())


def test_dashboard_charts_the_metrics_the_functions_emit(default: Synth, full: Synth) -> None:
    body = _dashboard_body(default)
    for name in m.ALL:
        assert name in body, f"{name} is not charted"
    for function in ("provisioner", "interruption", "disruption"):
        assert default.logical_id(getattr(default.stack, function)) in body
    assert "Throttles" in body and "Duration" in body and "ApproximateNumberOfMessagesVisible" in body
    assert "ApproximateAgeOfOldestMessage" in body and "interruption events waiting" in body
    # The cluster-wide limits and the price alarm are drawn beside usage.
    lines = {(a["label"], a["value"]) for w in _widgets(full) for a in w.get("properties", {}).get("annotations", {}).get("horizontal", [])}
    assert {("cluster limit", 50), ("cluster cpu limit", 2000), ("alarm", 40)} <= lines


def _widgets(synth: Synth) -> list[dict[str, Any]]:
    """The dashboard body as JSON, with CloudFormation references replaced by a placeholder."""
    _, dashboard = synth.one("AWS::CloudWatch::Dashboard")
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "REF" for p in parts))["widgets"]
