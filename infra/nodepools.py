"""NodePool files given at deploy time, each written to one SSM parameter under the cluster's path."""

from __future__ import annotations

from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.config import StackConfig

_STANDARD_TIER_LIMIT = 4096


def nodepool_parameters(scope: Construct, config: StackConfig) -> list[ssm.StringParameter]:
    """`/nodescale/<cluster>/nodepools/<file name without extension>` holding the file's text (all its documents)."""
    parameters = []
    for nodepool_file in config.nodepool_files:
        large = len(nodepool_file.text.encode()) > _STANDARD_TIER_LIMIT
        parameters.append(
            ssm.StringParameter(
                scope,
                f"NodePoolFile-{nodepool_file.parameter_name}",
                parameter_name=f"{config.nodepool_parameter_path}{nodepool_file.parameter_name}",
                string_value=nodepool_file.text,
                description=f"nodescale NodePool file {nodepool_file.path.name}",
                tier=ssm.ParameterTier.ADVANCED if large else ssm.ParameterTier.STANDARD,
            )
        )
    return parameters
