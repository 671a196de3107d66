"""The Lambda functions: code, layers, environment, sizing and their own log groups."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StackConfig
from infra.function_specs import INTERRUPTION, SCHEDULED, FunctionSpec
from infra.layers import NODESCALE_LAYER_DIR, REPO_ROOT, dependencies_layer_dir, nodescale_layer_dir
from infra.metric_names import NAMESPACE, SERVICE
from infra.names import physical_name

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
HANDLER = "handler.handler"
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "*.egg-info", "**/*.egg-info"]

# Powertools reads these names from the environment (they are Powertools' own, not nodescale's).
POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_LOG_LEVEL = "POWERTOOLS_LOG_LEVEL"
POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"


PROVISIONER_WATCH_SECONDS = 50

# A missed tick is dropped: the next one comes a minute later and sees the same cluster.
SCHEDULED_RETRY_ATTEMPTS = 0
SCHEDULED_MAX_EVENT_AGE = Duration.seconds(60)
# Only for an asynchronous invocation by hand (an operator's `aws lambda invoke --invocation-type Event`): the
# rules feed the interruption queue, whose event source mapping invokes synchronously and retries through the
# queue (infra/triggers.py). An interruption event is worth retrying for a while; after 15 minutes the
# instance is long gone and the disruption function's repair and garbage collection take over.
INTERRUPTION_RETRY_ATTEMPTS = 2
INTERRUPTION_MAX_EVENT_AGE = Duration.minutes(15)


class Layers(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(str(dependencies_layer_dir()), exclude=[".complete"]),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="nodescale's pinned dependencies (boto3, Powertools, kubernetes, PyYAML) for arm64",
        )
        nodescale = nodescale_layer_dir()
        # The compiled copy keeps its bytecode (made for the runtime); the sources, when that is all there is,
        # leave behind whatever bytecode this machine's Python wrote.
        compiled = nodescale != NODESCALE_LAYER_DIR
        self.nodescale = lambda_.LayerVersion(
            self,
            "Nodescale",
            code=lambda_.Code.from_asset(str(nodescale), exclude=[".complete"] if compiled else ASSET_EXCLUDES),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="The nodescale package shared by the functions",
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        return [self.dependencies, self.nodescale]


def make_function(
    scope: Construct,
    spec: FunctionSpec,
    *,
    config: StackConfig,
    role: iam.IRole,
    layers: Layers,
    environment: Mapping[str, str],
    failure_queue: sqs.IQueue | None = None,
    code_dir: Path | None = None,
) -> tuple[lambda_.Function, logs.LogGroup]:
    """One function with its own log group; scheduled ones drop what they cannot run at once.
    Its code is `lambdas/<name>/` unless `code_dir` says otherwise (a package staged with more files)."""
    name = physical_name(config.cluster_name, spec.name)
    log_group = logs.LogGroup(
        scope,
        f"{spec.name.title()}Logs",
        log_group_name=f"/aws/lambda/{name}",
        retention=logs.RetentionDays.ONE_MONTH,
        removal_policy=RemovalPolicy.DESTROY,
    )
    # Any retention CloudWatch accepts (validated in config), not only the enum's named ones.
    log_group.node.default_child.retention_in_days = config.log_retention_days  # type: ignore[union-attr]
    scheduled = spec in SCHEDULED
    is_interruption = spec is INTERRUPTION
    function = lambda_.Function(
        scope,
        f"{spec.name.title()}Function",
        function_name=name,
        description=f"nodescale ({config.cluster_name}): {spec.description}",
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        handler=HANDLER,
        code=lambda_.Code.from_asset(str(code_dir or REPO_ROOT / "lambdas" / spec.name), exclude=ASSET_EXCLUDES),
        layers=layers.all,
        role=role,
        memory_size=spec.memory_for(config),
        timeout=Duration.seconds(spec.timeout_for(config)),
        reserved_concurrent_executions=spec.reserved_concurrency,
        environment={
            **environment,
            POWERTOOLS_SERVICE_NAME: SERVICE,
            POWERTOOLS_LOG_LEVEL: config.log_level,
            POWERTOOLS_METRICS_NAMESPACE: NAMESPACE,
        },
        log_group=log_group,
        # Lambda queues asynchronous invocations itself: these settings decide what happens to an
        # event the function cannot take at once (reserved concurrency 1) or that failed.
        retry_attempts=SCHEDULED_RETRY_ATTEMPTS if scheduled else INTERRUPTION_RETRY_ATTEMPTS if is_interruption else None,
        max_event_age=SCHEDULED_MAX_EVENT_AGE if scheduled else INTERRUPTION_MAX_EVENT_AGE if is_interruption else None,
        on_failure=destinations.SqsDestination(failure_queue) if failure_queue is not None else None,
    )
    if config.in_vpc:
        # Set on the resource directly: the L2 wants an IVpc lookup, which would need AWS at synth time.
        function.node.default_child.add_property_override(  # type: ignore[union-attr]
            "VpcConfig",
            {"SubnetIds": list(config.vpc_subnet_ids), "SecurityGroupIds": list(config.vpc_security_group_ids)},
        )
    return function, log_group
