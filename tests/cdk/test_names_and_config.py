"""Two clusters side by side, and deploy-time options that are wrong get a clear message."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config import ConfigError, StackConfig
from infra.names import physical_name, stack_name
from tests.cdk.conftest import FIXTURES, Synths

NAME_PROPERTIES = ("FunctionName", "RoleName", "TableName", "QueueName", "Name", "AlarmName", "DashboardName",
                   "InstanceProfileName", "LogGroupName", "TopicName")


def _physical_names(template: dict) -> set[str]:
    names = set()
    for resource in template["Resources"].values():
        for key in NAME_PROPERTIES:
            value = resource.get("Properties", {}).get(key)
            if isinstance(value, str):
                names.add(value)
    return names


def test_two_clusters_share_no_physical_name(synths: Synths) -> None:
    first, second = synths("default"), synths("second")
    assert first.stack.stack_name == "nodescale-demo-cluster"
    assert second.stack.stack_name == "nodescale-other-cluster"
    a, b = _physical_names(first.json), _physical_names(second.json)
    assert len(a) > 15
    assert a.isdisjoint(b)


def test_long_and_underscored_cluster_names_stay_valid_and_distinct() -> None:
    long_a, long_b = "a" * 90 + "x", "a" * 90 + "y"
    assert len(physical_name(long_a, "provisioner")) <= 64
    assert physical_name(long_a, "provisioner") != physical_name(long_b, "provisioner")
    assert stack_name("my_cluster") != stack_name("my-cluster")
    assert "_" not in stack_name("my_cluster")


def _config(**context: object) -> StackConfig:
    return StackConfig.from_context(context.get, base_dir=FIXTURES)


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({}, "clusterName is not set"),
        ({"clusterName": "bad name"}, "clusterName='bad name'"),
        ({"clusterName": "c", "nodePoolSources": "ssm,crd"}, "nodePoolSources"),
        ({"clusterName": "c", "nodePoolFiles": "missing.yaml"}, "missing.yaml does not exist"),
        ({"clusterName": "c", "clusterLimits": "{cpu: 1}"}, "clusterLimits is not JSON"),
        ({"clusterName": "c", "clusterLimits": '{"gpu": "1"}'}, "unknown keys ['gpu']"),
        ({"clusterName": "c", "vpcSubnetIds": "subnet-0123456789abcdef0"}, "go together"),
        ({"clusterName": "c", "instanceProfileName": "p"}, "without nodeRoleArn"),
        ({"clusterName": "c", "pricePerHourAlarm": "lots"}, "pricePerHourAlarm='lots'"),
        ({"clusterName": "c", "retainNodesOnDestroy": "maybe"}, "retainNodesOnDestroy"),
        ({"clusterName": "c", "logRetentionDays": "10"}, "logRetentionDays=10"),
    ],
)
def test_bad_context_is_named(context: dict, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _config(**context)
    assert message in str(error.value)


def test_a_nodepool_file_must_hold_nodepool_kinds(tmp_path: Path) -> None:
    (tmp_path / "deploy.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\n")
    with pytest.raises(ConfigError, match="document 0 has kind 'Deployment'"):
        StackConfig.from_context({"clusterName": "c", "nodePoolFiles": "deploy.yaml"}.get, base_dir=tmp_path)


def test_windows_nodepool_file_asks_for_windows_nodes() -> None:
    assert _config(clusterName="c", nodePoolFiles="windows.yaml").windows_nodes
    assert not _config(clusterName="c", nodePoolFiles="default.yaml").windows_nodes
    assert _config(clusterName="c", windows="true").windows_nodes
