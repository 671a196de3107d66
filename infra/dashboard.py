"""CloudWatch: one dashboard per cluster and the alarms a platform team wants paged on."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import metric_names as m
from infra.config import StackConfig
from infra.names import physical_name

FUNCTION_ERRORS_PER_5_MINUTES = 3  # a single failed tick heals itself a minute later
WIDTH = 8
# A spot notice is two minutes: an interruption event waiting half of that has lost the time to replace first.
INTERRUPTION_QUEUE_AGE_ALARM_SECONDS = 60


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        functions: Sequence[lambda_.Function],
        dead_letter_queue: sqs.IQueue,
        interruption_queue: sqs.IQueue,
        topic: sns.ITopic | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.cluster = config.cluster_name
        self.alarms: list[cw.Alarm] = []
        self._alarm_prefix = physical_name(self.cluster, "", 200)

        for function in functions:
            label = _label(function)
            self._alarm(
                f"{label.title()}Errors",
                f"{label}-errors",
                function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=FUNCTION_ERRORS_PER_5_MINUTES,
                description=f"The {label} function failed {FUNCTION_ERRORS_PER_5_MINUTES} "
                            "or more times in 5 minutes: see its log group",
            )
        self._alarm(
            "DeadLetters",
            "dead-letters",
            dead_letter_queue.metric_approximate_number_of_messages_visible(period=Duration.minutes(1), statistic="Maximum"),
            threshold=1,
            description="Interruption events could not be delivered or handled: they wait in the dead-letter queue",
        )
        self._alarm(
            "InterruptionQueueAge",
            "interruption-queue-age",
            interruption_queue.metric_approximate_age_of_oldest_message(period=Duration.minutes(1), statistic="Maximum"),
            threshold=INTERRUPTION_QUEUE_AGE_ALARM_SECONDS,
            description=f"An interruption event has waited {INTERRUPTION_QUEUE_AGE_ALARM_SECONDS} s or more in the "
                        "interruption queue (a spot notice is 120 s): the function is failing or throttled",
        )
        self._alarm(
            "PodsPendingTooLong",
            "pods-pending",
            self.metric(m.OLDEST_PENDING_POD_AGE, "Maximum", Duration.minutes(1)),
            threshold=config.pending_pod_alarm_seconds,
            evaluation_periods=3,
            comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"A pod has waited for capacity longer than {config.pending_pod_alarm_seconds} s",
        )
        self._alarm(
            "LaunchFailing",
            "launch-failing",
            self.metric(m.LAUNCH_FAILING, "Sum", Duration.minutes(5)),
            threshold=1,
            description="A launch failed for a reason other than capacity (AccessDenied on iam:PassRole, no AMI, a "
                        "bad node class...): nodescale status names the NodePool, the error code and its message",
        )
        self._alarm(
            "NodePoolLimitReached",
            "limit-reached",
            self.metric(m.NODEPOOL_LIMIT_REACHED, "Sum", Duration.minutes(5)),
            threshold=1,
            description="A launch was held back by a NodePool or cluster-wide limit",
        )
        self._alarm(
            "ConfigurationErrors",
            "configuration-errors",
            self.metric(m.CONFIGURATION_ERRORS, "Maximum", Duration.minutes(5)),
            threshold=1,
            description="A NodePool or node class document is refused (nodescale status names it and why); "
                        "the other pools keep working",
        )
        self.price_alarm: cw.Alarm | None = None
        if config.price_per_hour_alarm is not None:
            self.price_alarm = self._alarm(
                "PricePerHour",
                "price-per-hour",
                self.metric(m.PRICE_PER_HOUR, "Maximum", Duration.minutes(5)),
                threshold=config.price_per_hour_alarm,
                evaluation_periods=2,
                comparison=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                description=f"Managed capacity costs more than {config.price_per_hour_alarm} per hour, in the region's "
                            "currency as the metric is (USD; CNY in the China regions)",
            )
        if topic is not None:
            for alarm in self.alarms:
                alarm.add_alarm_action(cw_actions.SnsAction(topic))
                alarm.add_ok_action(cw_actions.SnsAction(topic))

        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=physical_name(self.cluster, "dashboard", 255),
            default_interval=Duration.hours(3),
        )
        self.dashboard.add_widgets(*self._capacity_row())
        self.dashboard.add_widgets(*self._events_row())
        self.dashboard.add_widgets(*self._cost_row())
        self.dashboard.add_widgets(*self._function_row(functions, dead_letter_queue, interruption_queue))
        self.dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=3 * WIDTH))

    def metric(self, name: str, statistic: str, period: Duration | None = None) -> cw.Metric:
        period = period or Duration.minutes(1)
        return cw.Metric(
            namespace=m.NAMESPACE,
            metric_name=name,
            dimensions_map={m.DIMENSION_CLUSTER: self.cluster, m.DIMENSION_SERVICE: m.SERVICE},
            statistic=statistic,
            period=period,
        )

    def search(self, name: str, extra_dimensions: Sequence[str], statistic: str, label: str) -> cw.MathExpression:
        """Every series of `name` broken down by `extra_dimensions` (one line per pool, code, kind...)."""
        schema = ",".join([m.NAMESPACE, *m.BASE_DIMENSIONS, *extra_dimensions])
        return cw.MathExpression(
            expression=(
                f"SEARCH('{{{schema}}} MetricName=\"{name}\" {m.DIMENSION_CLUSTER}=\"{self.cluster}\"', "
                f"'{statistic}', 60)"
            ),
            using_metrics={},
            label=label,
            period=Duration.minutes(1),
        )

    def _alarm(
        self,
        construct_id: str,
        suffix: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            alarm_name=f"{self._alarm_prefix}{suffix}",
            alarm_description=f"nodescale ({self.cluster}): {description}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=comparison,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.alarms.append(alarm)
        return alarm

    def _capacity_row(self) -> list[cw.IWidget]:
        return [
            cw.GraphWidget(
                title="Pending pods and the oldest one's age",
                left=[self.metric(m.PENDING_PODS, "Maximum")],
                right=[self.metric(m.OLDEST_PENDING_POD_AGE, "Maximum")],
                left_annotations=[],
                right_annotations=[cw.HorizontalAnnotation(
                    value=self.config.pending_pod_alarm_seconds, label="alarm", color=cw.Color.RED)],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="Launches, failures by error code, failing launches, and pods the node launched for them cannot take",
                left=[self.metric(m.NODES_LAUNCHED, "Sum"),
                      self.search(m.LAUNCH_FAILURES, [m.DIMENSION_ERROR_CODE], "Sum", "failures"),
                      self.metric(m.LAUNCH_FAILING, "Sum"),
                      self.metric(m.PODS_UNMET_BY_LAUNCH, "Sum")],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="Nodes by NodePool and capacity type",
                left=[self.search(m.NODES, [m.DIMENSION_NODEPOOL, m.DIMENSION_CAPACITY_TYPE], "Maximum", "nodes")],
                stacked=True,
                width=WIDTH,
            ),
        ]

    def _events_row(self) -> list[cw.IWidget]:
        return [
            cw.GraphWidget(
                title="Interruptions by kind",
                left=[self.search(m.INTERRUPTIONS, [m.DIMENSION_KIND], "Sum", "interruptions")],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="Disruption decisions by reason",
                left=[self.search(m.DISRUPTION_DECISIONS, [m.DIMENSION_REASON], "Sum", "decisions")],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="NodePool usage beside its limits",
                left=[
                    self.search(m.NODEPOOL_USAGE, [m.DIMENSION_NODEPOOL, m.DIMENSION_RESOURCE], "Maximum", "usage"),
                    self.search(m.NODEPOOL_LIMIT, [m.DIMENSION_NODEPOOL, m.DIMENSION_RESOURCE], "Maximum", "limit"),
                ],
                width=WIDTH,
            ),
        ]

    def _cost_row(self) -> list[cw.IWidget]:
        limits = self.config.cluster_limits
        price_lines = []
        if self.config.price_per_hour_alarm is not None:
            price_lines.append(cw.HorizontalAnnotation(value=self.config.price_per_hour_alarm, label="alarm",
                                                       color=cw.Color.ORANGE))
        if _is_number(limits.get("pricePerHour", "")):
            price_lines.append(cw.HorizontalAnnotation(value=float(limits["pricePerHour"]), label="cluster limit",
                                                       color=cw.Color.RED))
        cpu_lines = []
        if _is_number(limits.get("cpu", "")):
            cpu_lines.append(cw.HorizontalAnnotation(value=float(limits["cpu"]), label="cluster cpu limit",
                                                     color=cw.Color.RED))
        return [
            cw.GraphWidget(
                title="Price per hour of managed capacity (USD; CNY in China regions)",
                left=[self.metric(m.PRICE_PER_HOUR, "Maximum")],
                left_annotations=price_lines,
                width=WIDTH,
            ),
            cw.SingleValueWidget(
                title="Price per hour now (USD; CNY in China regions)",
                metrics=[self.metric(m.PRICE_PER_HOUR, "Maximum", Duration.minutes(5))],
                width=WIDTH // 2,
            ),
            cw.GraphWidget(
                title="Managed vCPUs and memory beside the cluster-wide limits",
                left=[self.metric(m.MANAGED_CPU, "Maximum")],
                right=[self.metric(m.MANAGED_MEMORY_GIB, "Maximum")],
                left_annotations=cpu_lines,
                width=WIDTH + WIDTH // 2,
            ),
        ]

    def _function_row(
        self, functions: Sequence[lambda_.Function], queue: sqs.IQueue, interruption_queue: sqs.IQueue
    ) -> list[cw.IWidget]:
        return [
            cw.GraphWidget(
                title="Function errors and throttles",
                left=[f.metric_errors(label=f"{_label(f)} errors", statistic="Sum") for f in functions],
                right=[f.metric_throttles(label=f"{_label(f)} throttles", statistic="Sum") for f in functions],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="Function duration (p90, ms)",
                left=[f.metric_duration(label=_label(f), statistic="p90") for f in functions],
                width=WIDTH,
            ),
            cw.GraphWidget(
                title="Interruption queue and dead letters",
                left=[queue.metric_approximate_number_of_messages_visible(label="dead letters", statistic="Maximum"),
                      interruption_queue.metric_approximate_number_of_messages_visible(
                          label="interruption events waiting", statistic="Maximum")],
                right=[interruption_queue.metric_approximate_age_of_oldest_message(
                    label="oldest interruption event (s)", statistic="Maximum")],
                right_annotations=[cw.HorizontalAnnotation(
                    value=INTERRUPTION_QUEUE_AGE_ALARM_SECONDS, label="alarm", color=cw.Color.RED)],
                width=WIDTH,
            ),
        ]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label(function: lambda_.Function) -> str:
    """provisioner, interruption, disruption: the function's construct id without its suffix."""
    return function.node.id.removesuffix("Function").lower()
