"""A node class's AMI family: the one its alias or amiFamily names, which decides the user data format,
the default block devices and how the bootstrap reserves resources. Parsing only; ``aws/ami`` resolves images."""

from __future__ import annotations

import re

from .nodepool import AMI_ALIASES, WINDOWS_FAMILIES, NodeClass

FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Ubuntu", "Windows2019", "Windows2022", "Windows2025", "Custom")


# Before karpenter.k8s.aws/v1 an AWSNodeTemplate / EC2NodeClass without amiFamily meant AL2.
DEFAULT_FAMILY = "AL2"


class AmiError(ValueError):
    """No usable image: the message names the node class field and what was tried."""


def family_of(node_class: NodeClass) -> str:
    """The family that decides the user data format: an alias's, else amiFamily, else AL2."""
    alias = next((t.alias for t in node_class.ami_selector_terms if t.alias), None)
    if alias:
        return parse_alias(alias, where_of(node_class))[0]
    family = node_class.ami_family or DEFAULT_FAMILY
    canonical = {f.lower(): f for f in FAMILIES}.get(family.lower())
    if canonical is None:
        raise AmiError(f"{where_of(node_class)}amiFamily: {family!r} is not allowed; allowed are {', '.join(FAMILIES)}")
    return canonical


def parse_alias(alias: str, where: str = "") -> tuple[str, str]:
    """``al2023@latest`` -> ("AL2023", "latest"); ``bottlerocket@v1.26.2`` -> ("Bottlerocket", "v1.26.2").

    ``where`` prefixes error messages (e.g. "ssm:/nodescale/demo/nodepools/a#1: ").
    """
    name, _, version = alias.partition("@")
    family = AMI_ALIASES.get(name.strip().lower())
    prefix = where
    if family is None:
        raise AmiError(
            f"{prefix}amiSelectorTerms alias {alias!r}: family {name!r} is not allowed; "
            f"allowed are {', '.join(sorted(AMI_ALIASES))} followed by @latest or @<version>"
        )
    version = version.strip() or "latest"
    if family in WINDOWS_FAMILIES and version != "latest":
        raise AmiError(f"{prefix}amiSelectorTerms alias {alias!r}: Windows images can only be selected @latest")
    if version != "latest" and not re.fullmatch(r"v?[0-9][0-9A-Za-z.\-]*", version):
        raise AmiError(f"{prefix}amiSelectorTerms alias {alias!r}: version {version!r} is not a release name")
    return family, version


def where_of(node_class: NodeClass) -> str:
    label = node_class.source or f"node class {node_class.name}"
    return f"{label}: "
