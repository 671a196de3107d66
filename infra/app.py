"""Builds the CDK app the same way for `cdk synth`, `cdk deploy` and the tests."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import StackConfig
from infra.stack import NodescaleStack


def build(app: App, env: Environment | None = None, base_dir: Path | None = None) -> NodescaleStack:
    """The stack for the cluster named in the app's context, with cdk-nag's AwsSolutions checks registered.

    Without `env` the template is environment-agnostic: partition, region and account are resolved by
    CloudFormation at deploy time, which is what lets one template serve aws, aws-cn and aws-us-gov.
    """
    config = StackConfig.from_context(app.node.try_get_context, base_dir=base_dir)
    stack = NodescaleStack(app, config.stack_name, config=config, env=env)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return stack
