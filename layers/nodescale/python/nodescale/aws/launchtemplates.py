"""Launch templates, one per distinct node configuration, named by a hash of what shapes the node.

The name is ``nodescale/<cluster>/<hash>``; the hash covers exactly the launch template data sent to
EC2 (AMI, user data, security groups, instance profile, IMDS, block devices, tags and the resource
types they go on, monitoring, public IP), so the same configuration always finds the same template, in
every run and every function, and any change to what a launch gets makes a new one. Templates carry
the ownership tags, and only templates with this cluster's tag are ever deleted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from .. import clock
from ..model.nodepool import NodeClass
from . import tags as tagging

log = logging.getLogger(__name__)

PREFIX = "nodescale/"
_NAME_MAX = 128
_HASH_LEN = 20
# What a launch from the template creates and tags with the ownership tag. The functions' IAM policy
# (infra/iam.py, LaunchOnlyTaggedForThisCluster) requires aws:RequestTag/nodescale.io/cluster on every
# instance, volume and network interface a launch creates, and AWS denies a launch any of whose created
# resources fails that condition. The Fleet request tags instances and volumes (and the fleet), but
# CreateFleet's TagSpecifications take no network-interface ("If the fleet type is instant, specify a
# resource type of fleet to tag the fleet or instance to tag the instances at launch", EC2 API
# Reference, CreateFleet), so the network interface is tagged here, as Karpenter tags its network
# interfaces from its launch templates. A template may tag "instance | volume | network-interface |
# spot-instances-request" only (EC2 API Reference, LaunchTemplateTagSpecificationRequest), and a type
# the launch does not create fails it: spot-instances-request would fail every on-demand launch from a
# template that also serves the on-demand fallback, so it is left out and the policy does not require
# its tag (see infra/iam.py, LAUNCH_UNTAGGED_TYPES).
LAUNCH_TAGGED_RESOURCE_TYPES = ("instance", "volume", "network-interface")


class LaunchTemplateError(ValueError):
    """A node class setting that cannot become launch template data; the message names the field."""


_METADATA_KEYS = {
    "httpendpoint": "HttpEndpoint",
    "httpprotocolipv6": "HttpProtocolIpv6",
    "httpputresponsehoplimit": "HttpPutResponseHopLimit",
    "httptokens": "HttpTokens",
    "instancemetadatatags": "InstanceMetadataTags",
}


def metadata_options(node_class: NodeClass) -> dict[str, Any]:
    """IMDS options in EC2's shape, over Karpenter's defaults (IMDSv2 only; hop limit 1 from the
    v1 API on, 2 before it, which is what each API generation's users got)."""
    hop_limit = 1 if node_class.api_version.endswith("/v1") else 2
    out: dict[str, Any] = {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": hop_limit,
        "HttpTokens": "required",
    }
    for key, value in (node_class.metadata_options or {}).items():
        ec2_key = _METADATA_KEYS.get(str(key).lower())
        if ec2_key is None:
            raise LaunchTemplateError(
                f"{node_class.source or node_class.name}: metadataOptions.{key} is not known; allowed are "
                "httpEndpoint, httpProtocolIPv6, httpPutResponseHopLimit, httpTokens, instanceMetadataTags"
            )
        out[ec2_key] = int(value) if ec2_key == "HttpPutResponseHopLimit" else str(value)  # type: ignore[arg-type]
    return out


@dataclass(frozen=True)
class LaunchTemplateSpec:
    """Everything one launch template holds; equal specs give equal names."""

    cluster: str
    image_id: str
    user_data: str  # plain text
    security_group_ids: tuple[str, ...]
    instance_profile: str | None  # a name or an ARN
    metadata_options: Mapping[str, Any] = field(default_factory=dict)
    block_device_mappings: tuple[Mapping[str, Any], ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    detailed_monitoring: bool = False
    associate_public_ip: bool | None = None
    # Capacity reservations (Karpenter's targeted launch mode, for node classes that select reservations):
    # a reserved launch's template targets one reservation ("capacity-reservations-only"), a capacity
    # block's also asks for the capacity-block market; the node class's other templates opt out of open
    # reservations ("none"), so a spot or on-demand launch never eats into a reservation's count unseen.
    # Left out of ``settings_hash``: which reservation a node runs in is not drift (Karpenter hashes the
    # selector terms with hash:"ignore").
    capacity_reservation_id: str = ""
    capacity_reservation_type: str = ""
    reservations_targeted: bool = False
    # The user data drift compares: the node class's, without the max-pods each type's template writes
    # (Karpenter hashes the node class, not its templates). None: ``user_data`` itself.
    hashed_user_data: str | None = None

    def data(self) -> dict[str, Any]:
        """The ``LaunchTemplateData`` for CreateLaunchTemplate.

        Instances also get ``settings_hash`` as a tag, so drift is one comparison of an instance's
        tag with the hash today's configuration gives (the image is compared on its own).
        """
        data = self._node_data()
        tags = {**data.pop("Tags"), tagging.CONFIG_HASH: self.settings_hash}
        data["TagSpecifications"] = tagging.specifications(LAUNCH_TAGGED_RESOURCE_TYPES, tags)
        if self.capacity_reservation_id:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationPreference": "capacity-reservations-only",
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation_id},
            }
            if self.capacity_reservation_type == "capacity-block":
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        elif self.reservations_targeted:
            data["CapacityReservationSpecification"] = {"CapacityReservationPreference": "none"}
        return data

    def _node_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "MetadataOptions": dict(self.metadata_options),
            "Monitoring": {"Enabled": self.detailed_monitoring},
        }
        if self.user_data:
            data["UserData"] = base64.b64encode(self.user_data.encode()).decode()
        groups = sorted(self.security_group_ids)
        if self.associate_public_ip is None:
            data["SecurityGroupIds"] = groups
        else:
            # The public IP choice lives on the interface, and EC2 then wants the groups there too.
            data["NetworkInterfaces"] = [
                {"DeviceIndex": 0, "AssociatePublicIpAddress": self.associate_public_ip, "Groups": groups}
            ]
        if self.instance_profile:
            key = "Arn" if self.instance_profile.startswith("arn:") else "Name"
            data["IamInstanceProfile"] = {key: self.instance_profile}
        if self.block_device_mappings:
            data["BlockDeviceMappings"] = [dict(b) for b in self.block_device_mappings]
        data["Tags"] = dict(sorted(self.tags.items()))  # hashed here, sent as TagSpecifications
        return data

    @property
    def config_hash(self) -> str:
        """The hash of the whole template data, tag specifications included: a template made by an earlier
        release with other tag specifications (before network interfaces were tagged) has another name,
        so it is never reused, and a new one is made beside it; the old one is deleted once unused. The
        node's own configuration (``settings_hash``, which drift compares) does not change with it."""
        canonical = json.dumps(self.data(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:_HASH_LEN]

    @property
    def settings_hash(self) -> str:
        """The hash of everything but the image: equal for all templates of one pool and node class,
        so one fleet request can tag its instances with it whichever image each one got."""
        data = self._node_data()
        del data["ImageId"]
        if self.hashed_user_data is not None:
            data.pop("UserData", None)
            if self.hashed_user_data:
                data["UserData"] = base64.b64encode(self.hashed_user_data.encode()).decode()
        # The same for every node of the cluster: left out so that a release adding it is not drift.
        data["Tags"].pop(tagging.EKS_CLUSTER, None)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:_HASH_LEN]

    @property
    def name(self) -> str:
        cluster = self.cluster
        room = _NAME_MAX - len(PREFIX) - 1 - _HASH_LEN
        if len(cluster) > room:
            cluster = cluster[:room]
        return f"{PREFIX}{cluster}/{self.config_hash}"


@dataclass(frozen=True, slots=True)
class LaunchTemplateRef:
    name: str
    id: str
    created: bool  # this call created it (False: an existing one was reused)


def _find(ec2: Any, name: str) -> dict | None:
    # A name filter, not LaunchTemplateNames: a missing template is an empty answer, not an error.
    found = ec2.describe_launch_templates(Filters=[{"Name": "launch-template-name", "Values": [name]}])
    templates = found.get("LaunchTemplates", [])
    return templates[0] if templates else None


def ensure(ec2: Any, spec: LaunchTemplateSpec) -> LaunchTemplateRef:
    """The template for ``spec``: the existing one when present, else a new one (a concurrent
    creator winning the race is fine: its template is the same by construction)."""
    name = spec.name
    existing = _find(ec2, name)
    if existing is not None:
        return LaunchTemplateRef(name, existing["LaunchTemplateId"], False)
    template_tags = {**spec.tags, **tagging.ownership(spec.cluster)}
    try:
        out = ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData=spec.data(),
            TagSpecifications=tagging.specifications(("launch-template",), template_tags),
        )
    except ClientError as exc:
        if "AlreadyExists" not in exc.response.get("Error", {}).get("Code", ""):
            raise
        existing = _find(ec2, name)
        if existing is None:
            raise
        return LaunchTemplateRef(name, existing["LaunchTemplateId"], False)
    log.info("created launch template", extra={"launch_template": name, "image_id": spec.image_id})
    return LaunchTemplateRef(name, out["LaunchTemplate"]["LaunchTemplateId"], True)


def list_managed(ec2: Any, cluster: str) -> list[dict]:
    """This cluster's launch templates (by tag, and checked again: a filter is not a guarantee)."""
    out = []
    paginator = ec2.get_paginator("describe_launch_templates")
    for page in paginator.paginate(Filters=tagging.cluster_filters(cluster)):
        for lt in page.get("LaunchTemplates", []):
            if tagging.is_managed(lt.get("Tags"), cluster):
                out.append(lt)
    return out


def cleanup_unused(
    ec2: Any,
    cluster: str,
    in_use_names: Iterable[str],
    min_age_seconds: float = 600.0,
    now: datetime | None = None,
) -> list[str]:
    """Delete this cluster's templates not in ``in_use_names``; returns the deleted names.

    Templates younger than ``min_age_seconds`` are kept: another function may have just made one
    for a launch that is under way.
    """
    keep = set(in_use_names)
    now = now or clock.now()
    deleted = []
    for lt in list_managed(ec2, cluster):
        name = lt["LaunchTemplateName"]
        if name in keep or not name.startswith(PREFIX):
            continue
        created = lt.get("CreateTime")
        if isinstance(created, datetime):
            created = created if created.tzinfo else created.replace(tzinfo=UTC)
            if (now - created).total_seconds() < min_age_seconds:
                continue
        try:
            ec2.delete_launch_template(LaunchTemplateId=lt["LaunchTemplateId"])
        except ClientError as exc:
            if "NotFound" not in exc.response.get("Error", {}).get("Code", ""):
                raise
            continue
        deleted.append(name)
        log.info("deleted unused launch template", extra={"launch_template": name})
    return deleted

