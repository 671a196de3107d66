"""AMI resolution: aliases and families through the public SSM parameters, selector terms through
DescribeImages, and each instance type matched to an image of its architecture and accelerator."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.utils import utcnow

from nodescale.aws import ami
from nodescale.model import labels as wk
from nodescale.model import resources as res
from nodescale.model.amifamily import AmiError
from nodescale.model.instancetype import InstanceType, Offering
from nodescale.model.nodepool import NodeClass, SelectorTerm

# moto, sim/, a local server or a subprocess: the adapter suite, not `make test-fast`.
pytestmark = pytest.mark.adapter

REGION = "us-east-1"
V = "1.31"
EKS = f"/aws/service/eks/optimized-ami/{V}"

PARAMS = {
    f"{EKS}/amazon-linux-2/recommended/image_id": "ami-al2-x86",
    f"{EKS}/amazon-linux-2-arm64/recommended/image_id": "ami-al2-arm",
    f"{EKS}/amazon-linux-2-gpu/recommended/image_id": "ami-al2-gpu",
    f"{EKS}/amazon-linux-2/amazon-eks-node-{V}-v20241011/image_id": "ami-al2-x86-old",
    f"{EKS}/amazon-linux-2-arm64/amazon-eks-arm64-node-{V}-v20241011/image_id": "ami-al2-arm-old",
    f"{EKS}/amazon-linux-2023/x86_64/standard/recommended/image_id": "ami-al2023-x86",
    f"{EKS}/amazon-linux-2023/arm64/standard/recommended/image_id": "ami-al2023-arm",
    f"{EKS}/amazon-linux-2023/x86_64/nvidia/recommended/image_id": "ami-al2023-nvidia",
    f"{EKS}/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-{V}-v20241011/image_id": (
        "ami-al2023-x86-old"
    ),
    f"/aws/service/bottlerocket/aws-k8s-{V}/x86_64/latest/image_id": "ami-br-x86",
    f"/aws/service/bottlerocket/aws-k8s-{V}/arm64/latest/image_id": "ami-br-arm",
    f"/aws/service/bottlerocket/aws-k8s-{V}-nvidia/x86_64/latest/image_id": "ami-br-nvidia",
    f"/aws/service/bottlerocket/aws-k8s-{V}/x86_64/1.26.2/image_id": "ami-br-x86-1262",
    f"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-{V}/image_id": "ami-win2019",
    f"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-{V}/image_id": "ami-win2022",
    f"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-{V}/image_id": "ami-win2025",
    f"/aws/service/canonical/ubuntu/eks/22.04/{V}/stable/current/amd64/hvm/ebs-gp2/ami-id": "ami-ubuntu2204-x86",
    f"/aws/service/canonical/ubuntu/eks/20.04/{V}/stable/current/amd64/hvm/ebs-gp2/ami-id": "ami-ubuntu2004-x86",
    f"/aws/service/canonical/ubuntu/eks/20.04/{V}/stable/current/arm64/hvm/ebs-gp2/ami-id": "ami-ubuntu2004-arm",
}


def seed_public_parameters(params: dict[str, str]) -> None:
    """moto (like AWS) refuses writes under /aws through the API: put them in its backend."""
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]
    for name, value in params.items():
        param = Parameter(
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=utcnow(),
            version=1,
            data_type="text",
        )
        dict.__setitem__(backend._parameters, name, [param])


def seed_image(image_id: str, name: str, arch: str, created: datetime, tags: dict[str, str] | None = None) -> None:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami as MotoAmi

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    backend.amis[image_id] = MotoAmi(
        backend,
        image_id,
        name=name,
        architecture=arch,
        creation_date=created,
        owner_id=DEFAULT_ACCOUNT_ID,
        tags=tags or {},
    )
    if tags:
        backend.create_tags([image_id], tags)


@pytest.fixture(scope="module")
def aws():
    with mock_aws():
        seed_public_parameters(PARAMS)
        seed_image("ami-0aaa000000000001", "team-node-2024-01", "x86_64", datetime(2024, 1, 1, tzinfo=UTC), {"team": "a"})
        seed_image("ami-0aaa000000000002", "team-node-2024-06", "x86_64", datetime(2024, 6, 1, tzinfo=UTC), {"team": "a"})
        seed_image("ami-0aaa000000000003", "team-node-arm-2024-03", "arm64", datetime(2024, 3, 1, tzinfo=UTC), {"team": "a"})
        seed_image("ami-0bbb000000000001", "other-node", "x86_64", datetime(2025, 1, 1, tzinfo=UTC), {"team": "b"})
        yield boto3.client("ssm", region_name=REGION), boto3.client("ec2", region_name=REGION)


def it(name: str, arch: str = "amd64", nvidia: int = 0, neuron: int = 0) -> InstanceType:
    capacity = {res.CPU: 4000, res.MEMORY: 16 * 2**30}
    labels = {wk.ARCH: arch, wk.INSTANCE_TYPE: name}
    if nvidia:
        capacity[res.NVIDIA_GPU] = nvidia
        labels[wk.INSTANCE_GPU_COUNT] = str(nvidia)
        labels[wk.INSTANCE_GPU_MANUFACTURER] = "nvidia"
    if neuron:
        capacity[res.NEURON] = neuron
    return InstanceType(name, labels, capacity, {}, (Offering("us-east-1a", "on-demand", 0.1),))


M5, M6G, P3, INF1 = it("m5.large"), it("m6g.large", "arm64"), it("p3.2xlarge", nvidia=1), it("inf1.xlarge", neuron=1)
G5G = it("g5g.xlarge", "arm64", nvidia=1)


def alias_class(alias: str) -> NodeClass:
    return NodeClass("default", None, ami_selector_terms=(SelectorTerm(alias=alias),))


def family_class(family: str) -> NodeClass:
    return NodeClass("default", family, api_version="karpenter.k8s.aws/v1beta1")


def chosen(resolved: ami.ResolvedAmis, *types: InstanceType) -> list[str | None]:
    out = []
    for t in types:
        a = resolved.for_instance_type(t)
        out.append(a.image_id if a else None)
    return out


def test_al2_alias_latest_maps_each_architecture_and_gpu_to_its_image(aws):
    ssm, ec2 = aws
    resolved = ami.resolve(alias_class("al2@latest"), ssm, ec2, V)
    assert resolved.family == "AL2"
    assert chosen(resolved, M5, M6G, P3, INF1, G5G) == ["ami-al2-x86", "ami-al2-arm", "ami-al2-gpu", "ami-al2-gpu", None]


def test_al2023_family_uses_nvidia_variant_for_gpus_and_standard_otherwise(aws):
    ssm, ec2 = aws
    resolved = ami.resolve(family_class("AL2023"), ssm, ec2, V)
    assert chosen(resolved, M5, M6G, P3) == ["ami-al2023-x86", "ami-al2023-arm", "ami-al2023-nvidia"]
    # No arm64 NVIDIA or neuron image is published here: those types get no image rather than a wrong one.
    assert chosen(resolved, G5G, INF1) == [None, None]


def test_bottlerocket_latest_and_pinned_release(aws):
    ssm, ec2 = aws
    latest = ami.resolve(alias_class("bottlerocket@latest"), ssm, ec2, V)
    assert chosen(latest, M5, M6G, P3) == ["ami-br-x86", "ami-br-arm", "ami-br-nvidia"]
    pinned = ami.resolve(alias_class("bottlerocket@v1.26.2"), ssm, ec2, V)
    assert chosen(pinned, M5) == ["ami-br-x86-1262"]
    assert chosen(pinned, M6G) == [None]


def test_pinned_al2_and_al2023_releases_resolve_to_versioned_parameters(aws):
    ssm, ec2 = aws
    al2 = ami.resolve(alias_class("al2@v20241011"), ssm, ec2, V)
    assert chosen(al2, M5, M6G) == ["ami-al2-x86-old", "ami-al2-arm-old"]
    al2023 = ami.resolve(alias_class("al2023@v20241011"), ssm, ec2, V)
    assert chosen(al2023, M5) == ["ami-al2023-x86-old"]


@pytest.mark.parametrize(("how", "family", "image"), [
    ("windows2019@latest", "Windows2019", "ami-win2019"),
    ("windows2022@latest", "Windows2022", "ami-win2022"),
    ("Windows2022", "Windows2022", "ami-win2022"),
    ("windows2025@latest", "Windows2025", "ami-win2025"),
])
def test_windows_images(aws, how, family, image):
    ssm, ec2 = aws
    node_class = alias_class(how) if "@" in how else family_class(how)
    resolved = ami.resolve(node_class, ssm, ec2, V)
    assert resolved.family == family
    assert chosen(resolved, M5, M6G) == [image, None]


def test_default_family_without_selectors_is_al2(aws):
    ssm, ec2 = aws
    resolved = ami.resolve(NodeClass("legacy", None), ssm, ec2, V)
    assert resolved.family == "AL2"
    assert "ami-al2-x86" in resolved.image_ids


def test_unknown_release_names_the_missing_parameter(aws):
    ssm, ec2 = aws
    with pytest.raises(AmiError, match="amazon-eks-node-1.31-v19990101"):
        ami.resolve(alias_class("al2@v19990101"), ssm, ec2, V)
    with pytest.raises(AmiError, match="Kubernetes 1.99"):
        ami.resolve(alias_class("al2023@latest"), ssm, ec2, "1.99")


def test_bad_aliases_are_refused_with_the_allowed_values(aws):
    ssm, ec2 = aws
    with pytest.raises(AmiError, match="allowed are al2, al2023, bottlerocket"):
        ami.resolve(alias_class("ubuntu@latest"), ssm, ec2, V)
    with pytest.raises(AmiError, match="only be selected @latest"):
        ami.resolve(alias_class("windows2022@2024.11.13"), ssm, ec2, V)
    with pytest.raises(AmiError, match="amiFamily: 'Flatcar' is not allowed"):
        ami.resolve(family_class("Flatcar"), ssm, ec2, V)


def test_selector_by_tags_picks_the_newest_image_per_architecture(aws):
    ssm, ec2 = aws
    node_class = NodeClass("team", "AL2", ami_selector_terms=(SelectorTerm(tags={"team": "a"}),))
    resolved = ami.resolve(node_class, ssm, ec2, V)
    assert resolved.family == "AL2"
    assert chosen(resolved, M5, M6G) == ["ami-0aaa000000000002", "ami-0aaa000000000003"]
    # A user-selected image serves every type of its architecture, GPU or not.
    assert chosen(resolved, P3) == ["ami-0aaa000000000002"]


def test_selector_by_id_name_and_owner(aws):
    ssm, ec2 = aws
    by_id = ami.resolve(
        NodeClass("pinned", "AL2", ami_selector_terms=(SelectorTerm(id="ami-0aaa000000000001"),)), ssm, ec2, V
    )
    assert by_id.image_ids == {"ami-0aaa000000000001"}
    by_name = ami.resolve(
        NodeClass("n", "AL2023", ami_selector_terms=(SelectorTerm(name="other-*", owner=DEFAULT_ACCOUNT_ID),)),
        ssm, ec2, V,
    )
    assert by_name.image_ids == {"ami-0bbb000000000001"}
    # Terms are ORed: either tag set selects.
    both = ami.resolve(
        NodeClass("n", "AL2", ami_selector_terms=(SelectorTerm(tags={"team": "b"}), SelectorTerm(tags={"team": "a"}))),
        ssm, ec2, V,
    )
    assert chosen(both, M5, M6G) == ["ami-0bbb000000000001", "ami-0aaa000000000003"]


def test_selector_matching_nothing_is_a_clear_error(aws):
    ssm, ec2 = aws
    node_class = NodeClass("x", "AL2", ami_selector_terms=(SelectorTerm(tags={"team": "nobody"}),), source="ssm:/p#0")
    with pytest.raises(AmiError, match=r"ssm:/p#0: amiSelectorTerms: no available"):
        ami.resolve(node_class, ssm, ec2, V)


def test_custom_family_requires_selector_terms(aws):
    ssm, ec2 = aws
    with pytest.raises(AmiError, match="Custom needs amiSelectorTerms"):
        ami.resolve(family_class("Custom"), ssm, ec2, V)


def test_group_puts_each_type_under_its_image_and_drops_unmatched(aws):
    ssm, ec2 = aws
    resolved = ami.resolve(alias_class("al2023@latest"), ssm, ec2, V)
    groups = resolved.group([M5, M6G, P3, G5G, it("c5.large")])
    assert {a.image_id: [t.name for t in ts] for a, ts in groups.items()} == {
        "ami-al2023-x86": ["m5.large", "c5.large"],
        "ami-al2023-arm": ["m6g.large"],
        "ami-al2023-nvidia": ["p3.2xlarge"],
    }


def test_ubuntu_prefers_the_newer_release_per_architecture(aws):
    ssm, ec2 = aws
    resolved = ami.resolve(family_class("Ubuntu"), ssm, ec2, V)
    assert chosen(resolved, M5, M6G) == ["ami-ubuntu2204-x86", "ami-ubuntu2004-arm"]
