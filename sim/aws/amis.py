"""The public EKS node images and the SSM parameters that point at them, as a real account sees them.

moto knows neither the EKS-optimized AMIs nor the `/aws/service/...` parameters, and its API refuses
to create parameters under `/aws`. The moto child process (`sim.aws.moto_main`) therefore loads this
catalog into moto's backends directly, so that it survives `/moto-api/reset` like moto's own defaults.
Image ids are derived from the image name, so they are the same in every environment and test run.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

# Kubernetes versions for which images and parameters exist (EKS supports a window of versions).
KUBERNETES_VERSIONS = ("1.29", "1.30", "1.31", "1.32")
DEFAULT_KUBERNETES_VERSION = "1.31"

# Owner accounts of the public images (the EKS team, Bottlerocket, Amazon's Windows images).
EKS_OWNER = "602401143452"
BOTTLEROCKET_OWNER = "092701018921"
WINDOWS_OWNER = "801119661308"

RELEASE = "v20241109"
OLDER_RELEASE = "v20241011"
BOTTLEROCKET_RELEASE = "v1.26.2-360b7a38"
WINDOWS_RELEASE = "2024.11.13"

# The AMI pinned by examples/karpenter-v1alpha5/node-template-options.yaml: an older AL2 x86_64 build.
PINNED_AMI_ID = "ami-08f2bf224b42c81da"

WINDOWS_BUILDS = {"2019": "10.0.17763", "2022": "10.0.20348"}


@dataclass(frozen=True)
class Image:
    """One public node image and the SSM parameters that resolve to it."""

    image_id: str
    name: str
    architecture: str  # EC2 spelling: x86_64 | arm64
    owner_id: str
    family: str  # AL2 | AL2023 | Bottlerocket | Windows2019 | Windows2022
    kubernetes_version: str
    creation_date: str
    description: str
    platform: str | None = None  # "windows" for Windows images, as EC2 reports it
    parameters: dict[str, str] = field(default_factory=dict)  # name -> value

    def moto_ami(self) -> dict[str, Any]:
        """The image in the shape moto's MOTO_AMIS_PATH file uses."""
        ami: dict[str, Any] = {
            "ami_id": self.image_id,
            "state": "available",
            "public": True,
            "owner_id": self.owner_id,
            "image_location": f"amazon/{self.name}",
            "sriov": "simple",
            "root_device_type": "ebs",
            "root_device_name": "/dev/xvda" if self.platform is None else "/dev/sda1",
            "description": self.description,
            "image_type": "machine",
            "architecture": self.architecture,
            "name": self.name,
            "virtualization_type": "hvm",
            "hypervisor": "xen",
            "creation_date": self.creation_date,
            "boot_mode": "uefi-preferred" if self.architecture == "x86_64" else "uefi",
        }
        if self.platform:
            ami["platform"] = self.platform
        return ami


def image_id_for(name: str) -> str:
    """A stable, realistic-looking image id (17 hex digits) for an image name."""
    return "ami-0" + hashlib.sha256(name.encode()).hexdigest()[:16]


def _eks_linux(
    version: str, family: str, variant: str, arch: str, name: str, ssm_dir: str, release: str = RELEASE
) -> Image:
    image_id = image_id_for(name)
    recommended = f"/aws/service/eks/optimized-ami/{version}/{ssm_dir}/recommended"
    day = release.lstrip("v")
    release_version = f"{version}.7-{day}"
    return Image(
        image_id=image_id,
        name=name,
        architecture=arch,
        owner_id=EKS_OWNER,
        family=family,
        kubernetes_version=version,
        creation_date=f"{day[:4]}-{day[4:6]}-{day[6:8]}T04:12:33.000Z",
        description=f"EKS-optimized Kubernetes node based on {family} ({variant}, k8s: {version}, {release})",
        parameters={
            f"{recommended}/image_id": image_id,
            f"{recommended}/image_name": name,
            f"{recommended}/release_version": release_version,
            recommended: json.dumps({"image_id": image_id, "image_name": name, "release_version": release_version}),
            f"/aws/service/eks/optimized-ami/{version}/{ssm_dir}/{name}/image_id": image_id,
        },
    )


def _eks_images(version: str, release: str) -> list[Image]:
    v, r = version, release
    return [
        _eks_linux(v, "AL2", "x86_64", "x86_64", f"amazon-eks-node-{v}-{r}", "amazon-linux-2", r),
        _eks_linux(v, "AL2", "arm64", "arm64", f"amazon-eks-arm64-node-{v}-{r}", "amazon-linux-2-arm64", r),
        _eks_linux(v, "AL2", "gpu", "x86_64", f"amazon-eks-gpu-node-{v}-{r}", "amazon-linux-2-gpu", r),
        _eks_linux(
            v, "AL2023", "standard", "x86_64",
            f"amazon-eks-node-al2023-x86_64-standard-{v}-{r}", "amazon-linux-2023/x86_64/standard", r,
        ),
        _eks_linux(
            v, "AL2023", "standard", "arm64",
            f"amazon-eks-node-al2023-arm64-standard-{v}-{r}", "amazon-linux-2023/arm64/standard", r,
        ),
        _eks_linux(
            v, "AL2023", "nvidia", "x86_64",
            f"amazon-eks-node-al2023-x86_64-nvidia-{v}-{r}", "amazon-linux-2023/x86_64/nvidia", r,
        ),
    ]


def eks_release(version: str, release: str) -> list[Image]:
    """A later EKS AMI release (AL2 and AL2023 variants) for `version`, e.g. ("1.31", "v20241201"):
    new image ids under the same `recommended` parameter names. Publishing it (Environment.
    publish_release) is what a real AMI release looks like to drift detection."""
    if version not in KUBERNETES_VERSIONS:
        raise ValueError(f"kubernetes version {version!r}: allowed are {KUBERNETES_VERSIONS}")
    if not re.fullmatch(r"v\d{8}", release):
        raise ValueError(f"release {release!r}: expected v followed by a date, e.g. 'v20241201'")
    return _eks_images(version, release)


def _bottlerocket(version: str, arch: str) -> Image:
    name = f"bottlerocket-aws-k8s-{version}-{arch}-{BOTTLEROCKET_RELEASE}"
    image_id = image_id_for(name)
    base = f"/aws/service/bottlerocket/aws-k8s-{version}/{arch}"
    return Image(
        image_id=image_id,
        name=name,
        architecture=arch,
        owner_id=BOTTLEROCKET_OWNER,
        family="Bottlerocket",
        kubernetes_version=version,
        creation_date="2024-11-07T19:40:02.000Z",
        description=f"bottlerocket-aws-k8s-{version}-{arch}-{BOTTLEROCKET_RELEASE}",
        parameters={
            f"{base}/latest/image_id": image_id,
            f"{base}/latest/image_version": BOTTLEROCKET_RELEASE.split("-")[0].lstrip("v"),
            f"{base}/{BOTTLEROCKET_RELEASE.split('-')[0].lstrip('v')}/image_id": image_id,
        },
    )


def _windows(version: str, year: str) -> Image:
    stem = f"Windows_Server-{year}-English-Core-EKS_Optimized-{version}"
    name = f"{stem}-{WINDOWS_RELEASE}"
    image_id = image_id_for(name)
    base = f"/aws/service/ami-windows-latest/{stem}"
    return Image(
        image_id=image_id,
        name=name,
        architecture="x86_64",
        owner_id=WINDOWS_OWNER,
        family=f"Windows{year}",
        kubernetes_version=version,
        creation_date="2024-11-13T08:21:45.000Z",
        description=f"Microsoft Windows Server {year} Core optimized for EKS and Kubernetes {version}",
        platform="windows",
        parameters={
            f"{base}/image_id": image_id,
            base: json.dumps({"image_id": image_id, "image_name": name}),
        },
    )


def catalog(versions: tuple[str, ...] = KUBERNETES_VERSIONS) -> list[Image]:
    """Every seeded public image: per version AL2 (x86, arm64, GPU), AL2023 (x86, arm64, NVIDIA),
    Bottlerocket (x86, arm64), Windows Server 2019 and 2022 Core; plus the pinned example AMI."""
    images: list[Image] = []
    for v in versions:
        images += _eks_images(v, RELEASE)
        images += [
            _bottlerocket(v, "x86_64"),
            _bottlerocket(v, "arm64"),
            _windows(v, "2019"),
            _windows(v, "2022"),
        ]
    pinned_name = f"amazon-eks-node-1.31-{OLDER_RELEASE}"
    images.append(
        Image(
            image_id=PINNED_AMI_ID,
            name=pinned_name,
            architecture="x86_64",
            owner_id=EKS_OWNER,
            family="AL2",
            kubernetes_version="1.31",
            creation_date="2024-10-11T02:03:17.000Z",
            description=f"EKS-optimized Kubernetes node based on AL2 (x86_64, k8s: 1.31, {OLDER_RELEASE})",
            parameters={
                f"/aws/service/eks/optimized-ami/1.31/amazon-linux-2/{pinned_name}/image_id": PINNED_AMI_ID,
            },
        )
    )
    return images


def public_parameters(images: list[Image]) -> dict[str, str]:
    """All `/aws/service/...` parameters of the catalog, name -> value."""
    params: dict[str, str] = {}
    for image in images:
        params.update(image.parameters)
    return params


def windows_build(image_name: str) -> str | None:
    """The Windows build a node from this image reports (node.kubernetes.io/windows-build)."""
    for year, build in WINDOWS_BUILDS.items():
        if f"Windows_Server-{year}-" in image_name:
            return build
    return None
