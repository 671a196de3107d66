"""AMI resolution: aliases and AMI families through the public SSM parameters, selector terms
through DescribeImages, and each instance type matched to an image of its architecture and
accelerator.

The public parameter layout (per Kubernetes version ``<v>``):

- AL2: ``/aws/service/eks/optimized-ami/<v>/amazon-linux-2{,-arm64,-gpu}/recommended/image_id``;
  a release ``vYYYYMMDD`` is ``.../amazon-linux-2{...}/amazon-eks{,-arm64,-gpu}-node-<v>-<release>/image_id``.
- AL2023: ``/aws/service/eks/optimized-ami/<v>/amazon-linux-2023/<arch>/<variant>/recommended/image_id``
  (variant standard, nvidia, neuron); a release is
  ``.../<arch>/<variant>/amazon-eks-node-al2023-<arch>-<variant>-<v>-<release>/image_id``.
- Bottlerocket: ``/aws/service/bottlerocket/aws-k8s-<v>{,-nvidia}/<arch>/{latest|<x.y.z>}/image_id``.
- Windows: ``/aws/service/ami-windows-latest/Windows_Server-<year>-English-Core-EKS_Optimized-<v>/image_id``
  (only the latest image is published under a parameter).
- Ubuntu (Canonical's EKS images, v1beta1 and older only):
  ``/aws/service/canonical/ubuntu/eks/<22.04|20.04>/<v>/stable/current/<amd64|arm64>/hvm/ebs-gp2/ami-id``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import labels as wk
from ..model import resources as res
from ..model.amifamily import AmiError, family_of, parse_alias, where_of
from ..model.instancetype import InstanceType
from ..model.nodepool import WINDOWS_FAMILIES, NodeClass, SelectorTerm
from ..model.requirements import Requirement, Requirements
from .selectors import tag_filters

NVIDIA = "nvidia"
NEURON = "neuron"
AMD = "amd"
NONE = ""  # no accelerator

_EC2_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
_SSM_BATCH = 10  # GetParameters' limit


@dataclass(frozen=True, slots=True)
class Ami:
    image_id: str
    architecture: str  # Kubernetes spelling: amd64 | arm64
    family: str
    # Accelerators the image drives ("" = none). None: any instance type of its architecture, for
    # images the user selected, whose drivers nodescale cannot know.
    accelerators: frozenset[str] | None = None
    name: str = ""
    creation_date: str = ""
    source: str = ""  # the SSM parameter or selector term it came from, for messages

    def accepts(self, instance_type: InstanceType) -> bool:
        if instance_type.labels.get(wk.ARCH) != self.architecture:
            return False
        return self.accelerators is None or accelerator_of(instance_type) in self.accelerators

    @property
    def requirements(self) -> Requirements:
        reqs = [Requirement.exactly(wk.ARCH, self.architecture)]
        if self.accelerators is not None and self.accelerators == frozenset({NONE}):
            reqs.append(Requirement.exactly(wk.INSTANCE_GPU_COUNT))  # DoesNotExist
        elif self.accelerators is not None and NVIDIA in self.accelerators:
            reqs.append(Requirement.exactly(wk.INSTANCE_GPU_MANUFACTURER, NVIDIA))
        return Requirements(reqs)


@dataclass(frozen=True, slots=True)
class ResolvedAmis:
    """The images one node class launches, and which instance type gets which."""

    family: str
    amis: tuple[Ami, ...]

    @property
    def image_ids(self) -> frozenset[str]:
        return frozenset(a.image_id for a in self.amis)

    def for_instance_type(self, instance_type: InstanceType) -> Ami | None:
        """The most specific image for it: one built for its accelerator before a general one, then newest."""
        best = None
        for ami in self.amis:
            if not ami.accepts(instance_type):
                continue
            rank = (ami.accelerators is not None, ami.creation_date)
            if best is None or rank > best[0]:
                best = (rank, ami)
        return None if best is None else best[1]

    def group(self, instance_types: Iterable[InstanceType]) -> dict[Ami, list[InstanceType]]:
        """Instance types by the image they launch with (order kept); types no image fits are left out."""
        out: dict[Ami, list[InstanceType]] = {}
        for it in instance_types:
            ami = self.for_instance_type(it)
            if ami is not None:
                out.setdefault(ami, []).append(it)
        return out


def accelerator_of(instance_type: InstanceType) -> str:
    cap = instance_type.capacity
    if cap.get(res.NVIDIA_GPU, 0) > 0:
        return NVIDIA
    if cap.get(res.NEURON, 0) > 0 or cap.get("aws.amazon.com/neuroncore", 0) > 0:
        return NEURON
    if cap.get(res.AMD_GPU, 0) > 0:
        return AMD
    manufacturer = instance_type.labels.get(wk.INSTANCE_GPU_MANUFACTURER, "").lower()
    if manufacturer in (NVIDIA, AMD):
        return manufacturer
    return NONE


@dataclass(frozen=True, slots=True)
class _Candidate:
    parameter: str
    architecture: str
    accelerators: frozenset[str] | None
    required: bool  # the family's plain image: its absence is an error, a variant's is not


def ssm_parameters(family: str, k8s_version: str, release: str = "latest") -> list[_Candidate]:
    """The public parameters naming the images of ``family`` for a Kubernetes version and release."""
    latest = release == "latest"
    out: list[_Candidate] = []
    if family == "AL2":
        base = f"/aws/service/eks/optimized-ami/{k8s_version}"
        rel = release if release.startswith("v") else f"v{release}"
        for suffix, stem, arch, accel, required in (
            ("", "amazon-eks-node", "amd64", {NONE}, True),
            ("-arm64", "amazon-eks-arm64-node", "arm64", {NONE}, False),
            ("-gpu", "amazon-eks-gpu-node", "amd64", {NVIDIA, NEURON}, False),
        ):
            leaf = "recommended" if latest else f"{stem}-{k8s_version}-{rel}"
            out.append(_Candidate(f"{base}/amazon-linux-2{suffix}/{leaf}/image_id", arch, frozenset(accel), required))
    elif family == "AL2023":
        base = f"/aws/service/eks/optimized-ami/{k8s_version}/amazon-linux-2023"
        rel = release if release.startswith("v") else f"v{release}"
        for arch_ec2, variant, accel, required in (
            ("x86_64", "standard", NONE, True),
            ("arm64", "standard", NONE, False),
            ("x86_64", "nvidia", NVIDIA, False),
            ("arm64", "nvidia", NVIDIA, False),
            ("x86_64", "neuron", NEURON, False),
        ):
            leaf = "recommended" if latest else f"amazon-eks-node-al2023-{arch_ec2}-{variant}-{k8s_version}-{rel}"
            out.append(
                _Candidate(
                    f"{base}/{arch_ec2}/{variant}/{leaf}/image_id",
                    _EC2_ARCH[arch_ec2],
                    frozenset({accel}),
                    required,
                )
            )
    elif family == "Bottlerocket":
        leaf = "latest" if latest else release.lstrip("v")
        for arch_ec2 in ("x86_64", "arm64"):
            arch = _EC2_ARCH[arch_ec2]
            out.append(
                _Candidate(
                    f"/aws/service/bottlerocket/aws-k8s-{k8s_version}/{arch_ec2}/{leaf}/image_id",
                    arch,
                    frozenset({NONE, NEURON}),
                    arch == "amd64",
                )
            )
            out.append(
                _Candidate(
                    f"/aws/service/bottlerocket/aws-k8s-{k8s_version}-nvidia/{arch_ec2}/{leaf}/image_id",
                    arch,
                    frozenset({NVIDIA}),
                    False,
                )
            )
    elif family == "Ubuntu":
        # Canonical moved EKS images from 20.04 to 22.04 over the versions; the newer release wins.
        for ubuntu in ("22.04", "20.04"):
            for arch in ("amd64", "arm64"):
                out.append(
                    _Candidate(
                        f"/aws/service/canonical/ubuntu/eks/{ubuntu}/{k8s_version}/stable/current/{arch}/hvm/ebs-gp2/ami-id",
                        arch,
                        frozenset({NONE}),
                        False,
                    )
                )
    elif family in WINDOWS_FAMILIES:
        year = family[-4:]
        out.append(
            _Candidate(
                f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s_version}/image_id",
                "amd64",
                None,
                True,
            )
        )
    else:
        raise AmiError(f"AMI family {family!r} publishes no SSM parameters; select images with amiSelectorTerms")
    return out


def _get_parameters(ssm: Any, names: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start in range(0, len(names), _SSM_BATCH):
        out = ssm.get_parameters(Names=list(names[start : start + _SSM_BATCH]))
        for p in out.get("Parameters", []):
            found[p["Name"]] = p["Value"]
    return found


def resolve_family(ssm: Any, family: str, k8s_version: str, release: str = "latest", where: str = "") -> list[Ami]:
    candidates = ssm_parameters(family, k8s_version, release)
    values = _get_parameters(ssm, [c.parameter for c in candidates])
    missing = [c.parameter for c in candidates if c.required and c.parameter not in values]
    if missing:
        what = f"{family}@{release}" if release != "latest" else family
        raise AmiError(
            f"{where}{what} for Kubernetes {k8s_version}: SSM parameter {missing[0]} does not exist "
            "(is the version or release right, and published in this region?)"
        )
    found: dict[tuple[str, frozenset[str] | None], Ami] = {}
    for c in candidates:  # the first candidate found for an (architecture, accelerators) wins
        if c.parameter in values:
            found.setdefault(
                (c.architecture, c.accelerators),
                Ami(values[c.parameter], c.architecture, family, c.accelerators, source=c.parameter),
            )
    if not found:
        raise AmiError(
            f"{where}{family} for Kubernetes {k8s_version}: none of the SSM parameters exists "
            f"(tried {', '.join(c.parameter for c in candidates)})"
        )
    return list(found.values())


def _describe_images(ec2: Any, term: SelectorTerm, where: str) -> list[dict]:
    filters: list[dict] = [{"Name": "state", "Values": ["available"]}, *tag_filters(term.tags)]
    kwargs: dict[str, Any] = {}
    if term.id:
        # A filter, not ImageIds: an id that does not exist selects nothing instead of failing the call.
        filters.append({"Name": "image-id", "Values": [term.id]})
    if term.name:
        filters.append({"Name": "name", "Values": [term.name]})
    if term.owner:
        kwargs["Owners"] = [o.strip() for o in term.owner.split(",") if o.strip()]
    elif term.name and not term.id:
        # A name alone could match anyone's public image: like Karpenter, only trust ours and Amazon's.
        kwargs["Owners"] = ["self", "amazon"]
    if len(filters) == 1 and "Owners" not in kwargs:
        raise AmiError(f"{where}: an empty AMI selector term would match every public image")
    images: list[dict] = []
    for page in ec2.get_paginator("describe_images").paginate(Filters=filters, **kwargs):
        images.extend(page.get("Images", []))
    return images


def resolve_selector(ec2: Any, terms: Sequence[SelectorTerm], family: str, where: str = "amiSelectorTerms") -> list[Ami]:
    """Images any term selects, the newest (CreationDate) per architecture."""
    found: dict[str, dict] = {}
    for i, term in enumerate(terms):
        for image in _describe_images(ec2, term, f"{where}[{i}]"):
            found.setdefault(image["ImageId"], image)
    newest: dict[str, dict] = {}
    for image in found.values():
        arch = _EC2_ARCH.get(image.get("Architecture", ""))
        if arch is None:
            continue
        cur = newest.get(arch)
        if cur is None or (image.get("CreationDate", ""), image["ImageId"]) > (cur.get("CreationDate", ""), cur["ImageId"]):
            newest[arch] = image
    if not newest:
        raise AmiError(f"{where}: no available x86_64 or arm64 image matches the selector terms")
    return [
        Ami(
            image["ImageId"],
            arch,
            family,
            None,
            name=image.get("Name", ""),
            creation_date=image.get("CreationDate", ""),
            source=where,
        )
        for arch, image in sorted(newest.items())
    ]


def resolve(node_class: NodeClass, ssm: Any, ec2: Any, k8s_version: str) -> ResolvedAmis:
    """The images ``node_class`` launches for a cluster running ``k8s_version``."""
    family = family_of(node_class)
    terms = node_class.ami_selector_terms
    aliases = [t for t in terms if t.alias]
    where = where_of(node_class)
    if aliases:
        if len(terms) > 1:
            raise AmiError(f"{where}amiSelectorTerms: an alias term cannot be combined with other terms")
        _, release = parse_alias(aliases[0].alias or "", where)
        return ResolvedAmis(family, tuple(resolve_family(ssm, family, k8s_version, release, where)))
    if terms:
        return ResolvedAmis(family, tuple(resolve_selector(ec2, terms, family, f"{where}amiSelectorTerms")))
    if family == "Custom":
        raise AmiError(f"{where}amiFamily Custom needs amiSelectorTerms naming the images to launch")
    return ResolvedAmis(family, tuple(resolve_family(ssm, family, k8s_version, "latest", where)))


