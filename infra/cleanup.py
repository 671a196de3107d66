"""The stack-deletion step: a custom resource whose Delete runs lambdas/cleanup before the rest goes away.

Everything the cleanup needs (node profiles, access entries, the functions' role) is made a
dependency of the custom resource, so CloudFormation deletes it first; the triggers depend on the
custom resource, so no function is started while the cleanup runs.
"""

from __future__ import annotations

from aws_cdk import CustomResource, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

RESOURCE_TYPE = "Custom::NodescaleCleanup"
PROPERTY_CLUSTER = "ClusterName"
PROPERTY_RETAIN_NODES = "RetainNodes"  # "true" | "false": keep the instances on destroy (moving to another autoscaler)


class Cleanup(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, cluster: str, function: lambda_.IFunction, retain_nodes: bool,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY),
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={PROPERTY_CLUSTER: cluster, PROPERTY_RETAIN_NODES: "true" if retain_nodes else "false"},
        )
