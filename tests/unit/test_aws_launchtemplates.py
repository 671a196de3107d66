"""Launch templates: one per distinct configuration, found again by hash, cleaned up by tag only."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from nodescale.aws import launchtemplates as lts
from nodescale.aws import tags as tagging
from nodescale.model import blockdevices
from nodescale.model.nodepool import NodeClass

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

REGION = "us-east-1"


@pytest.fixture(scope="module")
def ec2():
    # One moto for the module (EC2's backend takes a second to build); tests use distinct clusters.
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION)


def spec(**changes) -> lts.LaunchTemplateSpec:
    cluster = changes.get("cluster", "demo-cluster")
    base = dict(
        cluster=cluster,
        image_id="ami-0123456789abcdef0",
        user_data="#!/bin/bash\necho join\n",
        security_group_ids=("sg-2", "sg-1"),
        instance_profile="KarpenterNodeInstanceProfile-demo-cluster",
        metadata_options={"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
        block_device_mappings=tuple(blockdevices.default_block_devices("AL2023")),
        tags=tagging.resource_tags(cluster, "default", "default", {"team": "platform"}),
    )
    base.update(changes)
    return lts.LaunchTemplateSpec(**base)


def test_same_configuration_same_name_and_any_node_change_a_new_one():
    first = spec()
    assert first.name == spec().name
    assert first.name.startswith("nodescale/demo-cluster/")
    # Security group order is not a configuration change.
    assert spec(security_group_ids=("sg-1", "sg-2")).name == first.name
    for change in (
        {"image_id": "ami-0fffffffffffffff0"},
        {"user_data": "#!/bin/bash\necho other\n"},
        {"security_group_ids": ("sg-1",)},
        {"instance_profile": "other"},
        {"metadata_options": {"HttpTokens": "optional"}},
        {"block_device_mappings": tuple(blockdevices.default_block_devices("Bottlerocket"))},
        {"tags": {"team": "other"}},
        {"detailed_monitoring": True},
        {"associate_public_ip": False},
    ):
        assert spec(**change).name != first.name, change


def test_ensure_creates_once_then_reuses(ec2):
    first = lts.ensure(ec2, spec(cluster="reuse"))
    again = lts.ensure(ec2, spec(cluster="reuse"))
    assert first.created and not again.created
    assert again.id == first.id
    assert len(lts.list_managed(ec2, "reuse")) == 1
    described = ec2.describe_launch_templates(LaunchTemplateIds=[first.id])["LaunchTemplates"][0]
    assert tagging.is_managed(described["Tags"], "reuse")
    data = ec2.describe_launch_template_versions(LaunchTemplateId=first.id)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"
    ]
    assert data["ImageId"] == "ami-0123456789abcdef0"
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\necho join\n"
    assert data["IamInstanceProfile"] == {"Name": "KarpenterNodeInstanceProfile-demo-cluster"}
    assert sorted(data["SecurityGroupIds"]) == ["sg-1", "sg-2"]
    instance_tags = {t["Key"]: t["Value"] for t in data["TagSpecifications"][0]["Tags"]}
    assert instance_tags["nodescale.io/cluster"] == "reuse" and instance_tags["team"] == "platform"


def test_ensure_reuses_a_template_a_concurrent_run_created(ec2):
    s = spec(cluster="race")
    ec2.create_launch_template(
        LaunchTemplateName=s.name,
        LaunchTemplateData=s.data(),
        TagSpecifications=tagging.specifications(("launch-template",), tagging.ownership("race")),
    )
    ref = lts.ensure(ec2, s)
    assert not ref.created and ref.name == s.name


def test_cleanup_deletes_only_unused_old_templates_of_this_cluster(ec2):
    used = lts.ensure(ec2, spec())
    unused = lts.ensure(ec2, spec(image_id="ami-0fffffffffffffff0"))
    other_cluster = lts.ensure(ec2, spec(cluster="other-cluster"))
    ec2.create_launch_template(LaunchTemplateName="nodescale/demo-cluster/untagged", LaunchTemplateData={})
    ec2.create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/123",
        LaunchTemplateData={},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": "karpenter.sh/nodepool", "Value": "x"}]}],
    )
    later = datetime.now(UTC) + timedelta(hours=1)
    # Young templates are spared: another function may be launching with one right now.
    assert lts.cleanup_unused(ec2, "demo-cluster", [used.name]) == []
    assert lts.cleanup_unused(ec2, "demo-cluster", [used.name], now=later) == [unused.name]
    left = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert unused.name not in left
    assert {used.name, other_cluster.name, "nodescale/demo-cluster/untagged", "karpenter.k8s.aws/123"} <= left


def test_node_class_metadata_and_block_devices_become_ec2_shapes():
    node_class = NodeClass(
        "pinned",
        "AL2",
        metadata_options={"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2, "httpTokens": "required"},
        block_device_mappings=(
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True}},
        ),
        api_version="karpenter.k8s.aws/v1alpha1",
    )
    assert lts.metadata_options(node_class) == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 2,
        "HttpTokens": "required",
    }
    assert blockdevices.block_device_mappings(node_class, "AL2") == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"DeleteOnTermination": True, "VolumeSize": 100, "VolumeType": "gp3", "Encrypted": True},
        }
    ]
    assert lts.metadata_options(NodeClass("v1", "AL2023"))["HttpPutResponseHopLimit"] == 1


def test_bad_node_class_fields_are_named():
    with pytest.raises(lts.LaunchTemplateError, match="metadataOptions.httpFoo is not known"):
        lts.metadata_options(NodeClass("x", "AL2", metadata_options={"httpFoo": "1"}))
    with pytest.raises(blockdevices.BlockDeviceError, match=r"blockDeviceMappings\[0\].ebs.volumeSize"):
        blockdevices.block_device_mappings(
            NodeClass("x", "AL2", block_device_mappings=({"deviceName": "/dev/xvda", "ebs": {"volumeSize": "big"}},)),
            "AL2",
        )


def test_public_ip_choice_moves_security_groups_onto_the_interface():
    data = spec(associate_public_ip=False).data()
    assert "SecurityGroupIds" not in data
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-1", "sg-2"]}]


def test_a_newer_nodescale_gives_the_same_launch_configuration(monkeypatch):
    # Redeploying nodescale must not drift running nodes: the launch configuration (and so the template
    # name and the config hash drift compares) depends on the NodePool, node class and AMI only.
    from pathlib import Path

    import nodescale
    from nodescale.aws import userdata
    from nodescale.aws.cluster import ClusterInfo
    from nodescale.config.documents import parse_documents
    from nodescale.config.loader import load

    example = Path(__file__).parents[1] / "fixtures" / "examples" / "karpenter-v1" / "default.yaml"
    cluster = ClusterInfo("demo-cluster", "1.31", "https://example.eks.amazonaws.com", "Q0E=", "10.100.0.0/16")

    def configuration() -> tuple[str, str]:
        config = load(parse_documents(example.read_text(), str(example)))
        pool, node_class = config.nodepools["default"], config.nodeclasses["default"]
        data = userdata.render("AL2023", cluster, userdata.bootstrap_for(pool, node_class), node_class.user_data)
        built = spec(user_data=data, metadata_options=lts.metadata_options(node_class),
                     tags=tagging.resource_tags("demo-cluster", pool.name, node_class.name, node_class.tags))
        return built.name, built.settings_hash

    before = configuration()
    monkeypatch.setattr(nodescale, "__version__", "99.0.0")
    assert configuration() == before


def _tag_specs(data: dict) -> dict[str, dict[str, str]]:
    return {t["ResourceType"]: {x["Key"]: x["Value"] for x in t["Tags"]} for t in data["TagSpecifications"]}


def test_a_launch_tags_its_network_interfaces_and_never_spot_requests():
    # The launch policy requires the ownership tag on every instance, volume and network interface a
    # launch creates; a spot-instances-request tag would fail every on-demand launch from the template.
    specs = _tag_specs(spec().data())
    assert set(specs) == {"instance", "volume", "network-interface"}
    for resource_type, tags in specs.items():
        assert tags[tagging.CLUSTER] == "demo-cluster", resource_type
        assert tags[tagging.NODEPOOL] == "default", resource_type


def test_a_template_of_the_previous_release_is_replaced_without_drifting_nodes(ec2):
    # Made by a release that tagged instances and volumes only, under the name that release gave it (the
    # hash of the node's data, tag specifications left out): its launches would be denied by the policy.
    new = spec(cluster="upgrade")
    old_data = new._node_data()
    old_tags = {**old_data.pop("Tags"), tagging.CONFIG_HASH: new.settings_hash}
    canonical = json.dumps(new._node_data(), sort_keys=True, separators=(",", ":"), default=str)
    old_name = f"nodescale/upgrade/{hashlib.sha256(canonical.encode()).hexdigest()[:20]}"
    ec2.create_launch_template(
        LaunchTemplateName=old_name,
        LaunchTemplateData={**old_data, "TagSpecifications": tagging.specifications(("instance", "volume"), old_tags)},
        TagSpecifications=tagging.specifications(("launch-template",), tagging.ownership("upgrade")),
    )
    ref = lts.ensure(ec2, new)
    assert ref.created and ref.name != old_name
    data = ec2.describe_launch_template_versions(LaunchTemplateId=ref.id)["LaunchTemplateVersions"][0][
        "LaunchTemplateData"
    ]
    assert _tag_specs(data)["network-interface"][tagging.CLUSTER] == "upgrade"
    # Nodes launched from the old template carry the same configuration hash: the upgrade drifts none.
    assert _tag_specs(data)["instance"][tagging.CONFIG_HASH] == old_tags[tagging.CONFIG_HASH]
    # The old template is this cluster's and unused now: the clean-up removes it once it is old enough.
    later = datetime.now(UTC) + timedelta(hours=1)
    assert lts.cleanup_unused(ec2, "upgrade", [ref.name], now=later) == [old_name]
