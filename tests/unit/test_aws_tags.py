"""Ownership tags decide what nodescale may change; the clients are built once per process."""

from __future__ import annotations

from nodescale.aws import clients
from nodescale.aws import tags as tagging


def test_ownership_requires_this_exact_cluster():
    ours = tagging.to_list(tagging.resource_tags("demo-cluster", "default"))
    assert tagging.is_managed(ours, "demo-cluster")
    assert not tagging.is_managed(ours, "demo")
    assert not tagging.is_managed([{"Key": "karpenter.sh/nodepool", "Value": "default"}], "demo-cluster")
    assert not tagging.is_managed(None, "demo-cluster")
    assert not tagging.is_managed({tagging.CLUSTER: ""}, "")


def test_node_class_tags_cannot_override_ownership_but_may_name_the_instance():
    tags = tagging.resource_tags(
        "demo-cluster", "default", "default",
        {tagging.CLUSTER: "other", tagging.NODEPOOL: "x", "Name": "web", "team": "a"},
    )
    assert tags[tagging.CLUSTER] == "demo-cluster" and tags[tagging.NODEPOOL] == "default"
    assert tags["Name"] == "web" and tags["team"] == "a"
    assert tagging.resource_tags("demo-cluster", "default")["Name"] == "nodescale/demo-cluster/default"


def test_cluster_filters_select_by_tag():
    assert tagging.cluster_filters("demo-cluster", "gpu") == [
        {"Name": "tag:nodescale.io/cluster", "Values": ["demo-cluster"]},
        {"Name": "tag:karpenter.sh/nodepool", "Values": ["gpu"]},
    ]


def test_clients_are_built_once_with_adaptive_retries_and_honour_the_endpoint(monkeypatch):
    clients.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    try:
        ec2 = clients.client("ec2", "us-east-1")
        assert clients.client("ec2", "us-east-1") is ec2
        assert clients.client("ec2", "eu-west-1") is not ec2
        assert ec2.meta.endpoint_url == "http://127.0.0.1:1"
        assert ec2.meta.config.retries["mode"] == "adaptive"
        assert ec2.meta.config.retries["total_max_attempts"] == clients.MAX_ATTEMPTS
        assert ec2.meta.config.connect_timeout == clients.CONNECT_TIMEOUT_SECONDS
        bundle = clients.AwsClients.for_region("us-east-1")
        assert bundle.ec2 is ec2 and bundle.ssm.meta.service_model.service_name == "ssm"
    finally:
        clients.reset()
