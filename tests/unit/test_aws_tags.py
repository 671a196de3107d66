"""Ownership tags decide what nodescale may change; the clients are built once per process."""

from __future__ import annotations

import dataclasses

from nodescale.aws import clients, launchtemplates
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


def test_resources_carry_the_eks_cluster_name_which_a_node_class_cannot_override():
    """#31.5: restates aws/karpenter-provider-aws pkg/providers/instance (instance.go's tags, checked in
    its suite_test.go "InstanceProvider" tests): eks:eks-cluster-name is the cluster's name, and the node
    class's spec.tags never replace it nor karpenter.sh/nodeclaim (the EC2NodeClass CEL rules on spec.tags
    refuse them at load, config/nodeclasses.py; dropped here as a second guard)."""
    tags = tagging.resource_tags(
        "demo-cluster", "default", "default",
        {tagging.EKS_CLUSTER: "other", tagging.NODECLAIM: "forged", "team": "a"},
    )
    assert tags[tagging.EKS_CLUSTER] == "demo-cluster"
    assert tagging.NODECLAIM not in tags
    assert tags[tagging.NODECLASS] == "default" and tags["team"] == "a"


def test_the_eks_cluster_tag_is_not_drift():
    """#31.5: adding eks:eks-cluster-name in a release leaves the settings hash (drift) of nodes launched
    before it unchanged; the template (its name) still changes, so a new one carries the tag."""
    before = launchtemplates.LaunchTemplateSpec(
        cluster="demo-cluster", image_id="ami-1", user_data="", security_group_ids=("sg-1",), instance_profile="p",
        tags={tagging.CLUSTER: "demo-cluster", tagging.NODEPOOL: "default"},
    )
    after = dataclasses.replace(before, tags={**before.tags, tagging.EKS_CLUSTER: "demo-cluster"})
    assert after.settings_hash == before.settings_hash
    assert after.name != before.name
