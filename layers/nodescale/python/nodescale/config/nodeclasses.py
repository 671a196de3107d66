"""AWSNodeTemplate (karpenter.k8s.aws/v1alpha1) and EC2NodeClass (v1beta1, v1) manifests to the internal NodeClass.

Block device mappings come out in the EC2 launch template shape (VolumeSize in GiB) so the
launcher can pass them on unchanged; metadata options come out complete, with the defaults of
the API generation filled in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..model.nodepool import AMI_ALIASES, WINDOWS_FAMILIES, NodeClass, SelectorTerm
from . import capacityreservations
from .errors import Collector, ConfigError, show
from .fields import FieldError, attempt, boolean, bytes_quantity, integer, items, mapping, string, string_map
from .kubelet import parse_kubelet
from .nodepools import object_name

GROUP = "karpenter.k8s.aws"
V1ALPHA1 = "karpenter.k8s.aws/v1alpha1"
V1BETA1 = "karpenter.k8s.aws/v1beta1"
V1 = "karpenter.k8s.aws/v1"

_FAMILIES_V1ALPHA1 = ("AL2", "AL2023", "Bottlerocket", "Ubuntu", "Windows2019", "Windows2022", "Custom")
_FAMILIES_V1BETA1 = _FAMILIES_V1ALPHA1
_FAMILIES_V1 = ("AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025", "Custom")
_VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
_GIB = 2**30
_MAX_VOLUME = 64 * 2**40
# Tags the system owns: a node class may not set them (Karpenter's list, plus nodescale's ownership tag).
RESTRICTED_TAGS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.sh/provisioner-name",
    "karpenter.sh/managed-by",
    "karpenter.k8s.aws/ec2nodeclass",
    "nodescale.io/cluster",
)
# The AWS provider's metadata defaults: v1alpha1 and v1beta1 allowed 2 hops (containers reach IMDS),
# v1 lowered it to 1.
_IMDS_DEFAULTS = {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpTokens": "required"}


def convert_node_template(doc: Mapping, source: str) -> tuple[NodeClass | None, list[ConfigError]]:
    """A karpenter.k8s.aws/v1alpha1 AWSNodeTemplate. amiFamily defaulted to AL2 in that release."""
    c = Collector(source)
    name = _name(c, doc)
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    if spec.get("launchTemplate") is not None:
        c.fail("spec.launchTemplate", "a pre-made launch template is not supported; describe the nodes in fields")
    subnets = attempt(c, _legacy_selector, spec.get("subnetSelector"), "spec.subnetSelector", "subnets", ())
    groups = attempt(
        c, _legacy_selector, spec.get("securityGroupSelector"), "spec.securityGroupSelector", "security groups", ()
    )
    amis = attempt(c, _legacy_selector, spec.get("amiSelector"), "spec.amiSelector", None, ("aws::name", "aws::owners"))
    family = attempt(c, string, spec.get("amiFamily"), "spec.amiFamily", _FAMILIES_V1ALPHA1) or "AL2"
    if family == "Custom" and not amis:
        c.fail("spec.amiSelector", "is required with amiFamily Custom (nodescale cannot guess a custom AMI)")
    common = _common(c, spec, hop_limit=2)
    if not c.ok or name is None or common is None:
        return None, c.errors
    node_class = _node_class(
        name, family, amis, subnets, groups, role=None, api_version=V1ALPHA1, source=source, kind="AWSNodeTemplate",
        **common,
    )
    return node_class, c.errors


def convert_ec2nodeclass(doc: Mapping, source: str) -> tuple[NodeClass | None, list[ConfigError]]:
    """A karpenter.k8s.aws/v1beta1 or v1 EC2NodeClass."""
    api = doc.get("apiVersion")
    c = Collector(source)
    name = _name(c, doc)
    spec = attempt(c, mapping, doc.get("spec"), "spec", default={}) or {}
    subnets = attempt(c, _terms, spec.get("subnetSelectorTerms"), "spec.subnetSelectorTerms", ("tags", "id"), True)
    groups = attempt(
        c, _terms, spec.get("securityGroupSelectorTerms"), "spec.securityGroupSelectorTerms", ("tags", "id", "name"), True
    )
    kubelet = None
    reservations: tuple = ()
    if api == V1:
        path = f"spec.{capacityreservations.FIELD}"
        reservations = attempt(
            c, capacityreservations.parse_terms, spec.get(capacityreservations.FIELD), path, default=()
        ) or ()
        amis = attempt(
            c, _terms, spec.get("amiSelectorTerms"), "spec.amiSelectorTerms", ("tags", "id", "name", "owner", "alias"), True
        )
        family = attempt(c, _v1_family, spec.get("amiFamily"), amis)
        kubelet = attempt(c, parse_kubelet, spec.get("kubelet"), "spec.kubelet")
        hop_limit = 1
    else:
        amis = attempt(c, _terms, spec.get("amiSelectorTerms"), "spec.amiSelectorTerms", ("tags", "id", "name", "owner"), False)
        # v1beta1 had no default: amiFamily was a required field.
        family = attempt(c, string, spec.get("amiFamily"), "spec.amiFamily", _FAMILIES_V1BETA1, required=True)
        if family == "Custom" and not amis:
            c.fail("spec.amiSelectorTerms", "is required with amiFamily Custom")
        hop_limit = 2
    role = attempt(c, string, spec.get("role"), "spec.role")
    common = _common(c, spec, hop_limit=hop_limit)
    if common is not None:
        if role and common["instance_profile"]:
            c.fail("spec.role", "role and instanceProfile are mutually exclusive; give one of them")
        elif not role and not common["instance_profile"]:
            c.fail("spec.role", "is required (or spec.instanceProfile): nodes need an IAM identity")
    if not c.ok or name is None or common is None or family is None:
        return None, c.errors
    node_class = _node_class(
        name, family, amis, subnets, groups, role=role, kubelet=kubelet, api_version=str(api), source=source,
        kind="EC2NodeClass", capacity_reservation_selector_terms=reservations, **common,
    )
    return node_class, c.errors


def _node_class(
    name: str, family: str, amis: tuple | None, subnets: tuple | None, groups: tuple | None, **fields: Any
) -> NodeClass:
    """A NodeClass of both kinds: selector terms a field did not give are empty."""
    return NodeClass(
        name=name,
        ami_family=family,
        ami_selector_terms=amis or (),
        subnet_selector_terms=subnets or (),
        security_group_selector_terms=groups or (),
        **fields,
    )


def _name(c: Collector, doc: Mapping) -> str | None:
    meta = attempt(c, mapping, doc.get("metadata"), "metadata", default={}) or {}
    return attempt(c, object_name, meta.get("name"), "metadata.name")


def _common(c: Collector, spec: Mapping, hop_limit: int) -> dict | None:
    """Fields every generation shares, with the same meaning."""
    before = len(c.errors)
    out = {
        "instance_profile": attempt(c, string, spec.get("instanceProfile"), "spec.instanceProfile"),
        "user_data": attempt(c, string, spec.get("userData"), "spec.userData"),
        "tags": attempt(c, _tags, spec.get("tags"), "spec.tags", default={}),
        "metadata_options": attempt(c, _metadata_options, spec.get("metadataOptions"), hop_limit, default={}),
        "block_device_mappings": (),
        "root_volume_device": None,
        "associate_public_ip_address": attempt(
            c, boolean, spec.get("associatePublicIPAddress"), "spec.associatePublicIPAddress"
        ),
        "detailed_monitoring": bool(attempt(c, boolean, spec.get("detailedMonitoring"), "spec.detailedMonitoring")),
        "instance_store_policy": attempt(c, string, spec.get("instanceStorePolicy"), "spec.instanceStorePolicy", ("RAID0",)),
        "context": attempt(c, string, spec.get("context"), "spec.context"),
    }
    mappings = attempt(c, _block_devices, spec.get("blockDeviceMappings"), "spec.blockDeviceMappings")
    if mappings is not None:
        out["block_device_mappings"], out["root_volume_device"] = mappings
    return out if len(c.errors) == before else None


def _tags(raw: object, path: str) -> dict[str, str]:
    tags = string_map(raw, path)
    for key in tags:
        if not key:
            raise FieldError(path, "empty tag keys are not allowed")
        if key in RESTRICTED_TAGS or key.startswith("kubernetes.io/cluster/"):
            raise FieldError(
                f"{path}.{key}", "this tag is set by the system and may not be given; restricted are "
                + ", ".join(RESTRICTED_TAGS) + " and kubernetes.io/cluster/*"
            )
    return tags


def _metadata_options(raw: object, hop_limit: int) -> dict[str, object]:
    path = "spec.metadataOptions"
    m = mapping(raw, path)
    out: dict[str, object] = dict(_IMDS_DEFAULTS)
    out["httpPutResponseHopLimit"] = hop_limit
    for key, choices in (
        ("httpEndpoint", ("enabled", "disabled")),
        ("httpProtocolIPv6", ("enabled", "disabled")),
        ("httpTokens", ("required", "optional")),
    ):
        value = string(m.get(key), f"{path}.{key}", choices)
        if value is not None:
            out[key] = value
    hops = integer(m.get("httpPutResponseHopLimit"), f"{path}.httpPutResponseHopLimit", 1, 64)
    if hops is not None:
        out["httpPutResponseHopLimit"] = hops
    return out


def _block_devices(raw: object, path: str) -> tuple[tuple[dict, ...], str | None]:
    out = []
    root = None
    for i, item in enumerate(items(raw, path)):
        p = f"{path}[{i}]"
        m = mapping(item, p)
        device = string(m.get("deviceName"), f"{p}.deviceName", required=True)
        if boolean(m.get("rootVolume"), f"{p}.rootVolume"):
            if root is not None:
                raise FieldError(f"{p}.rootVolume", f"only one mapping may be the root volume; {root} already is")
            root = device
        ebs_raw = m.get("ebs")
        if ebs_raw is None:
            raise FieldError(f"{p}.ebs", "is required; give at least volumeSize or snapshotID")
        ebs = mapping(ebs_raw, f"{p}.ebs")
        e: dict[str, object] = {}
        if ebs.get("volumeSize") is not None:
            size = bytes_quantity(ebs["volumeSize"], f"{p}.ebs.volumeSize")
            if not _GIB <= size <= _MAX_VOLUME:
                raise FieldError(
                    f"{p}.ebs.volumeSize", f"{show(ebs['volumeSize'])} is not allowed; expected 1Gi to 64Ti"
                )
            e["VolumeSize"] = math.ceil(size / _GIB)  # EC2 takes GiB
        elif ebs.get("snapshotID") is None:
            raise FieldError(f"{p}.ebs", "volumeSize or snapshotID must be given")
        for field, key, reader in (
            ("volumeType", "VolumeType", lambda v, q: string(v, q, _VOLUME_TYPES)),
            ("iops", "Iops", lambda v, q: integer(v, q, 100, 256000)),
            ("throughput", "Throughput", lambda v, q: integer(v, q, 125, 2000)),
            ("encrypted", "Encrypted", boolean),
            ("kmsKeyID", "KmsKeyId", string),
            ("deleteOnTermination", "DeleteOnTermination", boolean),
            ("snapshotID", "SnapshotId", string),
        ):
            value = reader(ebs.get(field), f"{p}.ebs.{field}")
            if value is not None:
                e[key] = value
        out.append({"DeviceName": device, "Ebs": e})
    return tuple(out), root


def _legacy_selector(raw: object, path: str, what: str | None, extra_keys: tuple[str, ...]) -> tuple[SelectorTerm, ...]:
    """v1alpha1 map selectors: keys are tags (ANDed; "" or "*" match any value), except
    `aws-ids`/`aws::ids` (comma-separated ids, ORed) and, for AMIs, `aws::name` and
    `aws::owners` (comma-separated, ORed)."""
    if raw is None:
        if what is not None:
            raise FieldError(path, f"is required; select the {what} by tags or aws-ids")
        return ()
    sel = string_map(raw, path)
    if not sel and what is not None:
        raise FieldError(path, f"is empty; select the {what} by tags or aws-ids")
    ids: list[str] = []
    names: list[str | None] = [None]
    owners: list[str | None] = [None]
    tags: dict[str, str] = {}
    for key, value in sel.items():
        if key in ("aws-ids", "aws::ids"):
            ids += _split(value, f"{path}.{key}")
        elif key == "aws::name" and key in extra_keys:
            names = [value]
        elif key == "aws::owners" and key in extra_keys:
            owners = list(_split(value, f"{path}.{key}"))
        elif key.startswith("aws::"):
            allowed = ", ".join(("aws::ids",) + extra_keys)
            raise FieldError(f"{path}.{key}", f"unknown selector; allowed are {allowed}, aws-ids, or tag keys")
        else:
            tags[key] = value or "*"
    if ids:
        return tuple(SelectorTerm(tags=dict(tags), id=i) for i in ids)
    return tuple(SelectorTerm(tags=dict(tags), name=n, owner=o) for n in names for o in owners)


def _split(value: str, path: str) -> list[str]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts:
        raise FieldError(path, f"{show(value)} is not allowed; expected one or more comma-separated values")
    return parts


def _terms(raw: object, path: str, fields: tuple[str, ...], required: bool) -> tuple[SelectorTerm, ...]:
    """*SelectorTerms: ORed terms, each of tags (ANDed) or one exclusive id/alias, or name (+ owner)."""
    if raw is None or raw == []:
        if required:
            raise FieldError(path, f"is required and may not be empty; each term gives one of {', '.join(fields)}")
        return ()
    out = []
    terms = items(raw, path)
    for i, item in enumerate(terms):
        p = f"{path}[{i}]"
        t = mapping(item, p)
        given = [k for k in fields if t.get(k) not in (None, {}, "")]
        if not given or given == ["owner"]:
            raise FieldError(p, f"expected at least one of {', '.join(f for f in fields if f != 'owner')}")
        for exclusive in ("id", "alias"):
            if exclusive in given and len(given) > 1:
                raise FieldError(p, f"{exclusive!r} cannot be combined with other fields in a term")
        if "name" in given and "name" in fields and "owner" not in fields and len(given) > 1:
            raise FieldError(p, "'name' cannot be combined with other fields in a security group term")
        tags = string_map(t.get("tags"), f"{p}.tags")
        for k, v in tags.items():
            if not k or not v:
                raise FieldError(f"{p}.tags", "empty tag keys or values are not allowed; use \"*\" to match any value")
        alias = string(t.get("alias"), f"{p}.alias")
        if alias is not None:
            if len(terms) != 1:
                raise FieldError(p, "an alias must be the only AMI selector term")
            _check_alias(alias, f"{p}.alias")
        out.append(
            SelectorTerm(
                tags=tags,
                id=string(t.get("id"), f"{p}.id"),
                name=string(t.get("name"), f"{p}.name"),
                owner=string(t.get("owner"), f"{p}.owner"),
                alias=alias,
            )
        )
    return tuple(out)


def _check_alias(alias: str, path: str) -> None:
    family, sep, version = alias.partition("@")
    if not sep or not family.isalnum() or not version:
        raise FieldError(path, f"{show(alias)} is not allowed; expected family@version like al2023@latest")
    if family not in AMI_ALIASES:
        raise FieldError(path, f"{show(alias)} is not allowed; families are {', '.join(AMI_ALIASES)}")
    if AMI_ALIASES[family] in WINDOWS_FAMILIES and version != "latest":
        raise FieldError(path, f"{show(alias)} is not allowed; Windows families only take @latest")


def _v1_family(raw: object, amis: tuple[SelectorTerm, ...] | None) -> str | None:
    """v1 derives amiFamily from an alias; without one amiFamily is required."""
    path = "spec.amiFamily"
    family = string(raw, path, _FAMILIES_V1)
    alias = next((t.alias for t in amis or () if t.alias), None)
    if alias is None:
        if family is None and amis is not None:
            raise FieldError(path, "is required when amiSelectorTerms has no alias; allowed are " + ", ".join(_FAMILIES_V1))
        return family
    derived = AMI_ALIASES[alias.partition("@")[0]]
    if family is not None and family not in (derived, "Custom"):
        raise FieldError(path, f"{show(family)} does not match the alias {alias}; use {derived}, Custom, or leave it out")
    return family or derived
