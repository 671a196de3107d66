"""The whole of nodescale for one EKS cluster: `cdk deploy -c clusterName=NAME`."""

from __future__ import annotations

import json

from aws_cdk import Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import iam as policies
from infra import settings_names as env
from infra.cleanup import Cleanup
from infra.cluster_access import NodeAccess, function_access_entry
from infra.config import StackConfig
from infra.dashboard import Monitoring
from infra.function_specs import CLEANUP, DISRUPTION, FUNCTION_SPECS, INTERRUPTION, PROVISIONER
from infra.functions import PROVISIONER_WATCH_SECONDS, Layers, make_function
from infra.nag import acknowledge_findings
from infra.names import physical_name, table_name
from infra.nodepools import nodepool_parameters
from infra.rbac import RbacApplier
from infra.triggers import interruption_mapping, interruption_queue_for, interruption_rules, schedule_rule
from nodescale.names import TABLE_KEY, TABLE_TTL, dead_letter_queue_name

TABLE_PARTITION_KEY = TABLE_KEY  # the layer names them: its code reads and writes items by them
TABLE_TTL_ATTRIBUTE = TABLE_TTL


class NodescaleStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, **kwargs: object) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=config.stack_name,
            description=f"nodescale: node autoscaling on Lambda for the EKS cluster {config.cluster_name}",
            **kwargs,  # type: ignore[arg-type]
        )
        self.config = config
        cluster = config.cluster_name
        Tags.of(self).add("nodescale.io/stack-for", cluster)

        # Unavailable offerings and idempotency records: short-lived by design (TTL), so nothing of
        # value is lost when the stack is removed.
        self.table = dynamodb.Table(
            self,
            "State",
            table_name=table_name(cluster),  # the rule the CLI finds it by (nodescale.names)
            partition_key=dynamodb.Attribute(name=TABLE_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TABLE_TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            queue_name=dead_letter_queue_name(cluster),
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.nodepool_parameters = nodepool_parameters(self, config)
        self.nodes = NodeAccess(self, "Nodes", config=config)

        # One role per function, each granted what that function calls (infra/iam.py), and each mapped by its
        # own access entry to the Kubernetes group the RBAC manifest binds.
        self.roles: dict[str, iam.Role] = {}
        self.function_entries: dict[str, eks.CfnAccessEntry] = {}
        for spec in FUNCTION_SPECS:
            role = iam.Role(
                self,
                f"{spec.name.title()}Role",
                role_name=physical_name(cluster, spec.name),
                description=f"nodescale {spec.name} function for the EKS cluster {cluster}",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            )
            self.roles[spec.name] = role
            self.function_entries[spec.name] = function_access_entry(
                self, f"{spec.name.title()}Entry", cluster, role
            )

        layers = Layers(self, "Layers")
        environment = self._environment()
        self.provisioner, provisioner_logs = make_function(
            self, PROVISIONER, config=config, role=self.roles[PROVISIONER.name], layers=layers,
            environment={**environment, env.WATCH_SECONDS: str(PROVISIONER_WATCH_SECONDS)},
        )
        self.interruption, interruption_logs = make_function(
            self, INTERRUPTION, config=config, role=self.roles[INTERRUPTION.name], layers=layers,
            environment=environment, failure_queue=self.dead_letter_queue,
        )
        self.disruption, disruption_logs = make_function(
            self, DISRUPTION, config=config, role=self.roles[DISRUPTION.name], layers=layers,
            environment=environment,
        )
        self.cleanup_function, cleanup_logs = make_function(
            self, CLEANUP, config=config, role=self.roles[CLEANUP.name], layers=layers, environment=environment,
        )
        self._allow_disruption_slices()
        self.functions = [self.provisioner, self.interruption, self.disruption]
        self.access = self._grant({
            PROVISIONER.name: provisioner_logs, INTERRUPTION.name: interruption_logs,
            DISRUPTION.name: disruption_logs, CLEANUP.name: cleanup_logs,
        })

        self.cleanup = Cleanup(
            self, "Cleanup", cluster=cluster, function=self.cleanup_function,
            retain_nodes=config.retain_nodes_on_destroy,
        )
        # Deleted after the cleanup has run: what it needs to drain and terminate (its role with that role's
        # policy, and its access entry), the node identities the instances still use until then, and the
        # table the other functions' last invocations may still write.
        cleanup_identity = [self.roles[CLEANUP.name], self.function_entries[CLEANUP.name]]
        for dependency in [*cleanup_identity, *self.nodes.entries, self.nodes, self.table]:
            self.cleanup.resource.node.add_dependency(dependency)
        self.rbac = self._rbac(layers)

        # Interruption events go through a queue the function reads in batches: a wave of spot warnings is a
        # few invocations with one world read each, not one invocation per event (docs/scale.md).
        self.interruption_queue = interruption_queue_for(
            self, cluster, INTERRUPTION.timeout_for(config), self.dead_letter_queue
        )
        self.interruption_mapping = interruption_mapping(self, self.interruption, self.interruption_queue)
        self.rules = interruption_rules(self, cluster, self.interruption_queue, self.dead_letter_queue)
        self.schedules = [
            schedule_rule(self, cluster, PROVISIONER.name, self.provisioner),
            schedule_rule(self, cluster, DISRUPTION.name, self.disruption),
        ]
        # Deleted before the cleanup runs, so no function starts while it drains.
        for trigger in [*self.rules, *self.schedules, self.interruption_mapping]:
            trigger.node.add_dependency(self.cleanup.resource)

        self.alarm_topic = self._alarm_topic()
        self.monitoring = Monitoring(
            self, "Monitoring", config=config, functions=self.functions,
            dead_letter_queue=self.dead_letter_queue, interruption_queue=self.interruption_queue,
            topic=self.alarm_topic,
        )
        acknowledge_findings(self)

    def _allow_disruption_slices(self) -> None:
        """A split disruption pass: the scheduled invocation starts one invocation of itself per slice."""
        name = physical_name(self.config.cluster_name, DISRUPTION.name)
        self.roles[DISRUPTION.name].add_to_policy(policies.self_invoke_statement(self, name))

    def _rbac(self, layers: Layers) -> RbacApplier | None:
        """With applyRbac the stack applies the functions' RBAC. The cleanup drains with it, so it is applied
        before the cleanup resource exists and removed only after the cleanup has run."""
        if not self.config.apply_rbac:
            return None
        rbac = RbacApplier(self, "Rbac", config=self.config, layers=layers)
        self.cleanup.resource.node.add_dependency(rbac.resource)
        return rbac

    def _environment(self) -> dict[str, str]:
        config = self.config
        environment = {
            env.CLUSTER_NAME: config.cluster_name,
            env.TABLE_NAME: self.table.table_name,
            env.NODEPOOL_PARAMETER_PATH: config.nodepool_parameter_path,
            env.NODEPOOL_SOURCES: ",".join(config.nodepool_sources),
            env.NODE_ROLE: self.nodes.linux.role.role_name,
            env.INSTANCE_PROFILE: self.nodes.linux.instance_profile_name,
            # Always written in full, so the deployed gates are plain to read on each function.
            env.FEATURE_GATES: config.feature_gates.to_string(),
        }
        if self.nodes.windows is not None:
            environment[env.WINDOWS_NODE_ROLE] = self.nodes.windows.role.role_name
            environment[env.WINDOWS_INSTANCE_PROFILE] = self.nodes.windows.instance_profile_name
        if config.cluster_limits:
            environment[env.CLUSTER_LIMITS] = json.dumps(config.cluster_limits, sort_keys=True)
        return environment

    def _grant(self, log_groups: dict[str, logs.LogGroup]) -> dict[str, policies.FunctionAccess]:
        config = self.config
        granted = {}
        for name, log_group in log_groups.items():
            access = policies.function_access(
                self,
                name,
                cluster=config.cluster_name,
                parameter_path=config.nodepool_parameter_path,
                node_role_arns=self._node_role_arns(),
                table_arn=self.table.table_arn,
                log_group_arn=log_group.log_group_arn,
                in_vpc=config.in_vpc,
                parameter_key_arns=list(config.nodepool_parameter_keys),
                volume_key_arns=list(dict.fromkeys(policies.kms_key_arn(self, k) for k in config.volume_keys)),
            )
            for statement in access.statements:
                self.roles[name].add_to_policy(statement)
            granted[name] = access
        return granted

    def _node_role_arns(self) -> list[str]:
        """The stack's node role(s), then each role the NodePool files or -c nodeRoles name that is not one of
        them: exactly the roles the launching functions may pass to EC2 and list the instance profiles of."""
        own = [n.role.role_arn for n in self.nodes.identities]
        own_names = {physical_name(self.config.cluster_name, "node"), physical_name(self.config.cluster_name, "windows-node")}
        if self.config.node_role_arn:
            own_names.add(self.config.node_role_arn.rsplit("/", 1)[-1])
        named = [policies.node_role_arn(self, role) for role in self.config.named_node_roles
                 if role.rsplit("/", 1)[-1] not in own_names]
        return own + list(dict.fromkeys(named))

    def _alarm_topic(self) -> sns.ITopic | None:
        config = self.config
        if config.alarm_topic_arn:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", config.alarm_topic_arn)
        if config.alarm_email:
            topic = sns.Topic(
                self,
                "AlarmTopic",
                topic_name=physical_name(config.cluster_name, "alarms", 256),
                enforce_ssl=True,
            )
            topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
            return topic
        return None
